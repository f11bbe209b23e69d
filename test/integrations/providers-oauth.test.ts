import t from '#tap';
import Type from '#typebox';
import { integrationTokenKey } from '../../infra/stack.js';
import { loadConfig } from '../../lib/config.js';
import { DataCipher } from '../../lib/credentials/data-cipher.js';
import { IntegrationConfig, providersFromConfig } from '../../lib/integrations/config.js';
import { CONNECTOR_NAMES } from '../../lib/integrations/connectors.js';
import { authorizationUrl, ProviderError } from '../../lib/integrations/oauth.js';
import { forConnection } from '../../lib/integrations/providers.js';
import { createLogger } from '../../lib/logger.js';
import { connectPg } from '../../lib/pg.js';
import { AccessTokens, missingScope, retryAfterMs } from '../../processors/integrations/access-tokens.js';
import { client, startApi } from '../core-api/_helpers.js';
import { authorizeInBrowser, startFakeProvider } from '../helpers/fake-provider.js';
import { bootstrap, closeDb, profile, urls } from '../helpers/stack.js';

// The providers' real endpoints as defaults, overridable one by one; only the client id and secret
// must be configured. The authorize URL carries each provider's parameters (Google's offline
// access and consent prompt, Microsoft's tenant and offline_access). Then, against a local fake
// speaking Google's token format: the account from the id_token, and a revoked grant
// (invalid_grant at refresh) that leaves the integration in error telling the admin to reconnect.
t.teardown(closeDb);

const Schema = Type.Object({ ...IntegrationConfig });
const only = (vars: Record<string, string>) => providersFromConfig(loadConfig(Schema, vars));
const credentials = Object.fromEntries(
  CONNECTOR_NAMES.flatMap((n) => [
    [`INTEGRATION_${n.toUpperCase()}_CLIENT_ID`, `${n}-id`],
    [`INTEGRATION_${n.toUpperCase()}_CLIENT_SECRET`, `${n}-secret`],
  ]),
);

t.test('every variable is in the schema with a description; defaults are the real endpoints', async (t) => {
  const props = (Schema as unknown as { properties: Record<string, { description?: string; default?: unknown }> })
    .properties;
  t.equal(Object.keys(props).length, 8 * 7 + 1, 'seven per connector, and the Microsoft tenant');
  for (const [k, v] of Object.entries(props)) t.ok(v.description, `${k} is described`);
  t.same(only({}), {}, 'nothing configured without client ids and secrets');
  t.same(Object.keys(only({ INTEGRATION_SLACK_CLIENT_ID: 'x' })), [], 'an id without a secret is not enough');

  const p = only(credentials);
  t.same(Object.keys(p), CONNECTOR_NAMES, 'client id and secret are all each connector needs');
  t.match(p.gmail, {
    authorizeUrl: 'https://accounts.google.com/o/oauth2/v2/auth',
    tokenUrl: 'https://oauth2.googleapis.com/token',
    revokeUrl: 'https://oauth2.googleapis.com/revoke',
    apiUrl: 'https://gmail.googleapis.com',
  });
  t.equal(p.google_calendar?.apiUrl, 'https://www.googleapis.com/calendar/v3');
  for (const n of ['outlook', 'outlook_calendar', 'teams'] as const)
    t.match(p[n], {
      authorizeUrl: 'https://login.microsoftonline.com/common/oauth2/v2.0/authorize',
      tokenUrl: 'https://login.microsoftonline.com/common/oauth2/v2.0/token',
      revokeUrl: undefined,
      apiUrl: 'https://graph.microsoft.com/v1.0',
    });
  t.match(p.slack, {
    authorizeUrl: 'https://slack.com/oauth/v2/authorize',
    tokenUrl: 'https://slack.com/api/oauth.v2.access',
    apiUrl: 'https://slack.com/api',
  });
  t.match(p.intercom, {
    authorizeUrl: 'https://app.intercom.com/oauth',
    tokenUrl: 'https://api.intercom.io/auth/eagle/token',
    apiUrl: 'https://api.intercom.io',
  });
  t.match(forConnection(p.zendesk!, 'acme'), {
    authorizeUrl: 'https://acme.zendesk.com/oauth/authorizations/new',
    tokenUrl: 'https://acme.zendesk.com/oauth/tokens',
    apiUrl: 'https://acme.zendesk.com',
  });

  const tenant = only({ ...credentials, INTEGRATION_MICROSOFT_TENANT: 'contoso.onmicrosoft.com' });
  t.equal(tenant.teams?.tokenUrl, 'https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token');
  const moved = only({ ...credentials, INTEGRATION_GMAIL_API_URL: 'http://127.0.0.1:9/gmail/' });
  t.equal(moved.gmail?.apiUrl, 'http://127.0.0.1:9/gmail', 'one URL overridden, trailing slash dropped');
  t.equal(moved.gmail?.tokenUrl, 'https://oauth2.googleapis.com/token', 'the others stay');
});

t.test("the authorize URL carries each provider's parameters", async (t) => {
  const p = only(credentials);
  const o = { redirectUri: 'https://cs.example.com/cb', state: 's', challenge: 'c' };
  const google = authorizationUrl(p.gmail!, o).searchParams;
  t.equal(google.get('access_type'), 'offline', 'Google: a refresh token');
  t.equal(google.get('prompt'), 'consent', 'Google: every time, not only at the first consent');
  t.equal(
    google.get('scope'),
    'https://www.googleapis.com/auth/gmail.readonly https://www.googleapis.com/auth/gmail.send openid email',
  );
  const outlook = authorizationUrl(p.outlook!, o).searchParams;
  t.equal(outlook.get('scope'), 'offline_access User.Read Mail.Read Mail.Send', 'offline_access: a refresh token');
  t.equal(outlook.get('response_mode'), 'query');
  t.equal(
    authorizationUrl(p.outlook_calendar!, o).searchParams.get('scope'),
    'offline_access User.Read Calendars.Read',
  );
  t.equal(authorizationUrl(p.teams!, o).searchParams.get('scope'), 'offline_access ChannelMessage.Send');
  t.equal(authorizationUrl(p.slack!, o).searchParams.get('scope'), 'chat:write');
  t.notOk(authorizationUrl(p.slack!, o).searchParams.has('access_type'));
  t.notOk(authorizationUrl(p.intercom!, o).searchParams.has('scope'), "Intercom's permissions are on the app");
  for (const n of CONNECTOR_NAMES) {
    const q = authorizationUrl(forConnection(p[n]!, 'acme'), o).searchParams;
    t.match(Object.fromEntries(q), { response_type: 'code', client_id: `${n}-id`, code_challenge_method: 'S256' });
  }
});

t.test('failure words: a missing scope named, Retry-After read', async (t) => {
  t.match(
    missingScope('slack', 200, null, {
      ok: false,
      error: 'missing_scope',
      needed: 'chat:write',
      provided: 'users:read',
    }),
    /slack needs the scope chat:write/,
  );
  t.match(
    missingScope(
      'gmail',
      403,
      'Bearer error="insufficient_scope", scope="https://www.googleapis.com/auth/gmail.send"',
      {},
    ),
    /gmail needs the scope https:\/\/www\.googleapis\.com\/auth\/gmail\.send/,
  );
  t.match(
    missingScope('teams', 403, null, { error: { code: 'Forbidden', message: 'Missing role permissions' } }),
    /teams needs the scope offline_access ChannelMessage\.Send/,
  );
  t.equal(missingScope('teams', 404, null, {}), undefined);
  t.equal(retryAfterMs('3', 0), 3000);
  t.equal(retryAfterMs(null, 1234), 1234);
  t.ok(retryAfterMs(new Date(Date.now() + 10_000).toUTCString(), 0) > 8000, 'an HTTP date');
  t.ok(new ProviderError('x', 400, 'invalid_grant').revokedGrant);
  t.notOk(new ProviderError('x', 429).refused, 'a 429 may answer later');
});

t.test('Google-shaped token answers: account from the id_token; invalid_grant asks to reconnect', async (t) => {
  const fake = await startFakeProvider(t, 1);
  const env = fake.env('google_calendar');
  const api = await startApi(t, env);
  const ws = await bootstrap();
  const admin = client(api.url, ws.api_key);
  const started = await admin.post('/v1/integrations/google_calendar/connect');
  t.equal(started.status, 200, started.text);
  const page = await authorizeInBrowser(started.body.authorization_url);
  t.equal(page.status, 200, page.text.slice(0, 200));
  t.match(page.text, /connected as team@example\.com/, 'the email claim of the id_token');

  fake.refuseRefresh(true);
  const sql = connectPg(urls.DATABASE_URL, 2);
  t.teardown(() => sql.end());
  const tokens = new AccessTokens(
    sql,
    providersFromConfig(env),
    new DataCipher([integrationTokenKey(profile)]),
    createLogger('providers-oauth-test', 'silent'),
  );
  const c = { tenantId: ws.tenant_id, name: 'google_calendar' };
  await t.rejects(
    tokens.call(c, async () => ({ status: 200 })),
    { code: 'INTEGRATION_REFRESH_REFUSED' },
    'the token lives a second: due, refreshed, refused',
  );
  const e = (await admin.get('/v1/integrations')).body.data.find((i: { name: string }) => i.name === 'google_calendar');
  t.match(e, {
    status: 'error',
    error: /invalid_grant: The grant was revoked.*an admin must connect google_calendar again/,
  });
});
