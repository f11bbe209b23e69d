import t from '#tap';
import { client, isProblem, startApi } from '../core-api/_helpers.js';
import { GMAIL_READ, startFakeGoogle } from '../helpers/fakes/google.js';
import { bootstrap, closeDb, db, startTier } from '../helpers/stack.js';
import { apiKey } from '../metrics/support.js';
import { ago, connect, DAY_MS, entry, firstSync, produced, stored, storedText, syncNow } from './sync-support.js';

// Gmail sync against a local Gmail that speaks the Gmail API v1: the first sync (getProfile, then
// messages.list over the 30-day lookback, page by page, each message's metadata), then
// history.list from the stored historyId; contact-then-domain matching, the workspace's own domain
// ignored, no subject or snippet kept; a 404 on an expired historyId → a resync without
// duplicates; 401 → one refresh and retry; 429 → Retry-After waited out; a missing scope → the
// integration in error naming it. Two processors tiers poll the same connections: each sync runs
// once. The sync route: admin only, 404 / 409 for what it cannot sync.
t.teardown(closeDb);
const google = await startFakeGoogle(t);
const env = google.env('gmail');
const api = await startApi(t, env);
const ws = await bootstrap();
const noScope = await bootstrap();
const tiers = {
  ...env,
  INTEGRATION_TENANTS: `${ws.tenant_id},${noScope.tenant_id}`,
  INTEGRATION_SYNC_INTERVAL_MS: '3600000',
  INTEGRATION_SYNC_POLL_MS: '100',
};
for (const _ of [1, 2]) {
  const tier = await startTier(t, 'processors', tiers);
  t.teardown(() => tier.stop('SIGTERM'));
}
const admin = client(api.url, ws.api_key);
const acme = (await admin.post('/v1/customers', { name: 'Acme', email_domain: 'acme.test' })).body;
const globex = (await admin.post('/v1/customers', { name: 'Globex', email_domain: 'globex.test' })).body;
// A customer on the mailbox's own domain: mail among colleagues never counts for it.
await admin.post('/v1/customers', { name: 'Ourselves', email_domain: 'vendor.test' });
await admin.post(`/v1/customers/${globex.id}/contacts`, { name: 'Dana', email: 'Dana@acme.test' });
const me = google.account;
const SECRET_SUBJECT = 'Confidential pricing for Acme';
const SECRET_SNIPPET = 'the discount we discussed is 40%';
const historyCalls = () => google.calls.filter((c) => c.path === '/gmail/v1/users/me/history');
const gets = () => google.calls.filter((c) => c.path.startsWith('/gmail/v1/users/me/messages/'));

t.test('the sync route: admin only; unknown, not syncing, not connected', async (t) => {
  const csm = client(api.url, await apiKey(api.url, ws, 'csm', ['customers:read']));
  isProblem(t, await csm.post('/v1/integrations/gmail/sync'), 403, 'insufficient_role');
  isProblem(t, await admin.post('/v1/integrations/myspace/sync'), 404, 'not_found');
  isProblem(t, await admin.post('/v1/integrations/slack/sync'), 409, 'integration_not_syncable');
  isProblem(t, await admin.post('/v1/integrations/gmail/sync'), 409, 'integration_not_connected');
  t.match(await entry(admin, 'gmail'), {
    last_synced_at: null,
    last_error: null,
    events_24h: { email_sent: 0, email_received: 0 },
  });
});

t.test(
  'first sync: 30 days back, page by page, contact then domain, own domain ignored, nothing private',
  async (t) => {
    google.pageSize = 2;
    t.teardown(() => {
      google.pageSize = 1000;
    });
    const dates = { m1: ago(2 * DAY_MS), m2: ago(DAY_MS), m4: ago(3 * DAY_MS) };
    google.gmail.add({ from: 'Bob <bob@acme.test>', to: [me], date: ago(40 * DAY_MS) });
    const m1 = google.gmail.add({
      from: '"Bob, Acme" <bob@acme.test>',
      to: [me],
      date: dates.m1,
      subject: SECRET_SUBJECT,
      snippet: SECRET_SNIPPET,
    });
    const m2 = google.gmail.add({
      from: `Me <${me}>`,
      to: ['dana@acme.test'],
      cc: ['x@globex.test', 'colleague@vendor.test'],
      date: dates.m2,
      labels: ['SENT'],
      subject: SECRET_SUBJECT,
    });
    google.gmail.add({ from: 'colleague@vendor.test', to: [me], date: ago(DAY_MS) });
    google.gmail.add({ from: 'stranger@nowhere.test', to: [me], date: dates.m4 });
    google.gmail.add({ from: me, to: ['bob@acme.test'], date: ago(DAY_MS), labels: ['DRAFT'] });

    await connect(admin, 'gmail');
    const e = await firstSync(admin, 'gmail');
    t.match(e, { status: 'connected', last_error: null, activities: 2, unmatched_activities: 1 });
    t.ok(Date.parse(e.last_synced_at ?? '') > Date.now() - 60_000, 'last_synced_at is recent');
    t.same(e.events_24h, { email_sent: 1, email_received: 1 });

    const rows = await produced(ws.tenant_id);
    t.same(
      rows.map((r) => [r.event_name, r.customer_id, r.activity_id, r.occurred_at.toISOString()]),
      [
        ['email_received', acme.id, m1, dates.m1.toISOString()],
        ['email_sent', globex.id, m2, dates.m2.toISOString()],
      ],
      'm1 → Acme by domain; m2 → Globex only (its contact wins, x@ by domain); the rest nothing',
    );
    t.same(rows[1].properties, {
      activity_id: m2,
      integration: 'gmail',
      participants: ['dana@acme.test', 'x@globex.test'],
    });
    const text = await storedText(ws.tenant_id);
    t.notOk(text.includes(SECRET_SUBJECT) || text.includes(SECRET_SNIPPET), 'no subject or snippet stored');
    t.notOk(text.includes('colleague@vendor.test'), 'no address of the own domain stored');

    const events = await stored(ws.tenant_id, 2);
    t.same(
      events.map((r) => [r.event_name, r.customer_id, r.ts]),
      [
        ['email_received', acme.id, dates.m1.getTime() / 1000],
        ['email_sent', globex.id, dates.m2.getTime() / 1000],
      ],
      'in csp.events, at the messages’ dates',
    );
    t.notOk(
      events.some((r) => r.properties.includes(SECRET_SUBJECT)),
      'no subject in csp.events',
    );

    const list = google.calls.filter((c) => c.path === '/gmail/v1/users/me/messages');
    t.ok(list.length >= 3, 'messages.list followed nextPageToken');
    const after = Number(/after:(\d+)/.exec(new URLSearchParams(list[0].query).get('q') ?? '')?.[1]);
    t.ok(Math.abs(after * 1000 - (Date.now() - 30 * DAY_MS)) < 5 * 60_000, 'the lookback is 30 days');
    for (const g of gets()) {
      const q = new URLSearchParams(g.query);
      t.equal(q.get('format'), 'metadata');
      t.same(q.getAll('metadataHeaders'), ['From', 'To', 'Cc', 'Date'], 'only the address and date headers');
      t.ok(q.get('fields') && !q.get('fields')?.includes('snippet'), 'a partial response without the snippet');
    }
  },
);

t.test('then the history from the stored historyId: only new messages, never twice', async (t) => {
  const seenHistory = google.gmail.historyId();
  const before = { history: historyCalls().length, gets: gets().length };
  const m7 = google.gmail.add({ from: 'carol@acme.test', to: [me], date: ago(60_000) });
  const m8 = google.gmail.add({ from: me, to: ['bob@acme.test'], date: ago(30_000), labels: ['SENT'] });
  const e = await syncNow(admin, 'gmail');
  t.match(e, { status: 'connected', last_error: null, events_24h: { email_sent: 2, email_received: 2 } });
  const h = historyCalls().slice(before.history);
  t.equal(h.length, 1, 'one history.list for one sync, though two processors poll');
  t.equal(new URLSearchParams(h[0].query).get('startHistoryId'), String(seenHistory));
  t.same(
    gets()
      .slice(before.gets)
      .map((g) => g.path.split('/').at(-1))
      .sort(),
    [m7, m8].sort(),
    'only the new messages fetched',
  );
  const again = await syncNow(admin, 'gmail');
  t.equal(again.status, 'connected');
  const rows = await produced(ws.tenant_id);
  t.equal(rows.length, 4);
  t.equal(new Set(rows.map((r) => `${r.activity_id}/${r.customer_id}`)).size, 4, 'no duplicates');
  await stored(ws.tenant_id, 4);
});

t.test('an expired historyId (404): a resync from getProfile, nothing twice', async (t) => {
  const m9 = google.gmail.add({ from: 'eve@globex.test', to: [me], date: ago(10_000) });
  google.gmail.expireHistory();
  const before = historyCalls().length;
  const e = await syncNow(admin, 'gmail');
  t.match(e, { status: 'connected', last_error: null });
  t.same(
    historyCalls()
      .slice(before)
      .map((c) => c.status),
    [404],
  );
  const rows = await produced(ws.tenant_id);
  t.equal(rows.length, 5, 'only the message the history missed is new');
  t.equal(rows.filter((r) => r.activity_id === m9).length, 1);
  t.equal(new Set(rows.map((r) => `${r.activity_id}/${r.customer_id}`)).size, 5, 'no duplicates');
  // The next sync reads the history again, from the historyId the resync took.
  const m10 = google.gmail.add({ from: 'bob@acme.test', to: [me], date: ago(5_000) });
  await syncNow(admin, 'gmail');
  t.equal(historyCalls().at(-1)?.status, 200);
  t.ok((await produced(ws.tenant_id)).some((r) => r.activity_id === m10));
  await stored(ws.tenant_id, 6);
});

t.test('401: one refresh and one retry; 429: Retry-After waited out', async (t) => {
  const refreshes = google.refreshes;
  google.invalidateAccessTokens();
  const before = historyCalls().length;
  const m11 = google.gmail.add({ from: 'bob@acme.test', to: [me], date: ago(5_000) });
  let e = await syncNow(admin, 'gmail');
  t.match(e, { status: 'connected' });
  t.equal(google.refreshes - refreshes, 1, 'one refresh');
  t.same(
    historyCalls()
      .slice(before)
      .map((c) => c.status),
    [401, 200],
  );
  t.ok((await produced(ws.tenant_id)).some((r) => r.activity_id === m11));

  google.fail('/gmail/v1/users/me/history', {
    status: 429,
    headers: { 'retry-after': '1' },
    body: {
      error: {
        code: 429,
        message: 'Too many concurrent requests for user.',
        errors: [{ message: 'Too many concurrent requests for user.', domain: 'global', reason: 'rateLimitExceeded' }],
        status: 'RESOURCE_EXHAUSTED',
      },
    },
  });
  const m12 = google.gmail.add({ from: 'bob@acme.test', to: [me], date: ago(5_000) });
  const mark = historyCalls().length;
  e = await syncNow(admin, 'gmail');
  t.match(e, { status: 'connected' });
  const h = historyCalls().slice(mark);
  t.same(
    h.map((c) => c.status),
    [429, 200],
  );
  t.ok(h[1].at - h[0].at >= 950, `waited Retry-After (${h[1].at - h[0].at} ms)`);
  t.ok((await produced(ws.tenant_id)).some((r) => r.activity_id === m12));
});

t.test('a scope not granted: the integration in error naming it', async (t) => {
  google.withhold.add(GMAIL_READ);
  t.teardown(() => google.withhold.delete(GMAIL_READ));
  const other = client(api.url, noScope.api_key);
  await connect(other, 'gmail');
  google.withhold.delete(GMAIL_READ);
  const e = await firstSync(other, 'gmail');
  t.match(e, {
    status: 'error',
    error: new RegExp(`scope ${GMAIL_READ.replace(/[./]/g, '\\$&')}`),
    last_synced_at: null,
  });
  t.match(e.last_error, { message: /insufficient|scope/ });
  t.ok(Date.parse(e.last_error?.at ?? '') > Date.now() - 60_000);
  isProblem(t, await other.post('/v1/integrations/gmail/sync'), 409, 'integration_not_connected');
  const [row] = await db()<Array<{ n: number }>>`
    SELECT count(*)::int AS n FROM event_outbox WHERE tenant_id = ${noScope.tenant_id}`;
  t.equal(row.n, 0);
});
