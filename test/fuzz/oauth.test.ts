import fc from 'fast-check';
import t from '#tap';
import { authorize, exchange, registerApp } from '../core-api/_helpers.js';
import { bootstrap, closeDb, db } from '../helpers/stack.js';
import { badEscape, build, envelope, nastyString, otherMethod, params, pct, SHRINK, sized } from './arbitraries.js';
import type { Req } from './http.js';
import { AUTHORIZE_STATUSES, exactly, Ledger, TOKEN_STATUSES } from './properties.js';
import { apiTier, fuzz, settings, stillReady, type Surface } from './support.js';

// The OAuth endpoints: the token endpoint's form bodies and Basic credentials, and the authorize
// page's query strings. Errors are RFC 6749's (`error`, `error_description`) in a problem document;
// the page shows its own errors while the client or redirect URI is in doubt, else redirects.
const o = settings(process.env);
const FORM = 'application/x-www-form-urlencoded';
const REDIRECT = 'https://app.example.com/cb';

t.teardown(closeDb);
const [ws, api] = await Promise.all([bootstrap(), apiTier(t)]);
const app = await registerApp(api.url, ws.api_key, ['customers:read', 'customers:write'], REDIRECT);
const user = { email: ws.admin_email, password: ws.admin_password };
// A live code and a live refresh token among the values: the fuzz may spend them, then replay them.
const first = await authorize(api.url, app, user, 'customers:read');
const tokens = await exchange(api.url, app, first.code!, first.pkce.verifier);
if (tokens.status !== 200) throw new Error(`token exchange: ${tokens.status} ${tokens.text}`);
const live = await authorize(api.url, app, user, 'customers:read customers:write');

const ledger = new Ledger(async () => {
  const [row] = await db()<{ refresh: number; codes: number }[]>`
    SELECT (SELECT count(*)::int FROM oauth_refresh_tokens WHERE tenant_id = ${ws.tenant_id}) AS refresh,
           (SELECT count(*)::int FROM oauth_codes WHERE tenant_id = ${ws.tenant_id}) AS codes`;
  return row;
});

const basic = (s: string | Buffer) => `Basic ${Buffer.from(s).toString('base64')}`;
const basicAuth = fc.oneof(
  SHRINK,
  { weight: 10, arbitrary: fc.constant<Array<[string, string]>>([]) },
  {
    weight: 3,
    arbitrary: fc
      .oneof(
        SHRINK,
        fc.constantFrom(
          basic(`${app.client_id}:${app.client_secret}`),
          basic(`${app.client_id}:wrong`),
          basic(app.client_id),
          basic(Buffer.from([0xff, 0xfe, 0x3a, 0x41])),
          basic(`${app.client_id}%zz:${app.client_secret}`),
          basic(`${app.client_id}:%00`),
          basic(`%ed%a0%80:x`),
          basic(':'),
          'Basic',
          'Basic ',
          'Basic !!!',
          `basic ${Buffer.from(`${app.client_id}:${app.client_secret}`).toString('base64')}`,
          'Bearer x',
        ),
        fc.tuple(nastyString, nastyString).map(([a, b]) => basic(`${pct(a)}:${pct(b)}`)),
      )
      .map((h): Array<[string, string]> => [['Authorization', h]]),
  },
);

const verifier = fc.oneof(
  SHRINK,
  fc.constant(live.pkce.verifier),
  fc.constantFrom(42, 43, 128, 129).map((n) => 'a'.repeat(n)),
  fc.constantFrom(`${'a'.repeat(42)}!`, `${'a'.repeat(42)}é`, ' '.repeat(43)),
  nastyString,
);

const form = params(
  {
    grant_type: fc.oneof(
      SHRINK,
      fc.constantFrom('authorization_code', 'refresh_token'),
      fc.constantFrom('password', 'client_credentials', '', 'AUTHORIZATION_CODE'),
      nastyString,
    ),
    code: fc.oneof(SHRINK, fc.constantFrom(live.code!, first.code!), nastyString),
    redirect_uri: fc.oneof(
      SHRINK,
      fc.constant(REDIRECT),
      fc.constantFrom(`${REDIRECT}/`, 'https://evil.example/cb', 'cb'),
      nastyString,
    ),
    client_id: fc.oneof(
      SHRINK,
      fc.constant(app.client_id),
      fc.constantFrom(`cli_${'0'.repeat(32)}`, 'x'.repeat(100), 'x'.repeat(101)),
      nastyString,
    ),
    client_secret: fc.oneof(
      SHRINK,
      fc.constant(app.client_secret),
      fc.constantFrom('cs_wrong', ''),
      sized(),
      nastyString,
    ),
    code_verifier: verifier,
    refresh_token: fc.oneof(
      SHRINK,
      fc.constant(tokens.body.refresh_token as string),
      fc.constantFrom('rt_bogus', ''),
      nastyString,
    ),
    scope: fc.oneof(
      SHRINK,
      fc.constantFrom('customers:read', 'customers:read customers:write', 'admin:*', '', '  '),
      nastyString,
    ),
  },
  3,
);

/** A form body: usually well-formed, sometimes with bytes that are not UTF-8 or a JSON document instead. */
const formBody = fc.oneof(
  SHRINK,
  { weight: 12, arbitrary: form.map((s) => Buffer.from(s, 'latin1')) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(form, fc.constantFrom([0xff], [0xc3], [0xed, 0xa0, 0x80]))
      .map(([s, b]) => Buffer.concat([Buffer.from(s, 'latin1'), Buffer.from(b)])),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('', '&', '=', '{"grant_type":"refresh_token"}', 'grant_type', '%')
      .map((s) => Buffer.from(s)),
  },
);

t.test('POST /v1/oauth/token: RFC 6749 errors for every bad form, nothing issued when refused', async (t) => {
  const s: Surface = {
    name: 'core POST /v1/oauth/token',
    methods: ['POST'],
    cases: fc
      .record({ method: otherMethod('POST'), auth: basicAuth, env: envelope(FORM), body: formBody })
      .map((x) => build({ method: x.method, path: '/v1/oauth/token', auth: x.auth }, x.env, x.body, 16 * 1024, '&')),
    port: api.port,
    rules: {
      contract: 'oauth-token',
      statuses: TOKEN_STATUSES,
      success: exactly('access_token', 'expires_in', 'refresh_token', 'scope', 'tenant_id', 'token_type'),
    },
    ledger,
    tiers: [api],
  };
  await fuzz(t, s, o);
  await stillReady(t, [api]);
});

/** The first value of a query parameter, as the server reads it. */
const queryParam = (r: Req, name: string) => new URLSearchParams(r.path.slice(r.path.indexOf('?') + 1)).get(name);

t.test('GET /v1/oauth/authorize query strings: a page or a redirect to the registered URI', async (t) => {
  const challenge = fc.oneof(
    SHRINK,
    fc.constant(live.pkce.verifier.slice(0, 43)),
    fc.constantFrom(42, 44).map((n) => 'A'.repeat(n)),
    fc.constantFrom(`${'A'.repeat(42)}=`, `${'A'.repeat(42)}+`),
    nastyString,
  );
  const query = params(
    {
      response_type: fc.oneof(SHRINK, fc.constant('code'), fc.constantFrom('token', 'CODE', ''), nastyString),
      client_id: fc.oneof(
        SHRINK,
        fc.constant(app.client_id),
        fc.constantFrom(`cli_${'0'.repeat(32)}`, 'x'.repeat(101)),
        nastyString,
      ),
      redirect_uri: fc.oneof(
        SHRINK,
        fc.constant(REDIRECT),
        fc.constantFrom(`${REDIRECT}?x=1`, 'https://evil.example/cb'),
        nastyString,
      ),
      scope: fc.oneof(
        SHRINK,
        fc.constantFrom('customers:read', 'customers:read customers:read', 'admin:*', '', 'nope'),
        nastyString,
      ),
      state: fc.oneof(SHRINK, fc.constantFrom('st-1', ''), sized(), nastyString),
      code_challenge: challenge,
      code_challenge_method: fc.oneof(SHRINK, fc.constant('S256'), fc.constantFrom('plain', 's256', ''), nastyString),
    },
    4,
  );
  const s: Surface = {
    name: 'core GET /v1/oauth/authorize',
    methods: ['GET'],
    cases: fc
      .record({ method: otherMethod('GET'), qs: fc.oneof(SHRINK, query, badEscape), env: envelope(FORM) })
      .map((x) =>
        build({ method: x.method, path: `/v1/oauth/authorize?${x.qs}`, auth: [] }, x.env, undefined, 16 * 1024),
      ),
    port: api.port,
    rules: {
      contract: 'authorize-page',
      statuses: AUTHORIZE_STATUSES,
      redirect: (u, r) => {
        if (`${u.origin}${u.pathname}` !== REDIRECT) return `redirected to ${u} rather than the registered ${REDIRECT}`;
        if (!u.searchParams.get('error')) return `redirected without error: ${u}`;
        const state = queryParam(r, 'state');
        if (state !== null && u.searchParams.get('state') !== state)
          return `state ${JSON.stringify(state)} not echoed: ${u}`;
        return undefined;
      },
    },
    ledger,
    tiers: [api],
  };
  await fuzz(t, s, o);
  await stillReady(t, [api]);
});
