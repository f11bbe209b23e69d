import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local OAuth 2.0 provider for the integration tests, on loopback: an authorize endpoint that
 * approves at once (302 back to redirect_uri with a code, or with ?error when told to deny), a
 * token endpoint (authorization_code with PKCE S256 checked, refresh_token), a revocation
 * endpoint, and the chat and message APIs playbooks notify through. It records what it was sent.
 */
export interface FakeProvider {
  url: string;
  /** The INTEGRATION_<NAME>_* variables pointing at this provider. */
  env(name: string, signingSecret?: string): Record<string, string>;
  issued: Array<{ access: string; refresh: string }>;
  revoked: string[];
  messages: Array<{ path: string; auth: string; body: Record<string, unknown> }>;
  refreshes: number;
  /** The next authorize request is denied (error=access_denied). */
  denyNext(): void;
  close(): Promise<void>;
}

export async function startFakeProvider(
  t: { teardown(f: () => unknown): void },
  expiresIn = 3600,
): Promise<FakeProvider> {
  const codes = new Map<string, { challenge: string; redirect: string }>();
  const refreshTokens = new Set<string>();
  const p = {
    issued: [] as FakeProvider['issued'],
    revoked: [] as string[],
    messages: [] as FakeProvider['messages'],
    refreshes: 0,
    deny: false,
  };
  const issue = () => {
    const access = `at-${randomBytes(12).toString('hex')}`;
    const refresh = `rt-${randomBytes(12).toString('hex')}`;
    p.issued.push({ access, refresh });
    refreshTokens.add(refresh);
    return {
      access_token: access,
      refresh_token: refresh,
      token_type: 'Bearer',
      expires_in: expiresIn,
      account: 'team@example.com',
    };
  };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString();
      const reply = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (url.pathname === '/authorize') {
        const redirect = new URL(url.searchParams.get('redirect_uri') ?? '');
        redirect.searchParams.set('state', url.searchParams.get('state') ?? '');
        if (p.deny) {
          p.deny = false;
          redirect.searchParams.set('error', 'access_denied');
          redirect.searchParams.set('error_description', 'The user said no');
        } else {
          const code = randomBytes(8).toString('hex');
          codes.set(code, {
            challenge: url.searchParams.get('code_challenge') ?? '',
            redirect: url.searchParams.get('redirect_uri') ?? '',
          });
          redirect.searchParams.set('code', code);
        }
        return void res.writeHead(302, { location: redirect.href }).end();
      }
      const form = new URLSearchParams(raw);
      if (url.pathname === '/token') {
        if (form.get('client_id') !== 'client-1' || form.get('client_secret') !== 'secret-1')
          return reply(401, { error: 'invalid_client' });
        if (form.get('grant_type') === 'authorization_code') {
          const c = codes.get(form.get('code') ?? '');
          codes.delete(form.get('code') ?? '');
          const verifier = form.get('code_verifier') ?? '';
          if (!c || c.redirect !== form.get('redirect_uri')) return reply(400, { error: 'invalid_grant' });
          if (createHash('sha256').update(verifier).digest('base64url') !== c.challenge)
            return reply(400, { error: 'invalid_grant', error_description: 'PKCE verification failed' });
          return reply(200, issue());
        }
        if (form.get('grant_type') === 'refresh_token') {
          const rt = form.get('refresh_token') ?? '';
          if (!refreshTokens.delete(rt)) return reply(400, { error: 'invalid_grant' });
          p.refreshes++;
          return reply(200, issue());
        }
        return reply(400, { error: 'unsupported_grant_type' });
      }
      if (url.pathname === '/revoke') {
        p.revoked.push(form.get('token') ?? '');
        return void res.writeHead(200).end();
      }
      if (url.pathname === '/api/chat.postMessage' || url.pathname === '/api/messages') {
        p.messages.push({ path: url.pathname, auth: req.headers.authorization ?? '', body: JSON.parse(raw) });
        return reply(200, { ok: true });
      }
      reply(404, { error: 'not_found' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  t.teardown(close);
  return {
    url,
    env: (name, signingSecret) => {
      const n = `INTEGRATION_${name.toUpperCase()}_`;
      return {
        [`${n}AUTHORIZE_URL`]: `${url}/authorize`,
        [`${n}TOKEN_URL`]: `${url}/token`,
        [`${n}REVOKE_URL`]: `${url}/revoke`,
        [`${n}API_URL`]: `${url}/api`,
        [`${n}CLIENT_ID`]: 'client-1',
        [`${n}CLIENT_SECRET`]: 'secret-1',
        ...(signingSecret ? { [`${n}SIGNING_SECRET`]: signingSecret } : {}),
      };
    },
    get issued() {
      return p.issued;
    },
    get revoked() {
      return p.revoked;
    },
    get messages() {
      return p.messages;
    },
    get refreshes() {
      return p.refreshes;
    },
    denyNext: () => {
      p.deny = true;
    },
    close,
  };
}
