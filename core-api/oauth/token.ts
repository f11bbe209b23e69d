import { isUtf8 } from 'node:buffer';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { OAuthError, TokenRequest, TokenResponse } from '../../schemas/core/credentials.js';
import type { Role } from '../../schemas/core/scopes.js';
import { allowedFor } from '../../lib/credentials/scopes.js';
import { sha256 } from '../../lib/credentials/secrets.js';
import { ApiError, type ErrorCode } from '../../lib/problem.js';
import type { Sql } from '../../lib/pg.js';
import { json, type Ctx, type Reply } from '../http/context.js';
import { formDecode } from '../http/parse.js';
import type { Route } from '../http/router.js';
import { type AppRow, appByClientId } from './apps.js';
import type { OAuthDeps } from '../deps.js';

const REFRESH_TTL_DAYS = 90;
const VERIFIER_RE = /^[A-Za-z0-9._~-]{43,128}$/;

type Form = Record<string, string | undefined>;
/** What a grant's transaction decided: the tokens, or why not (and the grant it revoked, if any). */
type Outcome = { body: Record<string, unknown> } | { fail: string; family?: string } | { scopeFail: string };

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

async function revokeFamily(tx: Sql, familyId: string): Promise<void> {
  await tx`UPDATE oauth_refresh_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE family_id = ${familyId}`;
  await tx`INSERT INTO oauth_revoked_families (family_id) VALUES (${familyId}) ON CONFLICT DO NOTHING`;
}

/**
 * POST /v1/oauth/token: an authorization code (with its PKCE verifier) or a refresh token
 * exchanged for an access token and a new refresh token; refresh tokens rotate on every use.
 */
export function tokenRoutes(d: OAuthDeps): Route[] {
  const { sql } = d;

  async function authenticateClient(c: Ctx, f: Form): Promise<AppRow> {
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
    const app = await appByClientId(sql, id);
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
    tx: Sql,
  ): Promise<Record<string, unknown>> {
    const refresh = `rt_${randomBytes(32).toString('base64url')}`;
    await tx`
      INSERT INTO oauth_refresh_tokens (token_hash, family_id, tenant_id, app_id, user_id, scopes, expires_at)
      VALUES (
        ${sha256(refresh)}, ${familyId}, ${app.tenant_id}, ${app.id}, ${userId}, ${scopes},
        now() + make_interval(days => ${REFRESH_TTL_DAYS})
      )`;
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

  async function authorizationCode(app: AppRow, f: Form): Promise<Outcome> {
    if (!f.code) throw oauthError('invalid_request', 'invalid_request', 'code is required.');
    if (!f.code_verifier) throw oauthError('invalid_request', 'invalid_request', 'code_verifier is required (PKCE).');
    if (!VERIFIER_RE.test(f.code_verifier))
      throw oauthError(
        'invalid_request',
        'invalid_request',
        'code_verifier must be 43 to 128 characters of [A-Za-z0-9-._~].',
      );
    return sql.begin(async (tx): Promise<Outcome> => {
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
        SELECT app_id::text, user_id::text, redirect_uri, scopes, code_challenge, family_id::text,
          expires_at <= now() AS expired, used_at
        FROM oauth_codes WHERE code_hash = ${sha256(f.code!)} FOR UPDATE`;
      if (!row || row.app_id !== app.id) return { fail: 'The authorization code is invalid.' };
      if (row.used_at) {
        // RFC 6749 §4.1.2: a replayed code revokes what was issued with it.
        await revokeFamily(tx as unknown as Sql, row.family_id);
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
      return { body: await issue(app, row.user_id, user.role, scopes, row.family_id, tx as unknown as Sql) };
    });
  }

  async function refreshToken(app: AppRow, f: Form): Promise<Outcome> {
    if (!f.refresh_token) throw oauthError('invalid_request', 'invalid_request', 'refresh_token is required.');
    const wanted = f.scope?.split(' ').filter(Boolean);
    return sql.begin(async (tx): Promise<Outcome> => {
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
        SELECT family_id::text, app_id::text, user_id::text, scopes, expires_at <= now() AS expired, rotated_at,
          revoked_at
        FROM oauth_refresh_tokens WHERE token_hash = ${sha256(f.refresh_token!)} FOR UPDATE`;
      if (!row || row.app_id !== app.id) return { fail: 'The refresh token is invalid.' };
      if (row.revoked_at) return { fail: 'The refresh token has been revoked.' };
      if (row.rotated_at) {
        // A rotated token came back: it was stolen or the client is broken. End the whole grant.
        await revokeFamily(tx as unknown as Sql, row.family_id);
        return { fail: 'The refresh token was already used; the whole grant is revoked.', family: row.family_id };
      }
      if (row.expired) return { fail: 'The refresh token has expired.' };
      if (wanted && wanted.some((s) => !row.scopes.includes(s)))
        return { scopeFail: `scope may only narrow the grant (${row.scopes.join(' ')}).` };
      const [user] = await tx<{ role: Role }[]>`SELECT role FROM users WHERE id = ${row.user_id}`;
      if (!user) return { fail: 'The user of this grant no longer exists.' };
      await tx`UPDATE oauth_refresh_tokens SET rotated_at = now() WHERE token_hash = ${sha256(f.refresh_token!)}`;
      const scopes = allowedFor(user.role, wanted ?? row.scopes);
      return { body: await issue(app, row.user_id, user.role, scopes, row.family_id, tx as unknown as Sql) };
    });
  }

  async function token(c: Ctx): Promise<Reply> {
    const f = c.body as Form;
    if (!f.grant_type) throw oauthError('invalid_request', 'invalid_request', 'grant_type is required.');
    if (f.grant_type !== 'authorization_code' && f.grant_type !== 'refresh_token')
      throw oauthError(
        'unsupported_grant_type',
        'unsupported_grant_type',
        'grant_type must be authorization_code or refresh_token.',
      );
    const app = await authenticateClient(c, f);
    const out = f.grant_type === 'authorization_code' ? await authorizationCode(app, f) : await refreshToken(app, f);
    if ('scopeFail' in out) throw oauthError('invalid_scope', 'invalid_scope', out.scopeFail);
    if ('fail' in out) {
      if (out.family) {
        await d.notify.familyRevoked(out.family);
      }
      throw oauthError('invalid_grant', 'invalid_grant', out.fail);
    }
    return json(200, out.body, [
      ['Cache-Control', 'no-store'],
      ['Pragma', 'no-cache'],
    ]);
  }

  const tokenProblem = {
    description: 'RFC 6749 §5.2 error (`error`, `error_description`) inside a problem document.',
    schema: OAuthError,
    contentType: 'application/problem+json',
  };
  return [
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
        'Client authentication with client_id and client_secret in the form, or HTTP Basic. Refresh tokens ' +
        'rotate on every use; presenting a rotated one revokes the whole grant (its refresh and access tokens).',
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
