import { randomBytes } from 'node:crypto';
import { type FakeAnswer, redeemCode, redirectBack, startHttpFake } from './fakes/http.js';

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
  const url = await startHttpFake(t, (r) => {
    if (r.path === '/authorize') {
      if (p.deny) {
        p.deny = false;
        return redirectBack(r, { error: 'access_denied', error_description: 'The user said no' });
      }
      const code = randomBytes(8).toString('hex');
      codes.set(code, {
        challenge: r.query.get('code_challenge') ?? '',
        redirect: r.query.get('redirect_uri') ?? '',
      });
      return redirectBack(r, { code });
    }
    const reply = (status: number, body: unknown): FakeAnswer => ({ status, body });
    // The form whatever the content type says: a JSON token request finds no client_id in it.
    const form = new URLSearchParams(r.raw);
    if (r.path === '/token') {
      if (form.get('client_id') !== 'client-1' || form.get('client_secret') !== 'secret-1')
        return reply(401, { error: 'invalid_client' });
      if (form.get('grant_type') === 'authorization_code') {
        const c = redeemCode(codes, {
          code: form.get('code'),
          redirect_uri: form.get('redirect_uri'),
          code_verifier: form.get('code_verifier'),
        });
        if (c === 'invalid_code') return reply(400, { error: 'invalid_grant' });
        if (c === 'invalid_verifier')
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
          return reply(200, issue());
        };
        return p.refreshDelayMs
          ? new Promise<FakeAnswer>((done) => setTimeout(() => done(answer()), p.refreshDelayMs))
          : answer();
      }
      return reply(400, { error: 'unsupported_grant_type' });
    }
    if (r.path === '/revoke') {
      p.revoked.push(form.get('token') ?? '');
      live.delete(form.get('token') ?? '');
      return { status: 200 };
    }
    if (API_PATHS.some((re) => re.test(r.path))) {
      const auth = r.headers.authorization ?? '';
      const ok = accepts(r.token);
      const next = ok ? p.scripted.shift() : undefined;
      p.calls.push({ path: r.path, token: r.token, status: next?.status ?? (ok ? 200 : 401) });
      if (!ok) return reply(401, { ok: false, error: 'invalid_auth' });
      if (next) return next;
      p.messages.push({ path: r.path, auth, body: JSON.parse(r.raw) });
      if (r.path.endsWith('/sendMail')) return { status: 202 };
      if (r.path.endsWith('/messages/send'))
        return reply(200, { id: randomBytes(8).toString('hex'), threadId: 't-1', labelIds: ['SENT'] });
      return reply(r.path.includes('/teams/') ? 201 : 200, { ok: true });
    }
    return reply(404, { error: 'not_found' });
  });
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
  };
}

/** Follows a connect's authorize URL as a browser would, to the callback page; its status and text. */
export async function authorizeInBrowser(authorizationUrl: string): Promise<{ status: number; text: string }> {
  const auth = await fetch(authorizationUrl, { redirect: 'manual' });
  const back = auth.headers.get('location');
  if (!back) throw new Error(`the authorize page answered ${auth.status} without a redirect`);
  const page = await fetch(back, { redirect: 'manual' });
  return { status: page.status, text: await page.text() };
}
