import t from '#tap';
import { call, client, isProblem, randomUuid, startApi } from '../core-api/_helpers.js';
import { authorizeInBrowser } from '../helpers/fake-provider.js';
import { intercomApp, intercomConversation, startFakeIntercom } from '../helpers/fakes/intercom.js';
import { startFakeZendesk, type ZendeskTicket, zendeskTicketEvent } from '../helpers/fakes/zendesk.js';
import {
  bootstrap,
  ch,
  closeDb,
  db,
  PROPERTY_COLUMNS,
  propertiesText,
  type StoredPropertyColumns,
  waitFor,
} from '../helpers/stack.js';
import { processorsTier } from '../playbooks/support.js';

// Ticketing against fakes that speak Zendesk's and Intercom's documented formats: Zendesk connected
// on the account's subdomain, its webhook created there with the signing secret kept; the
// tickets from before the connection exported through the cursor-based incremental export (a 429
// waited out, pages followed by cursor); signed webhook deliveries into ticket_opened and
// ticket_closed, matched through the requester's e-mail (contact first, then domain), stored
// once whatever is retried or was backfilled; bad signatures and replays refused with nothing
// stored; Intercom's notification envelope with its X-Hub-Signature, routed from the app's one URL to
// the workspaces connected to the Intercom workspace it names; disconnect removes the webhook.
t.teardown(closeDb);
const zd = await startFakeZendesk(t, 'acme');
const ic = await startFakeIntercom(t);
const env = { ...zd.env, ...ic.env };
const api = await startApi(t, env);
const ws = await bootstrap();
const other = await bootstrap();
const third = await bootstrap();
const fourth = await bootstrap();
/** The intercom test's workspaces: made before the tier, whose outbox relays name the workspaces they relay. */
const intercom = [await bootstrap(), await bootstrap(), await bootstrap()];
await processorsTier(t, [], {
  ...env,
  INTEGRATION_REFRESH_POLL_MS: '100',
  INTEGRATION_TENANTS: [ws, other, third, fourth].map((w) => w.tenant_id).join(','),
  OUTBOX_TENANTS: [ws, other, third, fourth, ...intercom].map((w) => w.tenant_id).join(','),
});
const admin = client(api.url, ws.api_key);
const entry = async (name: string, c = admin) =>
  (await c.get('/v1/integrations')).body.data.find((i: { name: string }) => i.name === name);

const acme = (await admin.post('/v1/customers', { name: 'Acme', email_domain: 'acme.example' })).body;
const globex = (await admin.post('/v1/customers', { name: 'Globex', email_domain: 'globex.example' })).body;
// A contact of Globex on Acme's domain: the contact wins over the domain.
await admin.post(`/v1/customers/${globex.id}/contacts`, { name: 'Dana', email: 'dana@acme.example' });

const daysAgo = (d: number) => new Date(Date.now() - d * 86_400_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
/** A ticket Bob (Acme, user 101) opened just now. */
const bobsNewTicket = (id: number): ZendeskTicket => ({
  id,
  requester_id: 101,
  status: 'new',
  created_at: daysAgo(0),
  updated_at: daysAgo(0),
});
zd.users.set(101, 'bob@acme.example');
zd.users.set(102, 'dana@acme.example');
zd.users.set(103, 'stranger@nowhere.example');
zd.tickets.push(
  { id: 1, requester_id: 101, status: 'solved', created_at: daysAgo(20), updated_at: daysAgo(18) },
  { id: 2, requester_id: 103, status: 'open', created_at: daysAgo(10), updated_at: daysAgo(9) },
  { id: 3, requester_id: 102, status: 'pending', created_at: daysAgo(5), updated_at: daysAgo(4) },
);

/** The workspace's ticket events in csp.events once `n` are there: [event, customer, activity id]. */
const ticketEvents = (n: number, tenant = ws.tenant_id) =>
  waitFor(
    `${n} ticket events`,
    async () => {
      const r = await ch<{ event_name: string; customer_id: string } & StoredPropertyColumns>(
        `SELECT event_name, toString(customer_id) AS customer_id, ${PROPERTY_COLUMNS} FROM csp.events
         WHERE tenant_id = '${tenant}' AND surface = 'integration'`,
      );
      const rows = r
        .map((x) => ({ event_name: x.event_name, customer_id: x.customer_id, p: JSON.parse(propertiesText(x)) }))
        .sort((a, b) => `${a.event_name}${a.p.activity_id}`.localeCompare(`${b.event_name}${b.p.activity_id}`));
      return rows.length >= n ? rows : undefined;
    },
    30_000,
  );

t.test('zendesk: connect on the subdomain, webhook created, past tickets backfilled by cursor', async (t) => {
  isProblem(t, await admin.post('/v1/integrations/zendesk/connect'), 400, 'validation_failed');
  isProblem(t, await admin.post('/v1/integrations/zendesk/connect?subdomain=no_such!'), 400, 'validation_failed');
  // The export's first answer is Zendesk's rate limit: waited out, then the pages.
  zd.queueExport({ status: 429, headers: { 'retry-after': '1' }, body: { error: 'APIRateLimitExceeded' } });
  const started = await admin.post('/v1/integrations/zendesk/connect?subdomain=acme');
  t.equal(started.status, 200, started.text);
  const u = new URL(started.body.authorization_url);
  t.equal(`${u.origin}${u.pathname}`, `${zd.url}/acme/oauth/authorizations/new`, 'the account’s authorize page');
  t.equal(u.searchParams.get('scope'), 'read webhooks:write');
  const page = await authorizeInBrowser(started.body.authorization_url);
  t.equal(page.status, 200, page.text.slice(0, 300));
  const e = await entry('zendesk');
  t.match(e, { status: 'connected', error: null });
  t.equal(zd.webhooks.length, 1, 'one webhook created in the account');
  t.equal(zd.webhooks[0].endpoint, `${api.url}/v1/integrations/zendesk/webhooks/${e.connection_id}`);
  t.same(zd.webhooks[0].subscriptions, ['zen:event-type:ticket.created', 'zen:event-type:ticket.status_changed']);

  const rows = await ticketEvents(3);
  t.same(
    rows.map((r) => [r.event_name, r.customer_id, r.p.activity_id]),
    [
      ['ticket_closed', acme.id, 'zendesk:ticket:1:closed'],
      ['ticket_opened', acme.id, 'zendesk:ticket:1:opened'],
      ['ticket_opened', globex.id, 'zendesk:ticket:3:opened'],
    ],
    "ticket 1 solved (Acme by domain), ticket 3 (Dana, Globex's contact), ticket 2's requester matches no one",
  );
  await waitFor('the backfill to be recorded done', async () => (await entry('zendesk')).unmatched_activities === 1);
  t.equal(zd.exports.length, 3, 'the 429, then two pages');
  t.match(zd.exports[1], /^start_time=\d+&include=users$/);
  t.match(zd.exports[2], /^cursor=[^&]+&include=users$/, 'the second page by after_cursor');
});

t.test('zendesk webhook: signed ticket events, matched, stored once', async (t) => {
  const ticket = bobsNewTicket(4);
  const created = zendeskTicketEvent('ticket.created', ticket);
  const first = await zd.deliver(created);
  t.equal(first.status, 200, JSON.stringify(first.body));
  t.same(first.body, { received: 1, duplicates: 0, unmatched: 0, events: 1 });
  t.same((await zd.deliver(created)).body, { received: 1, duplicates: 1, unmatched: 0, events: 0 }, 'a retry');
  const backfilled = zendeskTicketEvent('ticket.created', { ...ticket, id: 1 });
  t.equal((await zd.deliver(backfilled)).body.duplicates, 1, 'a ticket the backfill stored counts once');
  const pending = await zd.deliver(zendeskTicketEvent('ticket.status_changed', ticket, 'pending'));
  t.same(pending.body, { received: 0, duplicates: 0, unmatched: 0, events: 0 }, 'not a closing status');
  const solved = await zd.deliver(zendeskTicketEvent('ticket.status_changed', ticket, 'solved'));
  t.same(solved.body, { received: 1, duplicates: 0, unmatched: 0, events: 1 });

  const rows = await ticketEvents(5);
  const ids = rows.map((r) => r.p.activity_id);
  t.ok(ids.includes('zendesk:ticket:4:opened') && ids.includes('zendesk:ticket:4:closed'));
  t.equal(rows.length, 5);
});

t.test('zendesk webhook: bad signatures and replays are refused, nothing stored', async (t) => {
  const ticket = bobsNewTicket(5);
  const event = zendeskTicketEvent('ticket.created', ticket);
  isProblem(t, await zd.deliver(event, { secret: 'not-the-secret' }), 401, 'invalid_signature');
  const old = new Date(Date.now() - 6 * 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
  // Signed, but six minutes old.
  isProblem(t, await zd.deliver(event, { timestamp: old }), 401, 'invalid_signature');
  const { connection_id } = await entry('zendesk');
  const unsigned = await call(api.url, 'POST', `/v1/integrations/zendesk/webhooks/${connection_id}`, {
    body: event,
  });
  isProblem(t, unsigned, 401, 'invalid_signature');
  const nowhere = await call(api.url, 'POST', `/v1/integrations/zendesk/webhooks/${randomUuid()}`, { body: event });
  isProblem(t, nowhere, 404, 'not_found');
  const [stored] = await db()<Array<{ n: number }>>`
    SELECT count(*)::int AS n FROM integration_activities
    WHERE tenant_id = ${ws.tenant_id} AND activity_id = 'zendesk:ticket:5:opened'`;
  t.equal(stored.n, 0, 'nothing stored');
});

t.test('intercom: connect (token without refresh or expiry), signed notifications', async (t) => {
  const started = await admin.post('/v1/integrations/intercom/connect');
  t.equal(started.status, 200, started.text);
  t.notOk(new URL(started.body.authorization_url).searchParams.has('scope'), 'permissions live on the app');
  t.equal((await authorizeInBrowser(started.body.authorization_url)).status, 200);
  const e = await entry('intercom');
  t.match(e, { status: 'connected' });
  const endpoint = `${api.url}/v1/integrations/intercom/webhooks/${e.connection_id}`;
  const conversation = intercomConversation('1911149811', 'jo@globex.example');
  const opened = await ic.notify(endpoint, 'conversation.user.created', conversation);
  t.same(opened.body, { received: 1, duplicates: 0, unmatched: 0, events: 1 }, JSON.stringify(opened.body));
  t.equal((await ic.notify(endpoint, 'conversation.user.created', conversation)).body.duplicates, 1, 'retried');
  const closed = await ic.notify(endpoint, 'conversation.admin.closed', { ...conversation, state: 'closed' });
  t.same(closed.body, { received: 1, duplicates: 0, unmatched: 0, events: 1 });
  const ping = await ic.notify(endpoint, 'ping', { type: 'ping', message: 'something something interzen' });
  t.same(ping.body, { received: 0, duplicates: 0, unmatched: 0, events: 0 });

  const forged = await ic.notify(endpoint, 'conversation.user.created', intercomConversation('2', 'x@globex.example'), {
    secret: 'wrong',
  });
  isProblem(t, forged, 401, 'invalid_signature');
  const stale = await ic.notify(endpoint, 'conversation.user.created', intercomConversation('3', 'x@globex.example'), {
    createdAt: Math.floor(Date.now() / 1000) - 600,
  });
  t.equal(stale.status, 401, 'ten minutes old: a replay');

  const rows = await waitFor('the intercom events', async () => {
    const r = (await ticketEvents(7)).filter((x) => x.p.integration === 'intercom');
    return r.length === 2 ? r : undefined;
  });
  t.same(
    rows.map((r) => [r.event_name, r.customer_id]),
    [
      ['ticket_closed', globex.id],
      ['ticket_opened', globex.id],
    ],
  );
});

t.test(
  'intercom: the app has one webhook URL; each notification reaches the workspaces connected to its own',
  async (t) => {
    // Two Intercom workspaces; the service's workspaces A and C connect the first, B the second. Each
    // has a customer on globex.example, so only the routing keeps B's conversations out of A.
    const one = intercomApp('Globex EU');
    const two = intercomApp('Globex US');
    t.teardown(() => {
      ic.workspace = ic.home;
    });
    const [a, b, c] = intercom;
    const joined: Array<{ ws: typeof a; app: typeof one; customer: string; connection: string }> = [];
    for (const [w, app] of [
      [a, one],
      [b, two],
      [c, one],
    ] as const) {
      const cl = client(api.url, w.api_key);
      const customer = (await cl.post('/v1/customers', { name: 'Globex', email_domain: 'globex.example' })).body.id;
      ic.workspace = app;
      const started = await cl.post('/v1/integrations/intercom/connect');
      t.equal((await authorizeInBrowser(started.body.authorization_url)).status, 200);
      const e = await entry('intercom', cl);
      t.match(e, { status: 'connected', account: app.name }, 'the Intercom workspace is the account shown');
      joined.push({ ws: w, app, customer, connection: e.connection_id });
    }

    const url = `${api.url}/v1/integrations/intercom/webhooks`;
    const head = await fetch(url, { method: 'HEAD' });
    t.equal(head.status, 200, 'Intercom checks the URL with HEAD when it is set in the Developer Hub');
    const toOne = await ic.notify(url, 'conversation.user.created', intercomConversation('501', 'jo@globex.example'), {
      appId: one.id_code,
    });
    t.same(toOne.body, { received: 2, duplicates: 0, unmatched: 0, events: 2 }, 'A and C, not B');
    const toTwo = await ic.notify(url, 'conversation.user.created', intercomConversation('502', 'kim@globex.example'), {
      appId: two.id_code,
    });
    t.same(toTwo.body, { received: 1, duplicates: 0, unmatched: 0, events: 1 }, 'B only');
    const retried = await ic.notify(
      url,
      'conversation.user.created',
      intercomConversation('502', 'kim@globex.example'),
      {
        appId: two.id_code,
      },
    );
    t.same(retried.body, { received: 1, duplicates: 1, unmatched: 0, events: 0 }, 'a retry is stored once');
    const stranger = await ic.notify(
      url,
      'conversation.user.created',
      intercomConversation('503', 'x@globex.example'),
      {
        appId: intercomApp('Nobody').id_code,
      },
    );
    t.same(stranger.body, { received: 0, duplicates: 0, unmatched: 0, events: 0 }, 'no one connected it: 200, dropped');
    const forged = await ic.notify(url, 'conversation.user.created', intercomConversation('504', 'x@globex.example'), {
      appId: one.id_code,
      secret: 'wrong',
    });
    isProblem(t, forged, 401, 'invalid_signature');
    // The earlier per-connection URL still works, for its own Intercom workspace only.
    const aliasOf = (i: number) => `${url}/${joined[i].connection}`;
    const own = await ic.notify(
      aliasOf(1),
      'conversation.admin.closed',
      intercomConversation('502', 'kim@globex.example'),
      {
        appId: two.id_code,
      },
    );
    t.same(own.body, { received: 1, duplicates: 0, unmatched: 0, events: 1 });
    const foreign = await ic.notify(
      aliasOf(0),
      'conversation.user.created',
      intercomConversation('505', 'x@globex.example'),
      {
        appId: two.id_code,
      },
    );
    t.same(foreign.body, { received: 0, duplicates: 0, unmatched: 0, events: 0 }, "another Intercom workspace's");

    const expected = [
      ['intercom:conversation:501:opened'],
      ['intercom:conversation:502:closed', 'intercom:conversation:502:opened'],
      ['intercom:conversation:501:opened'],
    ];
    for (const [i, j] of joined.entries()) {
      const stored = await db()<Array<{ activity_id: string }>>`
      SELECT activity_id FROM integration_activities
      WHERE tenant_id = ${j.ws.tenant_id} AND name = 'intercom' ORDER BY activity_id`;
      t.same(
        stored.map((r) => r.activity_id),
        expected[i],
        `workspace ${'ABC'[i]} holds its own conversations`,
      );
      const events = await ticketEvents(expected[i].length, j.ws.tenant_id);
      t.same(
        events.map((e) => [e.p.activity_id, e.customer_id]).sort(),
        expected[i].map((id) => [id, j.customer]).sort(),
        `workspace ${'ABC'[i]}'s events, for its own customer`,
      );
    }
  },
);

t.test('intercom: a token Intercom will not identify leaves the integration in error', async (t) => {
  const w = await bootstrap();
  const cl = client(api.url, w.api_key);
  ic.meFault = {
    status: 401,
    body: {
      type: 'error.list',
      request_id: 'b0ac2b6e',
      errors: [{ code: 'unauthorized', message: 'Access Token Invalid' }],
    },
  };
  const started = await cl.post('/v1/integrations/intercom/connect');
  const page = await authorizeInBrowser(started.body.authorization_url);
  t.equal(page.status, 400);
  t.match(page.text, /GET \/me/);
  t.match(await entry('intercom', cl), { status: 'error', error: /identify the workspace.*HTTP 401 unauthorized/ });
});

t.test('disconnect: the Zendesk webhook is deleted, the token revoked, deliveries refused', async (t) => {
  const { connection_id } = await entry('zendesk');
  t.equal((await admin.del('/v1/integrations/zendesk')).status, 204);
  t.ok(zd.webhooks[0].deleted, 'the webhook is gone from the account');
  t.equal(zd.revoked.length, 1, 'DELETE /api/v2/oauth/tokens/current.json');
  const late = await call(api.url, 'POST', `/v1/integrations/zendesk/webhooks/${connection_id}`, {
    body: zendeskTicketEvent('ticket.created', bobsNewTicket(9)),
  });
  isProblem(t, late, 404, 'not_found');
  t.equal((await admin.del('/v1/integrations/intercom')).status, 204);
  t.equal(ic.uninstalled.length, 1, 'POST /auth/uninstall');
});

t.test('zendesk: a token that may not create webhooks leaves the integration in error naming the scope', async (t) => {
  zd.forbidWebhooks = true;
  t.teardown(() => {
    zd.forbidWebhooks = false;
  });
  const c = client(api.url, other.api_key);
  const started = await c.post('/v1/integrations/zendesk/connect?subdomain=acme');
  const page = await authorizeInBrowser(started.body.authorization_url);
  t.equal(page.status, 400);
  t.match(page.text, /webhooks:write/);
  t.match(await entry('zendesk', c), { status: 'error', error: /403.*webhooks:write/ });
});

t.test('zendesk: a token Zendesk disowns puts the integration in error; the delivery is retried later', async (t) => {
  const c = client(api.url, third.api_key);
  const started = await c.post('/v1/integrations/zendesk/connect?subdomain=acme');
  t.equal((await authorizeInBrowser(started.body.authorization_url)).status, 200);
  await waitFor('the (empty) backfill', async () => {
    const [r] = await db()<Array<{ done: boolean }>>`
      SELECT backfilled_at IS NOT NULL AS done FROM integrations WHERE tenant_id = ${third.tenant_id} AND name = 'zendesk'`;
    return r?.done;
  });
  zd.revokeAll();
  const ticket = bobsNewTicket(8);
  const r = await zd.deliver(zendeskTicketEvent('ticket.created', ticket));
  isProblem(t, r, 503, 'service_unavailable');
  t.match(await entry('zendesk', c), { status: 'error', error: /HTTP 401.*connect zendesk again/ });
});

t.test('zendesk: a token Zendesk disowns during the backfill puts the integration in error, not retried', async (t) => {
  const c = client(api.url, fourth.api_key);
  const before = zd.exports.length;
  // What Zendesk answers a revoked token, to the export's first request.
  zd.queueExport({ status: 401, body: { error: "Couldn't authenticate you" } });
  const started = await c.post('/v1/integrations/zendesk/connect?subdomain=acme');
  t.equal((await authorizeInBrowser(started.body.authorization_url)).status, 200);
  const e = await waitFor('the integration in error', async () => {
    const x = await entry('zendesk', c);
    return x.status === 'error' ? x : undefined;
  });
  t.match(e.error, /^ticket backfill: Zendesk refused the token \(HTTP 401\).*an admin must connect zendesk again$/);
  t.equal(zd.exports.length - before, 1, 'asked once: an integration in error is not backfilled');
});
