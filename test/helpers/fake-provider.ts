import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local OAuth 2.0 provider for the integration tests, on loopback: an authorize endpoint that
 * approves at once (302 back to redirect_uri with a code, or with ?error when told to deny), a
 * token endpoint (authorization_code with PKCE S256 checked, refresh_token; an OpenID Connect
 * id_token naming the account, as Google's and Microsoft's do), a revocation endpoint, and the
 * APIs playbooks notify through, at the providers' paths: Slack's chat.postMessage, Gmail's
 * users.messages.send, Microsoft Graph's sendMail and channel messages. The APIs accept only a live
 * access token (issued, not expired, not revoked) and answer 401 otherwise, as providers do. It
 * records what it was sent; a test can shorten token lifetimes, invalidate the access tokens
 * issued so far, refuse refreshes and slow them down.
 */
export interface FakeProvider {
  url: string;
  /** The INTEGRATION_<NAME>_* variables pointing at this provider. */
  env(name: string, signingSecret?: string): Record<string, string>;
  issued: Array<{ access: string; refresh: string }>;
  revoked: string[];
  /** What the APIs accepted. */
  messages: Array<{ path: string; auth: string; body: Record<string, unknown> }>;
  /** Every API request, accepted (200) or refused for its token (401). */
  calls: Array<{ path: string; token: string; status: number }>;
  /** Refreshes that issued tokens. */
  refreshes: number;
  /** Every refresh_token grant request, refused ones included. */
  refreshRequests: number;
  /** The next authorize request is denied (error=access_denied). */
  denyNext(): void;
  /** The lifetime (expires_in, seconds) of the tokens issued from now on. */
  setLifetime(seconds: number): void;
  /** Whether the APIs accept this access token now. */
  accepts(access: string): boolean;
  /** The access tokens issued so far stop working, as when a provider revokes them on its side. */
  invalidateAccessTokens(): void;
  /** Refresh requests are answered 400 invalid_grant (the grant was revoked) while on. */
  refuseRefresh(on: boolean): void;
  /** Refresh answers come this late, so that concurrent refreshes overlap. */
  setRefreshDelay(ms: number): void;
  /** The next API requests with a live token get these answers, in order (a fault injected). */
  answerNext(...answers: FakeAnswer[]): void;
  close(): Promise<void>;
}

const API_PATHS = [
  /^\/api\/chat\.postMessage$/,
  /^\/api\/gmail\/v1\/users\/me\/messages\/send$/,
  /^\/api\/me\/sendMail$/,
  /^\/api\/teams\/[^/]+\/channels\/[^/]+\/messages$/,
];

export async function startFakeProvider(
  t: { teardown(f: () => unknown): void },
  expiresIn = 3600,
): Promise<FakeProvider> {
  const codes = new Map<string, { challenge: string; redirect: string }>();
  const refreshTokens = new Set<string>();
  /** Live access tokens and when each expires (ms since the epoch). */
  const live = new Map<string, number>();
  const p = {
    issued: [] as FakeProvider['issued'],
    revoked: [] as string[],
    messages: [] as FakeProvider['messages'],
    calls: [] as FakeProvider['calls'],
    refreshes: 0,
    refreshRequests: 0,
    deny: false,
    lifetime: expiresIn,
    refuse: false,
    refreshDelayMs: 0,
    scripted: [] as FakeAnswer[],
  };
  const accepts = (access: string) => (live.get(access) ?? 0) > Date.now();
  const issue = () => {
    const access = `at-${randomBytes(12).toString('hex')}`;
    const refresh = `rt-${randomBytes(12).toString('hex')}`;
    p.issued.push({ access, refresh });
    refreshTokens.add(refresh);
    live.set(access, Date.now() + p.lifetime * 1000);
    const claims = { iss: url, sub: '1234567890', aud: 'client-1', email: 'team@example.com', email_verified: true };
    return {
      access_token: access,
      refresh_token: refresh,
      token_type: 'Bearer',
      expires_in: p.lifetime,
      scope: 'openid email',
      id_token: ['{"alg":"RS256","typ":"JWT"}', JSON.stringify(claims), 'signature']
        .map((x) => Buffer.from(x).toString('base64url'))
        .join('.'),
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
          p.refreshRequests++;
          const rt = form.get('refresh_token') ?? '';
          const answer = () => {
            if (p.refuse) {
              refreshTokens.delete(rt);
              return reply(400, { error: 'invalid_grant', error_description: 'The grant was revoked' });
            }
            // Rotation: a refresh token works once.
            if (!refreshTokens.delete(rt)) return reply(400, { error: 'invalid_grant' });
            p.refreshes++;
            reply(200, issue());
          };
          return void (p.refreshDelayMs ? setTimeout(answer, p.refreshDelayMs) : answer());
        }
        return reply(400, { error: 'unsupported_grant_type' });
      }
      if (url.pathname === '/revoke') {
        p.revoked.push(form.get('token') ?? '');
        live.delete(form.get('token') ?? '');
        return void res.writeHead(200).end();
      }
      if (API_PATHS.some((re) => re.test(url.pathname))) {
        const auth = req.headers.authorization ?? '';
        const token = /^Bearer (.+)$/.exec(auth)?.[1] ?? '';
        const ok = accepts(token);
        const next = ok ? p.scripted.shift() : undefined;
        p.calls.push({ path: url.pathname, token, status: next?.status ?? (ok ? 200 : 401) });
        if (!ok) return reply(401, { ok: false, error: 'invalid_auth' });
        if (next)
          return void res
            .writeHead(next.status, { 'content-type': 'application/json', ...next.headers })
            .end(next.body === undefined ? undefined : JSON.stringify(next.body));
        p.messages.push({ path: url.pathname, auth, body: JSON.parse(raw) });
        if (url.pathname.endsWith('/sendMail')) return void res.writeHead(202).end();
        if (url.pathname.endsWith('/messages/send'))
          return reply(200, { id: randomBytes(8).toString('hex'), threadId: 't-1', labelIds: ['SENT'] });
        return reply(url.pathname.includes('/teams/') ? 201 : 200, { ok: true });
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
    get calls() {
      return p.calls;
    },
    get refreshes() {
      return p.refreshes;
    },
    get refreshRequests() {
      return p.refreshRequests;
    },
    denyNext: () => {
      p.deny = true;
    },
    setLifetime: (seconds) => {
      p.lifetime = seconds;
    },
    accepts,
    invalidateAccessTokens: () => live.clear(),
    refuseRefresh: (on) => {
      p.refuse = on;
    },
    setRefreshDelay: (ms) => {
      p.refreshDelayMs = ms;
    },
    answerNext: (...answers) => {
      p.scripted.push(...answers);
    },
    close,
  };
}

/** One request as a fake provider saw it. */
export interface FakeRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  raw: string;
  /** The body parsed as JSON, or as a form when it is one; {} otherwise. */
  body: Record<string, any>;
  /** The bearer token of the Authorization header ('' without one). */
  token: string;
}

export interface FakeAnswer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/**
 * A loopback HTTP server for a provider fake: each request parsed, handed to `handle`, answered
 * as JSON; closed at the test's teardown.
 */
export async function startHttpFake(
  t: { teardown(f: () => unknown): void },
  handle: (r: FakeRequest) => FakeAnswer | Promise<FakeAnswer>,
): Promise<string> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const url = new URL(req.url ?? '/', 'http://x');
      const raw = Buffer.concat(chunks).toString();
      let body: Record<string, any> = {};
      if ((req.headers['content-type'] ?? '').includes('json')) {
        try {
          body = JSON.parse(raw);
        } catch {}
      } else if (raw) body = Object.fromEntries(new URLSearchParams(raw));
      const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
      try {
        const a = await handle({
          method: req.method ?? 'GET',
          path: url.pathname,
          query: url.searchParams,
          headers: req.headers,
          raw,
          body,
          token,
        });
        const type = a.body === undefined ? {} : { 'content-type': 'application/json; charset=utf-8' };
        res
          .writeHead(a.status, { ...type, ...a.headers })
          .end(a.body === undefined ? undefined : JSON.stringify(a.body));
      } catch (err) {
        res.writeHead(500).end(String(err));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Follows a connect's authorize URL as a browser would, to the callback page; its status and text. */
export async function authorizeInBrowser(authorizationUrl: string): Promise<{ status: number; text: string }> {
  const auth = await fetch(authorizationUrl, { redirect: 'manual' });
  const back = auth.headers.get('location');
  if (!back) throw new Error(`the authorize page answered ${auth.status} without a redirect`);
  const page = await fetch(back, { redirect: 'manual' });
  return { status: page.status, text: await page.text() };
}
