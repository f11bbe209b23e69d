import t from '#tap';
import { bootstrap, closeDb, db, nextSecond, seed, waitFor } from '../helpers/stack.js';
import { customerIds } from '../ingest/support.js';
import {
  daysAgo,
  ingestTier,
  natsClient,
  processorsTier,
  scoreNow,
  sendBilling,
  sendUsage,
  setModel,
  storedChanges,
  type UsageEvent,
} from './support.js';

// Each dimension's anchor points, from events sent through surface A (up to 28 days back) to the
// breakdown the scorer stores, recalculated on demand as the core API asks for it.
t.teardown(closeDb);
const ws = await bootstrap();
await seed(ws.tenant_id, 12);
const ids = await customerIds(ws.tenant_id);
const id = (n: number) => ids.get(`cust-${String(n).padStart(6, '0')}`)!;
const ingest = await ingestTier(t);
// On demand only; relays this workspace's health_changed events.
await processorsTier(t, [], { OUTBOX_TENANTS: ws.tenant_id });
const nc = await natsClient(t);

const ev = (n: number, event_name: string, daysBack: number, user_id?: string): UsageEvent => ({
  event_name,
  external_customer_id: `cust-${String(n).padStart(6, '0')}`,
  timestamp: daysAgo(daysBack),
  ...(user_id ? { user_id } : {}),
});
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

// Customer 1: 20 active days of the last 28 (5 a week), 10 names, 2 users on 20 days each.
// Customer 2: 10 active days (2.5 a week), 5 names, 1 of 5 users a day (DAU/MAU 0.2).
// Customer 3: nothing. Customer 4: 3 upgraded, 1 support_escalated. Customers 5–7: billing only.
// Customer 8: daily usage by several users and a payment_succeeded. Customer 9: one event 25 days
// ago and two payment_failed.
await sendUsage(ingest, ws, [
  ...range(20).flatMap((d) => [ev(1, `feature_${d % 10}`, d, 'u1'), ev(1, 'login', d, 'u2')]),
  ...range(10).map((d) => ev(2, `feature_${d % 5}`, d * 2, `v${d % 5}`)),
  ...range(3).map(() => ev(4, 'upgraded', 1)),
  ev(4, 'support_escalated', 2),
  ...range(26).flatMap((d) => ['u1', 'u2', 'u3'].map((u, k) => ev(8, `feature_${(d + k) % 10}`, d, u))),
  ev(9, 'login', 25, 'u1'),
]);
await sendBilling(ingest, ws, [
  { event_type: 'payment_failed', customer_id: id(5) },
  { event_type: 'payment_failed', customer_id: id(5) },
  { event_type: 'payment_failed', customer_id: id(6) },
  { event_type: 'payment_failed', customer_id: id(6) },
  { event_type: 'payment_failed', customer_id: id(7), status: 'resolved' },
  { event_type: 'payment_succeeded', customer_id: id(8) },
  { event_type: 'payment_failed', customer_id: id(9) },
  { event_type: 'payment_failed', customer_id: id(9) },
]);

t.test('usage frequency: 5 days a week is 100, fewer scale down, none is 0', async (t) => {
  const a = await scoreNow(nc, ws.tenant_id, id(1));
  const b = await scoreNow(nc, ws.tenant_id, id(2));
  const none = await scoreNow(nc, ws.tenant_id, id(3));
  t.same([a.dims.usage_frequency.value, a.dims.usage_frequency.score], [5, 100]);
  t.same([b.dims.usage_frequency.value, b.dims.usage_frequency.score], [2.5, 50]);
  t.same([none.dims.usage_frequency.value, none.dims.usage_frequency.score], [0, 0]);
  t.equal(a.dims.usage_frequency.unit, 'days_per_week');
});

t.test('breadth: 10 distinct event names is 100, none is 0', async (t) => {
  t.same((await scoreNow(nc, ws.tenant_id, id(1))).dims.breadth.value, 11, '10 features and login');
  t.equal((await scoreNow(nc, ws.tenant_id, id(1))).dims.breadth.score, 100);
  t.same((await scoreNow(nc, ws.tenant_id, id(2))).dims.breadth.score, 50, '5 names');
  t.same((await scoreNow(nc, ws.tenant_id, id(3))).dims.breadth.score, 0);
});

t.test('active users: DAU/MAU of 0.4 or more is 100, no users is 0', async (t) => {
  const a = await scoreNow(nc, ws.tenant_id, id(1));
  // 2 users on 20 days: DAU 40/30, MAU 2 → 0.6667
  t.same([a.dims.active_users.value, a.dims.active_users.score], [0.6667, 100]);
  const b = await scoreNow(nc, ws.tenant_id, id(2));
  // one of 5 users on each of 10 days: DAU 10/30, MAU 5 → 0.0667 → 17
  t.same([b.dims.active_users.value, b.dims.active_users.score], [0.0667, 17]);
  const none = await scoreNow(nc, ws.tenant_id, id(3));
  t.same([none.dims.active_users.value, none.dims.active_users.score], [0, 0]);
});

t.test('key events stay inactive until the model flags one', async (t) => {
  const before = await scoreNow(nc, ws.tenant_id, id(4));
  t.same(before.dims.key_events, {
    key: 'key_events',
    active: false,
    weight: 0.15,
    score: null,
    value: null,
    unit: 'net_key_events',
  });
  await setModel(ws.tenant_id, { key_events: { positive: ['upgraded'], negative: ['support_escalated'] } });
  t.teardown(() => db()`DELETE FROM health_models WHERE tenant_id = ${ws.tenant_id}`);
  const after = await scoreNow(nc, ws.tenant_id, id(4));
  t.same([after.dims.key_events.active, after.dims.key_events.value, after.dims.key_events.score], [true, 2, 70]);
  const quiet = await scoreNow(nc, ws.tenant_id, id(3));
  t.same([quiet.dims.key_events.value, quiet.dims.key_events.score], [0, 50], 'no key event at all is neutral 50');
  await db()`DELETE FROM health_models WHERE tenant_id = ${ws.tenant_id}`;
});

t.test('payment health: no billing is 100, two unresolved failures ≤ 50, a later success restores', async (t) => {
  const none = await scoreNow(nc, ws.tenant_id, id(1));
  t.same([none.dims.payment_health.value, none.dims.payment_health.score], [0, 100]);
  const failed = await scoreNow(nc, ws.tenant_id, id(5));
  t.equal(failed.dims.payment_health.value, 2);
  t.ok(failed.dims.payment_health.score! <= 50, `two payment_failed: ${failed.dims.payment_health.score}`);
  const resolved = await scoreNow(nc, ws.tenant_id, id(7));
  t.same([resolved.dims.payment_health.value, resolved.dims.payment_health.score], [0, 100], 'resolved costs nothing');
  // A success in a later second than the failures.
  await nextSecond();
  await sendBilling(ingest, ws, [{ event_type: 'payment_succeeded', customer_id: id(6) }]);
  const restored = await scoreNow(nc, ws.tenant_id, id(6));
  t.same([restored.dims.payment_health.value, restored.dims.payment_health.score], [0, 100]);
});

t.test('daily use by several users with a payment is healthy; one old event and two failures is at risk', async (t) => {
  const good = await scoreNow(nc, ws.tenant_id, id(8));
  t.equal(good.status, 'healthy', `score ${good.score}: ${JSON.stringify(good.dimensions)}`);
  t.ok(good.score >= 70);
  const bad = await scoreNow(nc, ws.tenant_id, id(9));
  t.equal(bad.status, 'at_risk', `score ${bad.score}: ${JSON.stringify(bad.dimensions)}`);
  // usage 0.25 d/w → 5, breadth 1 → 10, DAU/MAU 1/30 → 8, payment 50: (1.25 + 1.5 + 1.6 + 12.5) / 0.85
  t.equal(bad.score, 20);
});

t.test('a model with only payment_health active scores exactly that dimension', async (t) => {
  await setModel(ws.tenant_id, { active_dimensions: ['payment_health'] });
  t.teardown(() => db()`DELETE FROM health_models WHERE tenant_id = ${ws.tenant_id}`);
  const bad = await scoreNow(nc, ws.tenant_id, id(9));
  t.equal(bad.score, bad.dims.payment_health.score);
  t.equal(bad.score, 50);
  t.equal(bad.status, 'neutral');
  t.same(
    bad.dimensions.map((d) => [d.key, d.active, d.score === null]),
    [
      ['usage_frequency', false, true],
      ['breadth', false, true],
      ['active_users', false, true],
      ['key_events', false, true],
      ['payment_health', true, false],
    ],
    'the others are reported inactive, without a score',
  );
});

t.test('a generated health_changed event does not count as the customer’s own usage', async (t) => {
  // The payment-only model above moved customer 9 from at_risk to neutral: a health_changed event.
  const [change] = await waitFor(
    'the health_changed event of customer 9 in csp.events',
    async () => {
      const rows = await storedChanges(ws.tenant_id, id(9));
      return rows.length ? rows : undefined;
    },
    30_000,
    200,
  );
  t.equal(change.surface, 'system');
  const back = await scoreNow(nc, ws.tenant_id, id(9));
  t.same([back.dims.breadth.value, back.dims.usage_frequency.value], [1, 0.25], 'login only, one day');
  t.equal(back.status, 'at_risk');
});
