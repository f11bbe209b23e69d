import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * What the provider fakes share: a loopback HTTP server answering JSON, the authorize redirect,
 * PKCE, and faults a test injects by path.
 */

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

/** The authorize endpoint's answer: 302 back to redirect_uri with the request's state and `params` (a code or an error). */
export function redirectBack(r: FakeRequest, params: Record<string, string>): FakeAnswer {
  const back = new URL(r.query.get('redirect_uri') ?? '');
  back.searchParams.set('state', r.query.get('state') ?? '');
  for (const [k, v] of Object.entries(params)) back.searchParams.set(k, v);
  return { status: 302, headers: { location: back.href } };
}

/** The scopes an authorize request asks for, less those the user does not grant at the consent screen. */
export const grantedScope = (r: FakeRequest, withhold: ReadonlySet<string>): string =>
  (r.query.get('scope') ?? '')
    .split(' ')
    .filter((s) => s && !withhold.has(s))
    .join(' ');

/**
 * An authorization code redeemed once (RFC 6749 4.1.3, PKCE S256 of RFC 7636): the grant stored
 * with it when the token request names the same redirect_uri and a matching code_verifier, else
 * why not.
 */
export function redeemCode<G extends { challenge: string; redirect: string }>(
  codes: Map<string, G>,
  o: { code?: unknown; redirect_uri?: unknown; code_verifier?: unknown },
): G | 'invalid_code' | 'invalid_verifier' {
  const c = codes.get(String(o.code ?? ''));
  codes.delete(String(o.code ?? ''));
  if (!c || c.redirect !== o.redirect_uri) return 'invalid_code';
  if (
    createHash('sha256')
      .update(String(o.code_verifier ?? ''))
      .digest('base64url') !== c.challenge
  )
    return 'invalid_verifier';
  return c;
}

/**
 * Answers a test injects by path prefix, each for the next `times` requests under it, before
 * anything else; one added with `skip` lets that many requests under its prefix pass first; one
 * added with `times` 0 ends the faults still pending under its prefix (the provider heals).
 */
export class Faults {
  private readonly list: Array<{ prefix: string; answer: FakeAnswer; times: number; skip: number }> = [];

  add(prefix: string, answer: FakeAnswer, times = 1, skip = 0): void {
    if (times > 0) {
      this.list.push({ prefix, answer, times, skip });
      return;
    }
    for (const f of this.list) if (f.prefix === prefix) f.times = 0;
  }

  /** The injected answer for this path (used up once), or undefined. */
  take(path: string): FakeAnswer | undefined {
    const f = this.list.find((x) => path.startsWith(x.prefix) && x.times > 0);
    if (!f) return undefined;
    if (f.skip > 0) {
      f.skip--;
      return undefined;
    }
    f.times--;
    return f.answer;
  }
}

/**
 * The OAuth side of a provider that grants scopes one by one (Google, Microsoft): the scopes the
 * user withholds at the consent screen, authorization codes with what they grant, live access
 * tokens with their scope, refresh tokens, faults injected by path, and every API call with its
 * answer (`Call`, the fake's own record).
 */
export class ScopedOAuth<Call> {
  /** Scopes the user does not grant at the consent screen. */
  readonly withhold = new Set<string>();
  readonly calls: Call[] = [];
  refreshes = 0;
  /** Items per page at most, whatever the request asks. */
  pageSize = 1000;
  /** Refresh tokens and the scope each grants. */
  readonly refreshTokens = new Map<string, string>();
  private readonly codes = new Map<string, { challenge: string; redirect: string; scope: string; offline: boolean }>();
  private readonly live = new Map<string, { scope: string; until: number }>();
  private readonly faults = new Faults();

  /** The authorize endpoint's answer: `code` for the scopes granted, back to redirect_uri. */
  approve(r: FakeRequest, code: string): FakeAnswer {
    this.codes.set(code, {
      challenge: r.query.get('code_challenge') ?? '',
      redirect: r.query.get('redirect_uri') ?? '',
      scope: grantedScope(r, this.withhold),
      offline: r.query.get('access_type') === 'offline',
    });
    return redirectBack(r, { code });
  }

  /** The token endpoint's authorization_code grant (redeemCode): the scope granted, and whether offline. */
  redeem(body: Record<string, unknown>) {
    return redeemCode(this.codes, body);
  }

  /** `access` is a live access token for `scope` from now on, for an hour (less a second). */
  issue(access: string, scope: string): string {
    this.live.set(access, { scope, until: Date.now() + 3599_000 });
    return access;
  }

  /** Why `token` may not call an API (that needs `scope`), or undefined when it may. */
  refusal(token: string, scope?: string): 'invalid_token' | 'insufficient_scope' | undefined {
    const tok = this.live.get(token);
    if (!tok || tok.until < Date.now()) return 'invalid_token';
    if (scope && !tok.scope.split(' ').includes(scope)) return 'insufficient_scope';
    return undefined;
  }

  /** The token (access or refresh) stops working. */
  revoke(token: string): void {
    this.live.delete(token);
    this.refreshTokens.delete(token);
  }

  /** Access tokens issued so far stop working (as when the provider revokes them). */
  invalidateAccessTokens(): void {
    this.live.clear();
  }

  /** The next API requests whose path starts with `prefix` get `answer` (before any other check), `times` times. */
  fail(prefix: string, answer: FakeAnswer, times?: number): void {
    this.faults.add(prefix, answer, times);
  }

  /** Like `fail`, once, for the request after the next `skip` ones under `prefix` (a page amid a listing). */
  failLater(prefix: string, skip: number, answer: FakeAnswer): void {
    this.faults.add(prefix, answer, 1, skip);
  }

  /** The fake's server: `oauth` answers its endpoints; an API request gets an injected fault or `api`'s answer. */
  serve(
    t: { teardown(f: () => unknown): void },
    oauth: (r: FakeRequest) => FakeAnswer | undefined,
    api: (r: FakeRequest) => FakeAnswer,
    record: (r: FakeRequest, answer: FakeAnswer) => Call,
  ): Promise<string> {
    return startHttpFake(t, (r) => {
      const o = oauth(r);
      if (o) return o;
      const answer = this.faults.take(r.path) ?? api(r);
      this.calls.push(record(r, answer));
      return answer;
    });
  }
}
