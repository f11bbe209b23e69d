import { randomBytes, randomUUID } from 'node:crypto';
import { inTenant } from '../../lib/pg.js';
import { AuthorizeQuery } from '../../schemas/core/credentials.js';
import { SCOPES, type Role } from '../../schemas/core/scopes.js';
import { allowedFor } from '../../lib/credentials/scopes.js';
import { hashPassword, sha256, verifyPassword } from '../../lib/credentials/secrets.js';
import type { Ctx, Reply } from '../http/context.js';
import type { Route } from '../http/router.js';
import { type AppRow, appByClientId } from './apps.js';
import { consentPage, errorPage } from './page.js';
import type { OAuthDeps } from '../deps.js';

const CODE_TTL_S = 600;
const CHALLENGE_RE = /^[A-Za-z0-9_-]{43}$/;

/** Online password guessing: at most this many sign-in attempts per account and window. */
export const SIGN_IN_ATTEMPTS = 20;
const SIGN_IN_WINDOW_MS = 15 * 60_000;

type Query = Record<string, string | undefined>;

type Checked =
  | { page: Reply }
  | { redirect: string; app: AppRow; scopes: string[]; state?: string; challenge: string; error?: undefined }
  | { redirectError: Reply };

const redirectTo = (uri: string, params: Query): Reply => {
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

const PARAMS = [
  'response_type',
  'client_id',
  'redirect_uri',
  'scope',
  'state',
  'code_challenge',
  'code_challenge_method',
];

/** The authorize request's parameters, carried through the consent form as hidden fields. */
const hiddenOf = (q: Query) => {
  const h: Record<string, string> = {};
  for (const k of PARAMS) if (q[k] !== undefined) h[k] = q[k]!;
  return h;
};

/**
 * GET and POST /v1/oauth/authorize (Authorization Code with PKCE S256): the sign-in and consent
 * page, then its form, which signs the user in and sends a single-use code to the redirect URI.
 */
export function authorizeRoutes(d: OAuthDeps): Route[] {
  const { sql } = d;
  // Spent on unknown e-mails so a sign-in takes as long whether or not the account exists.
  const dummyHash = hashPassword(randomBytes(16).toString('hex'));

  /**
   * RFC 6749 §4.1.2.1: while the client or redirect URI is in doubt the error is shown to the user
   * and never sent anywhere; once both are valid, every other error goes back to the redirect URI.
   */
  async function check(q: Query): Promise<Checked> {
    const app = await appByClientId(sql, q.client_id);
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

  async function authorizePage(c: Ctx): Promise<Reply> {
    const r = await check(c.query);
    if ('page' in r) return r.page;
    if ('redirectError' in r) return r.redirectError;
    return consentPage({ appName: r.app.name, scopes: r.scopes, hidden: hiddenOf(c.query) });
  }

  async function authorizeSubmit(c: Ctx): Promise<Reply> {
    const f = c.body as Query;
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
      const wait = `${minutes} minute${minutes === 1 ? '' : 's'}`;
      const page = consentPage(
        {
          appName: r.app.name,
          scopes: r.scopes,
          hidden: hiddenOf(f),
          email,
          error: `Too many sign-in attempts for this account; try again in ${wait}.`,
        },
        429,
      );
      return { ...page, headers: [...(page.headers ?? []), ['Retry-After', String(attempt.retryAfter)]] };
    }
    const [user] =
      email && email.length <= 320
        ? await sql<{ id: string; role: Role; password_hash: string | null }[]>`
          SELECT id::text, role, password_hash FROM users
          WHERE ${inTenant(r.app.tenant_id)} AND lower(email) = lower(${email})`
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
      INSERT INTO oauth_codes
        (code_hash, tenant_id, app_id, user_id, redirect_uri, scopes, code_challenge, family_id, expires_at)
      VALUES (
        ${sha256(code)}, ${r.app.tenant_id}, ${r.app.id}, ${user.id}, ${r.redirect}, ${granted}, ${r.challenge},
        ${randomUUID()}, now() + make_interval(secs => ${CODE_TTL_S})
      )`;
    return redirectTo(r.redirect, { code, state: r.state });
  }

  return [
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
        '. While client_id or redirect_uri is invalid the error is shown on the page; every other error is sent ' +
        'to the redirect URI as `error` (and `state`).',
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
        'Form fields: the authorize query parameters plus email, password and decision (approve or deny). ' +
        'On success: 303 to redirect_uri with code (single-use, 10 minutes) and state.',
      responses: {
        303: { description: 'Redirect to redirect_uri with code and state, or with error.' },
        401: { description: 'The page again with a sign-in error.', contentType: 'text/html' },
      },
    },
  ] satisfies Route[];
}
