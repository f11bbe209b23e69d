import { isUtf8 } from 'node:buffer';
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import {
  AuthorizeQuery,
  OAuthAppCreate,
  OAuthAppCreated,
  OAuthAppList,
  OAuthError,
  TokenRequest,
  TokenResponse,
} from '../../schemas/core/credentials.js';
import { SCOPES, type Role } from '../../schemas/core/scopes.js';
import { allowedFor } from '../../lib/credentials/scopes.js';
import { hashPassword, sha256, verifyPassword } from '../../lib/credentials/secrets.js';
import type { AccessTokens } from '../auth/tokens.js';
import { json, type Ctx, type Reply } from '../http/context.js';
import { ApiError, invalid, type ErrorCode, type FieldError } from '../../lib/problem.js';
import type { Route } from '../http/router.js';
import { formDecode } from '../http/parse.js';
import type { SharedRateLimiter } from '../../lib/rate-limit.js';
import type { Deps } from '../deps.js';
import { consentPage, errorPage } from './page.js';

const CODE_TTL_S = 600;
const REFRESH_TTL_DAYS = 90;
const CHALLENGE_RE = /^[A-Za-z0-9_-]{43}$/;
const VERIFIER_RE = /^[A-Za-z0-9._~-]{43,128}$/;

interface AppRow {
  id: string;
  tenant_id: string;
  name: string;
  client_id: string;
  client_secret_hash: Buffer;
  redirect_uris: string[];
  scopes: string[];
  created_at: Date;
}

const toApp = (r: AppRow) => ({
  id: r.id,
  name: r.name,
  client_id: r.client_id,
  redirect_uris: r.redirect_uris,
  scopes: r.scopes,
  created_at: r.created_at.toISOString(),
});

function redirectUriProblem(uri: string): string | null {
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return 'is not an absolute URI';
  }
  if (u.hash) return 'must not contain a fragment';
  if (u.protocol === 'https:') return null;
  if (u.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(u.hostname)) return null;
  return 'must use https (http only for localhost, 127.0.0.1 or [::1])';
}

/**
 * RFC 6749 §2.3.1: HTTP Basic carries client_id and client_secret form-urlencoded, joined by the
 * first colon. Undefined when the bytes are not UTF-8, an escape is malformed or a NUL appears.
 */
function basicCredentials(b64: string): [string, string] | undefined {
  const raw = Buffer.from(b64, 'base64');
  if (!isUtf8(raw)) return undefined;
  const text = raw.toString('utf8');
  const colon = text.indexOf(':');
  const id = formDecode(colon < 0 ? text : text.slice(0, colon));
  const secret = formDecode(colon < 0 ? '' : text.slice(colon + 1));
  if (id === undefined || secret === undefined || id.includes('\u0000') || secret.includes('\u0000')) return undefined;
  return [id, secret];
}

const oauthError = (code: ErrorCode, error: string, description: string) =>
  new ApiError(
    code,
    description,
    undefined,
    code === 'invalid_client' ? [['WWW-Authenticate', 'Basic realm="oauth"']] : [],
    { error, error_description: description },
  );

/**
 * RFC 6749 §5.2: every error of the token endpoint carries `error` and `error_description`, also
 * those raised before the form is read (framing, body size, Content-Encoding). 5xx take the codes
 * §4.1.2.1 defines for servers.
 */
export function tokenError(e: ApiError): ApiError {
  if (typeof e.extra?.error === 'string') return e;
  const error =
    e.status === 401
      ? 'invalid_client'
      : e.status === 503
        ? 'temporarily_unavailable'
        : e.status >= 500
          ? 'server_error'
          : 'invalid_request';
  return new ApiError(e.code, e.message, e.errors, e.headers, {
    ...e.extra,
    error,
    error_description: e.message.replace(/\.$/, ''),
  });
}

export interface OAuthDeps extends Deps {
  tokens: AccessTokens;
  /** Counts sign-in attempts per account across every core-api process. */
  limiter: SharedRateLimiter;
}

/** Online password guessing: at most this many sign-in attempts per account and window. */
export const SIGN_IN_ATTEMPTS = 20;
const SIGN_IN_WINDOW_MS = 15 * 60_000;

export function oauthRoutes(d: OAuthDeps): Route[] {
  const { sql } = d;
  // Spent on unknown e-mails so a sign-in takes as long whether or not the account exists.
  const dummyHash = hashPassword(randomBytes(16).toString('hex'));

  async function createApp(c: Ctx): Promise<Reply> {
    const b = c.body as { name: string; redirect_uris: string[]; scopes: string[] };
    const errors: FieldError[] = [];
    b.redirect_uris.forEach((u, i) => {
      const p = redirectUriProblem(u);
      if (p) errors.push({ field: `redirect_uris[${i}]`, code: 'invalid_redirect_uri', message: `redirect URI ${p}` });
    });
    if (errors.length) throw invalid(errors);
    const clientId = `cli_${randomBytes(16).toString('hex')}`;
    const secret = `cs_${randomBytes(32).toString('base64url')}`;
    const [row] = await sql<AppRow[]>`
      INSERT INTO oauth_apps (tenant_id, name, client_id, client_secret_hash, redirect_uris, scopes, created_by)
      VALUES (${c.principal.tenantId}, ${b.name}, ${clientId}, ${sha256(secret)}, ${b.redirect_uris}, ${b.scopes}, ${c.principal.kind === 'user' ? c.principal.actorId : null})
      RETURNING id::text, tenant_id::text, name, client_id, client_secret_hash, redirect_uris, scopes, created_at`;
    return json(201, { ...toApp(row), client_secret: secret }, [['Location', `/v1/oauth/apps/${row.id}`]]);
  }

  async function listApps(c: Ctx): Promise<Reply> {
    const rows = await sql<AppRow[]>`
      SELECT id::text, tenant_id::text, name, client_id, client_secret_hash, redirect_uris, scopes, created_at FROM oauth_apps
      WHERE tenant_id = ${c.principal.tenantId} ORDER BY created_at, id`;
    return json(200, { data: rows.map(toApp) });
  }

  const appByClientId = async (clientId: string | undefined): Promise<AppRow | undefined> => {
    if (!clientId || clientId.length > 100) return undefined;
    const [row] = await sql<AppRow[]>`
      SELECT id::text, tenant_id::text, name, client_id, client_secret_hash, redirect_uris, scopes, created_at FROM oauth_apps WHERE client_id = ${clientId}`;
    return row;
  };

  type Checked =
    | { page: Reply }
    | { redirect: string; app: AppRow; scopes: string[]; state?: string; challenge: string; error?: undefined }
    | { redirectError: Reply };

  const redirectTo = (uri: string, params: Record<string, string | undefined>): Reply => {
    const u = new URL(uri);
    for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, v);
    return {
      status: 303,
      headers: [
        ['Location', u.toString()],
        ['Cache-Control', 'no-store'],
        ['Referrer-Policy', 'no-referrer'],
      ],
    };
  };

  /**
   * RFC 6749 §4.1.2.1: while the client or redirect URI is in doubt the error is shown to the user
   * and never sent anywhere; once both are valid, every other error goes back to the redirect URI.
   */
  async function check(q: Record<string, string | undefined>): Promise<Checked> {
    const app = await appByClientId(q.client_id);
    if (!app)
      return {
        page: errorPage(
          400,
          'Unknown application',
          q.client_id ? 'The client_id is not registered.' : 'The request has no client_id.',
        ),
      };
    let redirect = q.redirect_uri;
    if (redirect === undefined) {
      if (app.redirect_uris.length !== 1)
        return {
          page: errorPage(
            400,
            'Invalid redirect URI',
            'The request has no redirect_uri and the application registered several.',
          ),
        };
      redirect = app.redirect_uris[0];
    } else if (!app.redirect_uris.includes(redirect)) {
      return {
        page: errorPage(
          400,
          'Invalid redirect URI',
          'The redirect_uri does not match any registered for this application.',
        ),
      };
    }
    const state = q.state;
    const fail = (error: string, description: string) => ({
      redirectError: redirectTo(redirect!, { error, error_description: description, state }),
    });
    if (q.response_type !== 'code')
      return fail(q.response_type ? 'unsupported_response_type' : 'invalid_request', 'response_type must be code');
    if (!q.code_challenge) return fail('invalid_request', 'code_challenge is required (PKCE)');
    if (q.code_challenge_method !== 'S256') return fail('invalid_request', 'code_challenge_method must be S256');
    if (!CHALLENGE_RE.test(q.code_challenge))
      return fail('invalid_request', 'code_challenge must be BASE64URL(SHA256(code_verifier)) without padding');
    const requested = q.scope === undefined ? app.scopes : q.scope.split(' ').filter(Boolean);
    if (requested.length === 0) return fail('invalid_scope', 'scope is empty');
    const bad = requested.filter((s) => !(SCOPES as readonly string[]).includes(s) || !app.scopes.includes(s));
    if (bad.length) return fail('invalid_scope', `scopes not registered for this application: ${bad.join(' ')}`);
    return { redirect, app, scopes: [...new Set(requested)], state, challenge: q.code_challenge };
  }

  const PARAMS = [
    'response_type',
    'client_id',
    'redirect_uri',
    'scope',
    'state',
    'code_challenge',
    'code_challenge_method',
  ];
  const hiddenOf = (q: Record<string, string | undefined>) => {
    const h: Record<string, string> = {};
    for (const k of PARAMS) if (q[k] !== undefined) h[k] = q[k]!;
    return h;
  };

  async function authorizePage(c: Ctx): Promise<Reply> {
    const r = await check(c.query);
    if ('page' in r) return r.page;
    if ('redirectError' in r) return r.redirectError;
    return consentPage({ appName: r.app.name, scopes: r.scopes, hidden: hiddenOf(c.query) });
  }

  async function authorizeSubmit(c: Ctx): Promise<Reply> {
    const f = c.body as Record<string, string | undefined>;
    const r = await check(f);
    if ('page' in r) return r.page;
    if ('redirectError' in r) return r.redirectError;
    if (f.decision !== 'approve')
      return redirectTo(r.redirect, {
        error: 'access_denied',
        error_description: 'The user denied the request',
        state: r.state,
      });
    const email = (f.email ?? '').trim();
    const attempt = await d.limiter.take(
      r.app.tenant_id,
      `signin:${email.toLowerCase().slice(0, 320)}`,
      SIGN_IN_ATTEMPTS,
      SIGN_IN_WINDOW_MS,
    );
    if (!attempt.ok) {
      const minutes = Math.ceil(attempt.retryAfter / 60);
      const page = consentPage(
        {
          appName: r.app.name,
          scopes: r.scopes,
          hidden: hiddenOf(f),
          email,
          error: `Too many sign-in attempts for this account; try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`,
        },
        429,
      );
      return { ...page, headers: [...(page.headers ?? []), ['Retry-After', String(attempt.retryAfter)]] };
    }
    const [user] =
      email && email.length <= 320
        ? await sql<{ id: string; role: Role; password_hash: string | null }[]>`
          SELECT id::text, role, password_hash FROM users WHERE tenant_id = ${r.app.tenant_id} AND lower(email) = lower(${email})`
        : [];
    const ok = await verifyPassword(f.password ?? '', user?.password_hash ?? (await dummyHash));
    if (!user || !user.password_hash || !ok) {
      return consentPage(
        {
          appName: r.app.name,
          scopes: r.scopes,
          hidden: hiddenOf(f),
          email,
          error: 'The e-mail or password is not correct.',
        },
        401,
      );
    }
    const granted = allowedFor(user.role, r.scopes);
    if (granted.length === 0)
      return redirectTo(r.redirect, {
        error: 'access_denied',
        error_description: `none of the requested scopes is available to the role ${user.role}`,
        state: r.state,
      });
    const code = randomBytes(32).toString('base64url');
    await sql`
      INSERT INTO oauth_codes (code_hash, tenant_id, app_id, user_id, redirect_uri, scopes, code_challenge, family_id, expires_at)
      VALUES (${sha256(code)}, ${r.app.tenant_id}, ${r.app.id}, ${user.id}, ${r.redirect}, ${granted}, ${r.challenge}, ${randomUUID()}, now() + make_interval(secs => ${CODE_TTL_S}))`;
    return redirectTo(r.redirect, { code, state: r.state });
  }

  async function authenticateClient(c: Ctx, f: Record<string, string | undefined>): Promise<AppRow> {
    let id = f.client_id;
    let secret = f.client_secret;
    const basic = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(c.headers.authorization ?? '');
    if (basic) {
      const creds = basicCredentials(basic[1]);
      if (!creds)
        throw oauthError(
          'invalid_client',
          'invalid_client',
          'HTTP Basic credentials must be base64 of client_id:client_secret, each form-urlencoded UTF-8 without NUL.',
        );
      [id, secret] = creds;
    }
    const app = await appByClientId(id);
    const given = sha256(secret ?? '');
    if (!app || !secret || !timingSafeEqual(given, Buffer.from(app.client_secret_hash)))
      throw oauthError('invalid_client', 'invalid_client', 'Client authentication failed (client_id / client_secret).');
    return app;
  }

  async function issue(
    app: AppRow,
    userId: string,
    role: Role,
    scopes: string[],
    familyId: string,
    tx: typeof sql,
  ): Promise<Record<string, unknown>> {
    const refresh = `rt_${randomBytes(32).toString('base64url')}`;
    await tx`
      INSERT INTO oauth_refresh_tokens (token_hash, family_id, tenant_id, app_id, user_id, scopes, expires_at)
      VALUES (${sha256(refresh)}, ${familyId}, ${app.tenant_id}, ${app.id}, ${userId}, ${scopes}, now() + make_interval(days => ${REFRESH_TTL_DAYS}))`;
    const access = d.tokens.issue({ userId, tenantId: app.tenant_id, role, scopes, clientId: app.client_id, familyId });
    return {
      access_token: access,
      refresh_token: refresh,
      token_type: 'Bearer',
      expires_in: d.tokens.ttlSeconds,
      scope: scopes.join(' '),
      tenant_id: app.tenant_id,
    };
  }

  async function revokeFamily(tx: typeof sql, familyId: string): Promise<void> {
    await tx`UPDATE oauth_refresh_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE family_id = ${familyId}`;
    await tx`INSERT INTO oauth_revoked_families (family_id) VALUES (${familyId}) ON CONFLICT DO NOTHING`;
  }

  async function token(c: Ctx): Promise<Reply> {
    const f = c.body as Record<string, string | undefined>;
    if (!f.grant_type) throw oauthError('invalid_request', 'invalid_request', 'grant_type is required.');
    if (f.grant_type !== 'authorization_code' && f.grant_type !== 'refresh_token')
      throw oauthError(
        'unsupported_grant_type',
        'unsupported_grant_type',
        'grant_type must be authorization_code or refresh_token.',
      );
    const app = await authenticateClient(c, f);
    const noStore: Array<[string, string]> = [
      ['Cache-Control', 'no-store'],
      ['Pragma', 'no-cache'],
    ];
    if (f.grant_type === 'authorization_code') {
      if (!f.code) throw oauthError('invalid_request', 'invalid_request', 'code is required.');
      if (!f.code_verifier) throw oauthError('invalid_request', 'invalid_request', 'code_verifier is required (PKCE).');
      if (!VERIFIER_RE.test(f.code_verifier))
        throw oauthError(
          'invalid_request',
          'invalid_request',
          'code_verifier must be 43 to 128 characters of [A-Za-z0-9-._~].',
        );
      const out = await sql.begin(async (tx) => {
        const [row] = await tx<
          {
            app_id: string;
            user_id: string;
            redirect_uri: string;
            scopes: string[];
            code_challenge: string;
            family_id: string;
            expired: boolean;
            used_at: Date | null;
          }[]
        >`
          SELECT app_id::text, user_id::text, redirect_uri, scopes, code_challenge, family_id::text, expires_at <= now() AS expired, used_at
          FROM oauth_codes WHERE code_hash = ${sha256(f.code!)} FOR UPDATE`;
        if (!row || row.app_id !== app.id) return { fail: 'The authorization code is invalid.' };
        if (row.used_at) {
          // RFC 6749 §4.1.2: a replayed code revokes what was issued with it.
          await revokeFamily(tx as unknown as typeof sql, row.family_id);
          return {
            fail: 'The authorization code was already used; the tokens issued with it are revoked.',
            family: row.family_id,
          };
        }
        if (row.expired) return { fail: 'The authorization code has expired.' };
        if (f.redirect_uri !== row.redirect_uri)
          return { fail: 'redirect_uri does not match the authorization request.' };
        const computed = createHash('sha256').update(f.code_verifier!).digest('base64url');
        if (computed !== row.code_challenge) return { fail: 'code_verifier does not match the code_challenge.' };
        await tx`UPDATE oauth_codes SET used_at = now() WHERE code_hash = ${sha256(f.code!)}`;
        const [user] = await tx<{ role: Role }[]>`SELECT role FROM users WHERE id = ${row.user_id}`;
        if (!user) return { fail: 'The user of this grant no longer exists.' };
        const scopes = allowedFor(user.role, row.scopes);
        return { body: await issue(app, row.user_id, user.role, scopes, row.family_id, tx as unknown as typeof sql) };
      });
      if ('fail' in out) {
        if (out.family) {
          d.notify.familyRevoked(out.family);
          await d.notify.flush();
        }
        throw oauthError('invalid_grant', 'invalid_grant', out.fail!);
      }
      return json(200, out.body, noStore);
    }
    if (!f.refresh_token) throw oauthError('invalid_request', 'invalid_request', 'refresh_token is required.');
    const wanted = f.scope?.split(' ').filter(Boolean);
    const out = await sql.begin(async (tx) => {
      const [row] = await tx<
        {
          family_id: string;
          app_id: string;
          user_id: string;
          scopes: string[];
          expired: boolean;
          rotated_at: Date | null;
          revoked_at: Date | null;
        }[]
      >`
        SELECT family_id::text, app_id::text, user_id::text, scopes, expires_at <= now() AS expired, rotated_at, revoked_at
        FROM oauth_refresh_tokens WHERE token_hash = ${sha256(f.refresh_token!)} FOR UPDATE`;
      if (!row || row.app_id !== app.id) return { fail: 'The refresh token is invalid.' };
      if (row.revoked_at) return { fail: 'The refresh token has been revoked.' };
      if (row.rotated_at) {
        // A rotated token came back: it was stolen or the client is broken. End the whole grant.
        await revokeFamily(tx as unknown as typeof sql, row.family_id);
        return { fail: 'The refresh token was already used; the whole grant is revoked.', family: row.family_id };
      }
      if (row.expired) return { fail: 'The refresh token has expired.' };
      if (wanted && wanted.some((s) => !row.scopes.includes(s)))
        return { scopeFail: `scope may only narrow the grant (${row.scopes.join(' ')}).` };
      const [user] = await tx<{ role: Role }[]>`SELECT role FROM users WHERE id = ${row.user_id}`;
      if (!user) return { fail: 'The user of this grant no longer exists.' };
      await tx`UPDATE oauth_refresh_tokens SET rotated_at = now() WHERE token_hash = ${sha256(f.refresh_token!)}`;
      const scopes = allowedFor(user.role, wanted ?? row.scopes);
      return { body: await issue(app, row.user_id, user.role, scopes, row.family_id, tx as unknown as typeof sql) };
    });
    if ('scopeFail' in out) throw oauthError('invalid_scope', 'invalid_scope', out.scopeFail!);
    if ('fail' in out) {
      if (out.family) {
        d.notify.familyRevoked(out.family);
        await d.notify.flush();
      }
      throw oauthError('invalid_grant', 'invalid_grant', out.fail!);
    }
    return json(200, out.body, noStore);
  }

  const tokenProblem = {
    description: 'RFC 6749 §5.2 error (`error`, `error_description`) inside a problem document.',
    schema: OAuthError,
    contentType: 'application/problem+json',
  };
  return [
    {
      tag: 'OAuth',
      auth: 'bearer',
      scope: 'admin:*',
      method: 'POST',
      path: '/v1/oauth/apps',
      summary: 'Register an OAuth app (client_secret shown once)',
      body: OAuthAppCreate,
      bodyExample: {
        name: 'Slack bot',
        redirect_uris: ['https://bot.example.com/oauth/callback'],
        scopes: ['customers:read', 'tasks:write'],
      },
      handler: createApp,
      errors: [413, 415],
      responses: { 201: { description: 'The app with client_id and client_secret.', schema: OAuthAppCreated } },
    },
    {
      tag: 'OAuth',
      auth: 'bearer',
      scope: 'admin:*',
      method: 'GET',
      path: '/v1/oauth/apps',
      summary: 'List OAuth apps',
      handler: listApps,
      responses: { 200: { description: 'Apps of the workspace (no secrets).', schema: OAuthAppList } },
    },
    {
      tag: 'OAuth',
      auth: 'none',
      method: 'GET',
      path: '/v1/oauth/authorize',
      summary: 'Sign-in and consent page (Authorization Code + PKCE S256)',
      query: undefined,
      handler: authorizePage,
      description:
        'Renders an HTML page where a workspace user signs in and consents. Query: ' +
        Object.keys((AuthorizeQuery as { properties: object }).properties).join(', ') +
        '. While client_id or redirect_uri is invalid the error is shown on the page; every other error is sent to the redirect URI as `error` (and `state`).',
      responses: {
        200: { description: 'The sign-in and consent page.', contentType: 'text/html' },
        303: { description: 'Redirect to redirect_uri with error and state.' },
        400: { description: 'Error page (unknown client or redirect URI).', contentType: 'text/html' },
      },
    },
    {
      tag: 'OAuth',
      auth: 'none',
      method: 'POST',
      path: '/v1/oauth/authorize',
      summary: 'Submit sign-in and consent (form)',
      bodyType: 'form',
      body: AuthorizeQuery,
      handler: authorizeSubmit,
      bucket: 'write',
      maxBodyBytes: 16 * 1024,
      description:
        'Form fields: the authorize query parameters plus email, password and decision (approve or deny). On success: 303 to redirect_uri with code (single-use, 10 minutes) and state.',
      responses: {
        303: { description: 'Redirect to redirect_uri with code and state, or with error.' },
        401: { description: 'The page again with a sign-in error.', contentType: 'text/html' },
      },
    },
    {
      tag: 'OAuth',
      auth: 'none',
      method: 'POST',
      path: '/v1/oauth/token',
      summary: 'Exchange a code or refresh token (form body)',
      bodyType: 'form',
      body: TokenRequest,
      handler: token,
      shapeError: tokenError,
      bucket: 'write',
      maxBodyBytes: 16 * 1024,
      description:
        'Client authentication with client_id and client_secret in the form, or HTTP Basic. Refresh tokens rotate on every use; presenting a rotated one revokes the whole grant (its refresh and access tokens).',
      bodyExample: {
        grant_type: 'authorization_code',
        code: '…',
        redirect_uri: 'https://bot.example.com/oauth/callback',
        client_id: 'cli_…',
        client_secret: 'cs_…',
        code_verifier: '…',
      },
      responses: { 200: { description: 'Tokens.', schema: TokenResponse }, 400: tokenProblem, 401: tokenProblem },
    },
  ] satisfies Route[];
}
