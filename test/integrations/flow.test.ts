import { createHmac } from 'node:crypto';
import t from '#tap';
import { call, client, isProblem, randomUuid, startApi } from '../core-api/_helpers.js';
import { startFakeProvider } from '../helpers/fake-provider.js';
import {
  bootstrap,
  ch,
  closeDb,
  db,
  waitFor,
  PROPERTY_COLUMNS,
  propertiesText,
  type StoredPropertyColumns,
} from '../helpers/stack.js';
import { apiKey } from '../metrics/support.js';
import { processorsTier } from '../playbooks/support.js';

// Integrations end to end against a local fake OAuth provider: the catalog; connect → the
// provider's authorize page → callback → connected, tokens encrypted at rest; replayed, expired
// and denied authorizations; pushed activity (signature, deduplication, contact then domain
// matching, unmatched counted) into csp.events; playbook notifications through Slack; token
// refresh before expiry; disconnect with revocation; roles, unknown names, another workspace.
t.teardown(closeDb);
const fake = await startFakeProvider(t, 120);
const SIGNING = 'gmail-signing-secret';
const providerEnv = { ...fake.env('slack'), ...fake.env('gmail', SIGNING), ...fake.env('zendesk', 'zd-secret') };
const api = await startApi(t, providerEnv);
const ws = await bootstrap();
// Relays the activity events, sends notifications, refreshes tokens.
await processorsTier(t, [], {
  ...providerEnv,
  NOTIFY_POLL_MS: '100',
  INTEGRATION_REFRESH_POLL_MS: '200',
  INTEGRATION_TENANTS: ws.tenant_id,
});
const admin = client(api.url, ws.api_key);

/** Connect through the fake provider as a browser would: authorize (302) → callback. */
async function connect(name: string) {
  const started = await admin.post(`/v1/integrations/${name}/connect`);
  if (started.status !== 200) throw new Error(started.text);
  const auth = await fetch(started.body.authorization_url, { redirect: 'manual' });
  const back = auth.headers.get('location')!;
  const page = await call(new URL(back).origin, 'GET', new URL(back).pathname + new URL(back).search);
  return { started: started.body, page };
}
const entry = async (name: string, c = admin) =>
  (await c.get('/v1/integrations')).body.data.find((i: { name: string }) => i.name === name);

t.test('the catalog: every connector, configured or not, disconnected', async (t) => {
  const viewer = client(api.url, await apiKey(api.url, ws, 'viewer', ['customers:read']));
  const r = await viewer.get('/v1/integrations');
  t.equal(r.status, 200, 'any valid credential');
  t.same(
    r.body.data.map((i: { name: string; category: string }) => `${i.name}:${i.category}`),
    [
      'gmail:email',
      'outlook:email',
      'google_calendar:calendar',
      'outlook_calendar:calendar',
      'slack:chat',
      'teams:chat',
      'zendesk:ticketing',
      'intercom:ticketing',
    ],
  );
  t.match(await entry('slack'), { status: 'disconnected', configured: true, connection_id: null });
  t.match(await entry('teams'), { status: 'disconnected', configured: false });
  isProblem(t, await admin.post('/v1/integrations/teams/connect'), 409, 'integration_not_configured');
  isProblem(t, await admin.post('/v1/integrations/myspace/connect'), 404, 'not_found');
  isProblem(t, await admin.del('/v1/integrations/myspace'), 404, 'not_found');
  const csm = client(api.url, await apiKey(api.url, ws, 'csm', ['customers:read']));
  isProblem(t, await csm.post('/v1/integrations/slack/connect'), 403, 'insufficient_role');
  isProblem(t, await csm.del('/v1/integrations/slack'), 403, 'insufficient_role');
});

t.test('connect: authorize URL with PKCE, callback, tokens encrypted; replay refused', async (t) => {
  const { started, page } = await connect('slack');
  const u = new URL(started.authorization_url);
  t.equal(u.origin + u.pathname, `${fake.url}/authorize`);
  t.match(Object.fromEntries(u.searchParams), {
    response_type: 'code',
    client_id: 'client-1',
    redirect_uri: `${api.url}/v1/integrations/slack/callback`,
    state: started.state,
    code_challenge_method: 'S256',
  });
  t.match(u.searchParams.get('code_challenge'), /^[A-Za-z0-9_-]{43}$/);
  t.ok(Date.parse(started.expires_at) - Date.now() > 9 * 60_000, 'the state lives 10 minutes');
  t.equal(page.status, 200, page.text.slice(0, 300));
  t.match(page.headers.get('content-type'), /text\/html/);
  t.match(page.text, /slack is connected as team@example\.com/);
  const e = await entry('slack');
  t.match(e, { status: 'connected', account: 'team@example.com', error: null });
  t.ok(e.connection_id && e.connected_at);
  const [row] = await db()<Array<{ access_token: string; refresh_token: string }>>`
    SELECT access_token, refresh_token FROM integrations WHERE tenant_id = ${ws.tenant_id} AND name = 'slack'`;
  const issued = fake.issued.at(-1)!;
  t.notOk(row.access_token.includes(issued.access), 'the access token is not stored in clear');
  t.match(row.access_token, /^v2\.[\w-]{8}\.[\w-]+\.[\w-]+\.[\w-]+$/, 'AES-GCM ciphertext with its key id');
  t.notOk(row.refresh_token.includes(issued.refresh));

  const replay = await call(api.url, 'GET', `/v1/integrations/slack/callback?code=x&state=${started.state}`);
  t.equal(replay.status, 400, 'a used state is refused');
  t.equal((await entry('slack')).status, 'connected', 'and changes nothing');
  isProblem(t, await admin.post('/v1/integrations/slack/connect'), 409, 'integration_already_connected');
  const forged = await call(api.url, 'GET', '/v1/integrations/slack/callback?code=x&state=forged');
  t.equal(forged.status, 400);
});

t.test('expired and denied authorizations leave the integration in error', async (t) => {
  const first = (await admin.post('/v1/integrations/zendesk/connect')).body;
  const second = (await admin.post('/v1/integrations/zendesk/connect')).body;
  const old = await call(api.url, 'GET', `/v1/integrations/zendesk/callback?code=x&state=${first.state}`);
  t.equal(old.status, 400, 'a new connect voids the previous state');
  await db()`UPDATE integrations SET state_expires_at = now() - interval '1 second'
    WHERE tenant_id = ${ws.tenant_id} AND name = 'zendesk'`;
  const expired = await call(api.url, 'GET', `/v1/integrations/zendesk/callback?code=x&state=${second.state}`);
  t.equal(expired.status, 400);
  t.match(await entry('zendesk'), { status: 'error', error: /expired/ });

  fake.denyNext();
  const { page } = await connect('zendesk');
  t.equal(page.status, 400);
  t.match(page.text, /access_denied/);
  t.match(await entry('zendesk'), { status: 'error', error: /access_denied: The user said no/ });
});

t.test('pushed activity: signature, contact then domain, deduplicated, stored as events', async (t) => {
  await connect('gmail');
  const { connection_id } = await entry('gmail');
  const acme = (await admin.post('/v1/customers', { name: 'Acme', email_domain: 'acme.example' })).body;
  const globex = (await admin.post('/v1/customers', { name: 'Globex', email_domain: 'globex.example' })).body;
  // A contact of Globex whose address is on Acme's domain: the contact wins.
  await admin.post(`/v1/customers/${globex.id}/contacts`, { name: 'Dana', email: 'Dana@acme.example' });
  const path = `/v1/integrations/gmail/events/${connection_id}`;
  const push = (body: object, secret = SIGNING) => {
    const raw = JSON.stringify(body);
    const sig = createHmac('sha256', secret).update(raw).digest('hex');
    return call(api.url, 'POST', path, {
      raw,
      headers: { 'content-type': 'application/json', 'x-integration-signature': `sha256=${sig}` },
    });
  };
  const at = new Date(Date.now() - 60_000).toISOString();
  const body = {
    activities: [
      { id: 'm-1', type: 'email_sent', occurred_at: at, participants: ['bob@acme.example'], subject: 'Hello' },
      { id: 'm-2', type: 'email_received', occurred_at: at, participants: ['dana@acme.example', 'x@globex.example'] },
      { id: 'm-3', type: 'email_received', occurred_at: at, participants: ['stranger@nowhere.example'] },
    ],
  };
  isProblem(t, await push(body, 'wrong-secret'), 401, 'invalid_signature');
  isProblem(
    t,
    await call(api.url, 'POST', path, { body, headers: { 'content-type': 'application/json' } }),
    401,
    'invalid_signature',
  );
  const first = await push(body);
  t.equal(first.status, 202, first.text);
  t.same(first.body, { received: 3, duplicates: 0, unmatched: 1, events: 2 });
  const again = await push(body);
  t.same(again.body, { received: 3, duplicates: 3, unmatched: 0, events: 0 }, 'a retried push stores nothing');
  const bad = await push({
    activities: [{ id: 'm-9', type: 'meeting_held', occurred_at: at, participants: ['a@b.co'] }],
  });
  isProblem(t, bad, 400, 'validation_failed');
  t.match(bad.body.errors, [{ field: 'activities[0].type' }]);
  isProblem(t, await push({ activities: [] }), 400, 'validation_failed');
  // A time events cannot hold (ClickHouse's DateTime: 1970 to 2106) is refused here, not stored for a
  // relay that could never publish it.
  for (const when of ['6408-09-18T00:00:00Z', '1969-12-31T23:59:59Z', '2106-02-07T06:28:16Z']) {
    const far = await push({
      activities: [{ id: `m-far-${when}`, type: 'email_sent', occurred_at: when, participants: ['bob@acme.example'] }],
    });
    isProblem(t, far, 400, 'validation_failed');
    t.match(far.body.errors, [{ field: 'activities[0].occurred_at', code: 'invalid_value' }], when);
  }

  const rows = await waitFor(
    'the activity events in csp.events',
    async () => {
      const r = await ch<{ event_name: string; customer_id: string; surface: string } & StoredPropertyColumns>(
        `SELECT event_name, toString(customer_id) AS customer_id, surface, ${PROPERTY_COLUMNS} FROM csp.events
         WHERE tenant_id = '${ws.tenant_id}' AND surface = 'integration' ORDER BY event_name`,
      );
      return r.length === 2 ? r : undefined;
    },
    30_000,
  );
  t.same(
    rows.map((r) => [r.event_name, r.customer_id, r.surface]),
    [
      ['email_received', globex.id, 'integration'],
      ['email_sent', acme.id, 'integration'],
    ],
    'm-1 → Acme by domain; m-2 → Globex only (its contact wins over the domain); m-3 unmatched',
  );
  t.match(JSON.parse(propertiesText(rows[1])), { activity_id: 'm-1', integration: 'gmail', subject: 'Hello' });
  t.match(await entry('gmail'), { activities: 2, unmatched_activities: 1 });
  const other = await push({ activities: body.activities.slice(0, 1) });
  t.equal(other.body.duplicates, 1);
  const wrong = await call(api.url, 'POST', `/v1/integrations/gmail/events/${randomUuid()}`, {
    raw: JSON.stringify(body),
    headers: {
      'content-type': 'application/json',
      'x-integration-signature': `sha256=${createHmac('sha256', SIGNING).update(JSON.stringify(body)).digest('hex')}`,
    },
  });
  isProblem(t, wrong, 404, 'not_found');
});

t.test('one push naming an activity twice: stored once, the second counted as a duplicate', async (t) => {
  const { connection_id, activities } = await entry('gmail');
  const initech = (await admin.post('/v1/customers', { name: 'Initech', email_domain: 'initech.example' })).body;
  const raw = JSON.stringify({
    activities: [
      {
        id: 'm-twice',
        type: 'email_received',
        occurred_at: new Date().toISOString(),
        participants: ['peter@initech.example'],
      },
      {
        id: 'm-once',
        type: 'email_sent',
        occurred_at: new Date().toISOString(),
        participants: ['bill@initech.example'],
      },
      // The same message again, as a provider batching its retries would send it.
      {
        id: 'm-twice',
        type: 'email_received',
        occurred_at: new Date().toISOString(),
        participants: ['bill@initech.example'],
      },
    ],
  });
  const r = await call(api.url, 'POST', `/v1/integrations/gmail/events/${connection_id}`, {
    raw,
    headers: {
      'content-type': 'application/json',
      'x-integration-signature': `sha256=${createHmac('sha256', SIGNING).update(raw).digest('hex')}`,
    },
  });
  t.equal(r.status, 202, r.text);
  t.same(r.body, { received: 3, duplicates: 1, unmatched: 0, events: 2 });
  const outbox = await db()<Array<{ activity_id: string; participants: string[] }>>`
    SELECT properties->>'activity_id' AS activity_id, properties->'participants' AS participants FROM event_outbox
    WHERE tenant_id = ${ws.tenant_id} AND customer_id = ${initech.id} ORDER BY activity_id`;
  t.same(
    outbox,
    [
      { activity_id: 'm-once', participants: ['bill@initech.example'] },
      { activity_id: 'm-twice', participants: ['peter@initech.example'] },
    ],
    'one event per activity id: the first of the two',
  );
  t.match(await entry('gmail'), { activities: activities + 2 });
  const rows = await waitFor(
    'the events in csp.events',
    async () => {
      const x = await ch<{ event_name: string }>(
        `SELECT event_name FROM csp.events WHERE tenant_id = '${ws.tenant_id}' AND customer_id = '${initech.id}'
         ORDER BY event_name`,
      );
      return x.length >= 2 ? x : undefined;
    },
    30_000,
  );
  t.same(
    rows.map((x) => x.event_name),
    ['email_received', 'email_sent'],
  );
});

t.test('notify through Slack; tokens refreshed before expiry; disconnect revokes', async (t) => {
  const customer = (await admin.post('/v1/customers', { name: 'Notified', arr: 9000 })).body;
  const pb = (
    await admin.post('/v1/playbooks', {
      name: 'Big accounts',
      trigger: { type: 'condition', expression: 'arr > 8000' },
      actions: [
        { type: 'notify', channel: 'slack', target: '#cs-alerts' },
        { type: 'notify', channel: 'teams', target: 'CS team' },
        { type: 'notify', channel: 'email', target: 'cs@example.com', message: 'Look at this one' },
      ],
    })
  ).body;
  const run = await admin.post(`/v1/playbooks/${pb.id}/run`, {});
  t.equal(run.status, 200, run.text);
  const mine = run.body.actions.filter((a: { customer_id: string }) => a.customer_id === customer.id);
  t.match(mine, [
    { type: 'notify', status: 'succeeded', via: 'slack' },
    { type: 'notify', status: 'failed', reason: 'integration_not_connected' },
    { type: 'notify', status: 'succeeded', via: 'gmail' },
  ]);
  const gmailSend = '/api/gmail/v1/users/me/messages/send';
  const sent = await waitFor('both messages at the provider', () => {
    const m = fake.messages.filter((x) => JSON.stringify(x.body).includes('#cs-alerts') || x.path === gmailSend);
    return m.length >= 2 ? m : undefined;
  });
  const slack = sent.find((m) => m.path === '/api/chat.postMessage')!;
  t.same(slack.body, { channel: '#cs-alerts', text: 'Playbook "Big accounts" fired for Notified' });
  t.match(slack.auth, /^Bearer at-/);
  // Gmail users.messages.send: an RFC 5322 message, base64url, in `raw`.
  const mail = Buffer.from(String(sent.find((m) => m.path === gmailSend)?.body.raw), 'base64url').toString();
  t.match(mail, /^To: cs@example\.com\r\nSubject: Look at this one\r\n/);
  const [, text] = mail.split('\r\n\r\n');
  t.equal(Buffer.from(text, 'base64').toString(), 'Look at this one');

  // The slack token expires in 120 s: inside the 5-minute margin, so it is refreshed.
  const refreshed = await waitFor('a refresh', () => (fake.refreshes > 0 ? fake.refreshes : undefined));
  t.ok(refreshed >= 1);
  const [row] = await db()<Array<{ status: string; left: number }>>`
    SELECT status, extract(epoch FROM token_expires_at - now())::int AS left FROM integrations
    WHERE tenant_id = ${ws.tenant_id} AND name = 'slack'`;
  t.equal(row.status, 'connected');

  const { connection_id } = await entry('gmail');
  const before = fake.revoked.length;
  t.equal((await admin.del('/v1/integrations/gmail')).status, 204);
  t.ok(fake.revoked.length >= before + 1, 'the tokens were revoked at the provider');
  t.match(await entry('gmail'), { status: 'disconnected', connection_id: null, account: null });
  const [gone] = await db()<Array<{ access_token: string | null }>>`
    SELECT access_token FROM integrations WHERE tenant_id = ${ws.tenant_id} AND name = 'gmail'`;
  t.equal(gone.access_token, null, 'tokens forgotten');
  const raw = JSON.stringify({
    activities: [{ id: 'late', type: 'email_sent', occurred_at: new Date().toISOString(), participants: ['a@b.co'] }],
  });
  const late = await call(api.url, 'POST', `/v1/integrations/gmail/events/${connection_id}`, {
    raw,
    headers: {
      'content-type': 'application/json',
      'x-integration-signature': `sha256=${createHmac('sha256', SIGNING).update(raw).digest('hex')}`,
    },
  });
  isProblem(t, late, 404, 'not_found');
  t.equal((await admin.del('/v1/integrations/gmail')).status, 204, 'disconnecting again is 204');
});

t.test('another workspace sees only its own integrations', async (t) => {
  const other = await bootstrap();
  const e = (await client(api.url, other.api_key).get('/v1/integrations')).body.data.find(
    (i: { name: string }) => i.name === 'slack',
  );
  t.match(e, { status: 'disconnected', connection_id: null });
  t.equal((await entry('slack')).status, 'connected', 'ours is untouched');
});
