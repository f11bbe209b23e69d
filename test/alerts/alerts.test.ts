import t from '#tap';
import { client, isProblem, randomUuid, sharedApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb, db, waitFor } from '../helpers/stack.js';
import { startReceiver } from '../helpers/webhook-receiver.js';
import { apiKey, type StoredEvent, storeEvents } from '../metrics/support.js';
import { processorsTier } from '../playbooks/support.js';

// Alerts over HTTP with hand-built data: a usage drop raised once for exactly the customer below
// half its baseline (not for a steady one, not below the baseline floor), an alert.created webhook,
// playbooks seeing open_alerts, resolution when usage recovers (raised on the 7 complete days,
// resolved as soon as the last 7 × 24 hours, today included, are no longer below); an API key usage spike raised
// once above the floor and not below it; the admin-only list and its moves; another workspace.
t.teardown(closeDb);
const api = await sharedApi(t);
const rx = await startReceiver(t);
const ws = await bootstrap();
const admin = client(api.url, ws.api_key);
const DAY = 86_400_000;

const customer = async (name: string) => (await admin.post('/v1/customers', { name })).body.id as string;
const dropping = await customer('Dropping');
const steady = await customer('Steady');
const small = await customer('Small');
/** `perDay` events on each day `from`…`to` days ago. */
const days = (c: string, perDay: number, from: number, to: number): StoredEvent[] =>
  Array.from({ length: to - from + 1 }, (_, i) =>
    Array.from({ length: perDay }, () => ({ customer: c, name: 'login', ago: (from + i) * DAY })),
  ).flat();
await storeEvents(ws.tenant_id, [
  ...days(dropping, 10, 8, 37), // 70 a week
  ...days(dropping, 1, 1, 5), // 5 in the last 7 days: below half
  ...days(steady, 10, 1, 37),
  ...days(small, 2, 8, 37), // 14 a week: under the 20-a-week floor, however it drops
]);

/** Resolves once `n` more health runs of the workspace have finished (alerts are evaluated after each). */
async function healthRuns(tenantId: string, n: number): Promise<void> {
  const finished = async () =>
    (
      await db()<Array<{ f: Date | null }>>`
        SELECT last_finished_at AS f FROM job_leases WHERE job = 'health' AND tenant_id = ${tenantId}`
    )[0]?.f?.getTime() ?? 0;
  const seen = new Set([await finished()]);
  await waitFor(`${n} more health runs`, async () => seen.add(await finished()).size > n, 30_000, 50);
}

const alerts = async (q = '') => (await admin.get(`/v1/alerts${q}`)).body.data as Array<Record<string, any>>;

t.test('usage_drop: raised once for the customer below half its baseline, resolved on recovery', async (t) => {
  const hook = await admin.post('/v1/webhook-subscriptions', { url: rx.url('/alerts'), events: ['alert.created'] });
  t.equal(hook.status, 201);
  const env = { HEALTH_TENANTS: ws.tenant_id, HEALTH_RECALC_INTERVAL_MS: '1000', WEBHOOK_TENANTS: ws.tenant_id };
  await processorsTier(t, [], env);
  const [alert] = await waitFor(
    'a usage_drop alert',
    async () => {
      const a = await alerts('?type=usage_drop');
      return a.length ? a : undefined;
    },
    60_000,
  );
  t.match(alert, {
    type: 'usage_drop',
    status: 'open',
    severity: 'high', // 5 is under a tenth of the baseline
    customer_id: dropping,
    api_key_id: null,
    details: { events_last_7_days: 5, baseline_per_week: 70 },
  });
  t.match(alert.summary, /Dropping fell to 5 events in the last 7 days, against 70 a week/);
  const [delivered] = await waitFor('alert.created delivered', () => rx.at('/alerts').length > 0 && rx.at('/alerts'));
  t.same(delivered.json.data, alert, 'the webhook carries the alert as GET shows it');

  const pb = await admin.post('/v1/playbooks', {
    name: 'Alerted',
    trigger: { type: 'condition', expression: 'open_alerts > 0' },
    actions: [{ type: 'create_task', title: 'Look', assignee: 'owner' }],
  });
  const dry = await admin.post(`/v1/playbooks/${pb.body.id}/run`, { dry_run: true });
  t.same(dry.body.matched, [dropping], 'open_alerts in a playbook condition');

  t.equal((await admin.patch(`/v1/alerts/${alert.id}`, { status: 'acknowledged' })).body.status, 'acknowledged');
  // Further health runs: still one alert (acknowledged counts as open).
  await healthRuns(ws.tenant_id, 2);
  t.equal((await alerts('?type=usage_drop')).length, 1, 'never a second alert for the same customer');

  await storeEvents(ws.tenant_id, days(dropping, 10, 1, 7));
  const resolved = await waitFor(
    'resolved after the recovery',
    async () => {
      const [a] = await alerts('?type=usage_drop');
      return a.status === 'resolved' ? a : undefined;
    },
    60_000,
  );
  t.match(resolved.details, { resolved_by: 'recovered' });
  t.equal((await alerts('?status=open,acknowledged&type=usage_drop')).length, 0);
  isProblem(t, await admin.patch(`/v1/alerts/${alert.id}`, { status: 'acknowledged' }), 409, 'invalid_state');
  await admin.del(`/v1/playbooks/${pb.body.id}`);
});

t.test('usage_drop: raised on complete days, resolved on the last 7 × 24 hours', async (t) => {
  const w = await bootstrap();
  const c = client(api.url, w.api_key);
  const make = async (name: string) => (await c.post('/v1/customers', { name })).body.id as string;
  const [back, still, todayOnly, todayAbove, early] = await Promise.all(
    ['Back today', 'Still low', 'Today only', 'Today above', 'Early day 7'].map(make),
  );
  // Midnight (UTC, the stack's ClickHouse time zone) 7 days ago: in the complete days, out of the
  // last 7 × 24 hours.
  const sinceMidnight = Date.now() % DAY;
  const now = (customer: string, n: number): StoredEvent[] =>
    Array.from({ length: n }, () => ({ customer, name: 'login', ago: 1000 }));
  await storeEvents(w.tenant_id, [
    // Each 10 a day in days 8–37 ago: 70 a week, below half of it under 35.
    ...[back, still, todayOnly, todayAbove, early].flatMap((id) => days(id, 10, 8, 37)),
    ...now(todayOnly, 30), // 30 today, 0 on complete days: raised
    ...now(todayAbove, 40), // 40 today, 0 on complete days: the resolve rule would clear it at once
    ...Array.from({ length: 40 }, () => ({ customer: early, name: 'login', ago: 7 * DAY + sinceMidnight })),
  ]);
  await processorsTier(t, [], { HEALTH_TENANTS: w.tenant_id, HEALTH_RECALC_INTERVAL_MS: '1000' });
  const byCustomer = async () =>
    new Map(((await c.get('/v1/alerts?type=usage_drop')).body.data as Array<any>).map((a) => [a.customer_id, a]));
  const raised = await waitFor(
    'usage_drop alerts of the three customers below on complete days',
    async () => {
      const a = await byCustomer();
      return a.has(back) && a.has(still) && a.has(todayOnly) ? a : undefined;
    },
    60_000,
  );
  t.match(raised.get(todayOnly), { status: 'open', details: { events_last_7_days: 0, baseline_per_week: 70 } });
  t.notOk(raised.has(early), 'not raised: 40 on complete days (early on day 7), though none in the last 7 × 24 hours');
  t.notOk(raised.has(todayAbove), 'not raised: below on complete days, but 40 in the last 7 × 24 hours');

  await storeEvents(w.tenant_id, [...now(back, 40), ...now(still, 30)]);
  const resolved = await waitFor(
    'Back today resolved by its events of today',
    async () => {
      const a = (await byCustomer()).get(back);
      return a.status === 'resolved' ? a : undefined;
    },
    20_000,
  );
  t.match(resolved.details, { resolved_by: 'recovered' });
  await healthRuns(w.tenant_id, 2);
  const after = await byCustomer();
  t.equal(after.get(still).status, 'open', 'still below over the last 7 × 24 hours (30 < 35): open');
  t.equal(after.get(todayOnly).status, 'open', 'Today only (30 < 35): open');
  t.equal(after.size, 3, 'no other alert');
});

t.test('api_key_usage_spike: above the floor and the trailing average, once per key', async (t) => {
  const w = await bootstrap();
  const c = client(api.url, w.api_key);
  const busyKey = await apiKey(api.url, w, 'viewer', ['customers:read']);
  const quietKey = await apiKey(api.url, w, 'viewer', ['customers:read']);
  await processorsTier(t, [], { ALERTS_KEY_SPIKE_FLOOR: '25', ALERTS_KEY_INTERVAL_MS: '1000' });
  const busy = client(api.url, busyKey);
  for (let i = 0; i < 40; i++) await busy.get('/v1/customers?limit=1');
  for (let i = 0; i < 10; i++) await client(api.url, quietKey).get('/v1/customers?limit=1');
  // Waited for in the store: polling the API would be usage of the admin key, a spike of its own on a slow machine.
  const spikes = (tenant: string) =>
    db()`SELECT 1 FROM alerts WHERE tenant_id = ${tenant} AND type = 'api_key_usage_spike'`.then((r) => r.length);
  await waitFor('a key spike alert', async () => (await spikes(w.tenant_id)) > 0);
  const [alert] = (await c.get('/v1/alerts?type=api_key_usage_spike')).body.data;
  const [{ id: busyId }] = await db()<Array<{ id: string }>>`
    SELECT id::text FROM api_keys WHERE tenant_id = ${w.tenant_id} AND role = 'viewer' ORDER BY created_at LIMIT 1`;
  t.match(alert, {
    type: 'api_key_usage_spike',
    status: 'open',
    severity: 'high',
    api_key_id: busyId,
    customer_id: null,
  });
  t.ok(alert.details.requests_last_5_min > 25, `above the floor (${alert.details.requests_last_5_min})`);
  for (let i = 0; i < 10; i++) await busy.get('/v1/customers?limit=1');
  // A spike in another workspace, raised by a check that saw every request above.
  const probe = await bootstrap();
  const probeKey = await apiKey(api.url, probe, 'viewer', ['customers:read']);
  for (let i = 0; i < 30; i++) await client(api.url, probeKey).get('/v1/customers?limit=1');
  await waitFor('a later check', async () => (await spikes(probe.tenant_id)) > 0);
  const all = (await c.get('/v1/alerts')).body.data;
  t.equal(all.length, 1, 'one alert for the busy key, none for the quiet one (10 requests, under the floor)');
  t.equal((await c.patch(`/v1/alerts/${alert.id}`, { status: 'resolved' })).body.status, 'resolved');
});

t.test('the list: admin only, filters, validation, another workspace', async (t) => {
  const csm = client(api.url, await apiKey(api.url, ws, 'csm', ['analytics:read']));
  isProblem(t, await csm.get('/v1/alerts'), 403, 'insufficient_role');
  const noScope = client(api.url, await apiKey(api.url, ws, 'admin', ['customers:read']));
  isProblem(t, await noScope.get('/v1/alerts'), 403, 'insufficient_scope');
  isProblem(t, await admin.get('/v1/alerts?type=fire'), 400, 'validation_failed');
  isProblem(t, await admin.get('/v1/alerts?status=open,closed'), 400, 'validation_failed');
  t.same(await alerts(`?customer_id=${steady}`), [], 'no alert for the steady customer');
  t.same(await alerts(`?customer_id=${small}`), [], 'none under the baseline floor');
  const [mine] = await alerts();
  const them = client(api.url, (await bootstrap()).api_key);
  isProblem(t, await them.patch(`/v1/alerts/${mine.id}`, { status: 'resolved' }), 404, 'not_found');
  t.same((await them.get('/v1/alerts')).body.data, []);
  isProblem(t, await admin.patch(`/v1/alerts/${randomUuid()}`, { status: 'resolved' }), 404, 'not_found');
  isProblem(t, await admin.patch(`/v1/alerts/${mine.id}`, { status: 'open' }), 400, 'validation_failed');
});
