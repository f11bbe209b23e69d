import t from '#tap';
import { windowPeriod } from '../../lib/metrics/window.js';
import { ch, closeDb, waitFor } from '../helpers/stack.js';
import { client, isProblem, sharedApi } from '../core-api/_helpers.js';
import { customerIds, send, USAGE, workspace } from '../ingest/support.js';
import { ingestTier, processorsTier } from '../health/support.js';

// Exact values of POST /v1/metrics/test over events sent through ingestion surface A and stored by
// the processors: every calculation, every filter op, both window kinds, both grains, compared
// with values computed by hand from the events below.
t.teardown(closeDb);
const api = await sharedApi(t);
const ingest = await ingestTier(t);
await processorsTier(t, []);
const ws = await workspace(3);
const admin = client(api.url, ws.api_key);
const ids = await customerIds(ws.tenant_id);
const A = ids.get('cust-000001')!;
const B = ids.get('cust-000002')!;
const C = ids.get('cust-000003')!;

const HOUR = 3600_000;
const DAY = 24 * HOUR;
const started = Date.now();
const at = (ago: number) => new Date(started - ago).toISOString();
const INJECTION = "') OR 1=1 --";

interface Ev {
  customer: string;
  ago: number;
  props: Record<string, unknown>;
  user?: string;
}
// order_placed events (surface A takes events up to 30 days old): `amount` numeric except a4 ("n/a") and b2
// (absent).
const orders: Record<string, Ev> = {
  a1: { customer: 'cust-000001', ago: 5 * 60_000, props: { amount: 10, plan: 'pro' }, user: 'u1' },
  a2: { customer: 'cust-000001', ago: DAY + HOUR, props: { amount: 20.5, plan: 'basic' }, user: 'u2' },
  a3: { customer: 'cust-000001', ago: 3 * DAY, props: { amount: '7', plan: 'pro' }, user: 'u1' },
  a4: { customer: 'cust-000001', ago: 10 * DAY, props: { amount: 'n/a', plan: 'pro' }, user: 'u3' },
  a5: { customer: 'cust-000001', ago: 20 * DAY, props: { amount: 100, plan: 'enterprise' }, user: 'u1' },
  a6: { customer: 'cust-000001', ago: 29 * DAY, props: { amount: 1000, plan: 'pro' } },
  b1: { customer: 'cust-000002', ago: 2 * 60_000, props: { amount: 5, plan: 'pro', note: INJECTION } },
  b2: { customer: 'cust-000002', ago: 5 * DAY, props: { plan: 'back\\slash' }, user: 'u9' },
};

t.before(async () => {
  const events = [
    ...Object.values(orders).map((e) => ({
      event_name: 'order_placed',
      external_customer_id: e.customer,
      timestamp: at(e.ago),
      properties: e.props,
      ...(e.user ? { user_id: e.user } : {}),
    })),
    // C has other events only: it is never sampled for order_placed.
    { event_name: 'login', external_customer_id: 'cust-000003', timestamp: at(HOUR) },
  ];
  const res = await send(ingest.url, USAGE, { events }, { key: ws.ingestion_key });
  if (res.status !== 202 || res.body.rejected !== 0) throw new Error(`surface A answered ${res.status} ${res.text}`);
  await waitFor(
    'events stored',
    async () =>
      Number(
        (await ch<{ n: string }>(`SELECT count() AS n FROM csp.events WHERE tenant_id = toUUID('${ws.tenant_id}')`))[0]
          ?.n,
      ) === events.length,
    60_000,
    200,
  );
  await waitFor(
    'names in the catalog',
    async () => (await admin.get('/v1/event-catalog')).body?.data?.length === 2,
    20_000,
    200,
  );
});

const def = (d: Record<string, unknown>) => ({
  source_event: 'order_placed',
  calculation: 'count',
  window: { type: 'rolling', days: 14 },
  grain: 'customer',
  ...d,
});

async function values(d: Record<string, unknown>, customers = [A, B, C]): Promise<Array<number | null>> {
  const r = await admin.post('/v1/metrics/test', {
    definition: def(d),
    ...(customers.length ? { customer_ids: customers } : {}),
  });
  if (r.status !== 200) throw new Error(`${r.status} ${r.text}`);
  return r.body.results.map((x: { value: number | null }) => x.value);
}

t.test('the catalog lists what was ingested, with its property keys', async (t) => {
  const r = await admin.get('/v1/event-catalog');
  const order = r.body.data.find((e: any) => e.event_name === 'order_placed');
  t.same([...order.property_keys].sort(), ['amount', 'note', 'plan']);
  t.equal(order.property_keys[0], 'plan', 'the most frequent first (8 of 8 events)');
  t.ok(Date.parse(order.last_seen_at) >= Date.parse(at(2 * 60_000)) - 1000, 'last_seen_at is the latest event');
});

t.test('every calculation over a rolling 7-day window, per customer', async (t) => {
  // 7 days: A has a1, a2, a3; B has b1, b2; C none.
  const w = { window: { type: 'rolling', days: 7 } };
  t.same(await values({ ...w }), [3, 2, 0], 'count');
  t.same(await values({ ...w, calculation: 'sum', target_property: 'amount' }), [37.5, 5, 0], 'sum');
  t.same(await values({ ...w, calculation: 'avg', target_property: 'amount' }), [12.5, 5, null], 'avg');
  t.same(await values({ ...w, calculation: 'max', target_property: 'amount' }), [20.5, 5, null], 'max');
  t.same(await values({ ...w, calculation: 'distinct_count', target_property: 'plan' }), [2, 2, 0], 'distinct_count');
  t.same(await values({ ...w, calculation: 'last_value', target_property: 'amount' }), [10, 5, null], 'last_value');
  const secs = (ago: number) => Math.floor(Date.parse(at(ago)) / 1000);
  t.same(
    await values({ ...w, calculation: 'last_value' }),
    [secs(orders.a1.ago), secs(orders.b1.ago), null],
    'last_value without target: unix seconds of the latest event',
  );
  t.same(await values({ ...w, calculation: 'exists' }), [1, 1, 0], 'exists');
});

t.test('longer rolling windows take in older events', async (t) => {
  t.same(await values({ window: { type: 'rolling', days: 14 } }), [4, 2, 0]);
  t.same(
    await values({ window: { type: 'rolling', days: 21 }, calculation: 'sum', target_property: 'amount' }),
    [137.5, 5, 0],
  );
  t.same(await values({ window: { type: 'rolling', days: 30 }, calculation: 'max', target_property: 'amount' }), [
    1000,
    5,
    null,
  ]);
  t.same(await values({ window: { type: 'rolling', days: 1 } }), [1, 1, 0], 'a2 is 25 hours old');
});

t.test('every filter op, on properties and event fields (rolling 14 days: a1–a4, b1, b2)', async (t) => {
  const f = (field: string, op: string, value: unknown) => values({ filter: [{ field, op, value }] });
  t.same(await f('properties.plan', 'eq', 'pro'), [3, 1, 0], 'eq text');
  t.same(await f('properties.plan', 'neq', 'pro'), [1, 1, 0], 'neq text');
  t.same(await f('properties.amount', 'eq', 10), [1, 0, 0], 'eq number');
  t.same(await f('properties.amount', 'neq', 10), [3, 2, 0], 'neq number: non-numeric and absent count');
  t.same(await f('properties.amount', 'gt', 7), [2, 0, 0], 'gt');
  t.same(await f('properties.amount', 'gte', 7), [3, 0, 0], 'gte (the string "7" is a number)');
  t.same(await f('properties.amount', 'lt', 10), [1, 1, 0], 'lt');
  t.same(await f('properties.amount', 'lte', 10), [2, 1, 0], 'lte');
  t.same(await f('properties.plan', 'contains', 'as'), [1, 1, 0], 'contains: basic, back\\slash');
  t.same(await f('properties.plan', 'in', ['basic', 'enterprise', 'back\\slash']), [1, 1, 0], 'in');
  t.same(await f('user_id', 'eq', 'u1'), [2, 0, 0], 'event field user_id');
  t.same(await f('external_source', 'neq', 'hubspot'), [4, 2, 0], 'event field external_source');
  t.same(await f('properties.missing', 'eq', 'x'), [0, 0, 0], 'an absent property matches no eq');
  t.same(await f('properties.missing', 'neq', 'x'), [4, 2, 0], '… but every neq');
  t.same(await f('properties.note', 'eq', INJECTION), [0, 1, 0], 'an injection attempt is a plain value');
  t.same(await f('properties.plan', 'eq', "pro' OR '1'='1"), [0, 0, 0]);
  const both = await values({
    filter: [
      { field: 'properties.plan', op: 'eq', value: 'pro' },
      { field: 'properties.amount', op: 'gte', value: 7 },
    ],
    calculation: 'sum',
    target_property: 'amount',
  });
  t.same(both, [17, 0, 0], 'filters combine with AND: a1 + a3; b1 is pro but below 7');
});

t.test('calendar windows: the current UTC day, ISO week, month and quarter so far', async (t) => {
  const now = new Date();
  const expect = (unit: 'day' | 'week' | 'month' | 'quarter', customer: string, pick = (_e: Ev) => true) => {
    const from = windowPeriod({ type: 'calendar', unit }, now).from.getTime();
    return Object.values(orders).filter((e) => e.customer === customer && started - e.ago >= from && pick(e));
  };
  for (const unit of ['day', 'week', 'month', 'quarter'] as const) {
    const w = { window: { type: 'calendar', unit } };
    const a = expect(unit, 'cust-000001');
    const b = expect(unit, 'cust-000002');
    t.same(await values(w), [a.length, b.length, 0], `count this ${unit} (rollup)`);
    t.same(await values({ ...w, calculation: 'exists' }), [a.length ? 1 : 0, b.length ? 1 : 0, 0], `exists (rollup)`);
    const sum = (es: Ev[]) =>
      es.reduce((s, e) => s + (Number.isFinite(Number(e.props.amount)) ? Number(e.props.amount) : 0), 0);
    t.same(
      await values({ ...w, calculation: 'sum', target_property: 'amount' }),
      [sum(a), sum(b), 0],
      `sum this ${unit}`,
    );
    const pro = (e: Ev) => e.props.plan === 'pro';
    t.same(
      await values({ ...w, filter: [{ field: 'properties.plan', op: 'eq', value: 'pro' }] }),
      [expect(unit, 'cust-000001', pro).length, expect(unit, 'cust-000002', pro).length, 0],
      `count with a filter this ${unit}`,
    );
  }
  const r = await admin.post('/v1/metrics/test', {
    definition: def({ window: { type: 'calendar', unit: 'month' } }),
    customer_ids: [A],
  });
  const p = windowPeriod({ type: 'calendar', unit: 'month' }, new Date());
  t.equal(r.body.results[0].period.from, p.from.toISOString(), 'period.from is the start of the month');
  t.ok(Math.abs(Date.parse(r.body.results[0].period.to) - Date.now()) < 60_000, 'period.to is now');
});

t.test('portfolio grain: one value for the workspace, customer_id null', async (t) => {
  const r = await admin.post('/v1/metrics/test', {
    definition: def({
      grain: 'portfolio',
      window: { type: 'rolling', days: 7 },
      calculation: 'sum',
      target_property: 'amount',
    }),
  });
  t.equal(r.status, 200, r.text);
  t.equal(r.body.results.length, 1);
  t.match(r.body.results[0], { customer_id: null, value: 42.5 });
  t.equal(r.body.sampled, false);
  t.same(await values({ grain: 'portfolio', window: { type: 'rolling', days: 7 } }, []), [5], 'count of all customers');
  t.same(
    await values({
      grain: 'portfolio',
      calculation: 'distinct_count',
      target_property: 'plan',
      window: { type: 'rolling', days: 365 },
    }),
    [4],
    'pro, basic, enterprise, back\\slash',
  );
});

t.test('sampling: customers with events of the source event, fewer when fewer exist', async (t) => {
  const r = await admin.post('/v1/metrics/test', { definition: def({}) });
  t.equal(r.status, 200, r.text);
  t.equal(r.body.sampled, true);
  t.same(r.body.results.map((x: any) => x.customer_id).sort(), [A, B].sort(), 'C has no order_placed');
  t.ok(r.body.elapsed_ms >= 0);
  const login = await admin.post('/v1/metrics/test', { definition: def({ source_event: 'login' }), sample_size: 10 });
  t.same(
    login.body.results.map((x: any) => [x.customer_id, x.value]),
    [[C, 1]],
  );
});

t.test('the test query validates as create does', async (t) => {
  const bad = await admin.post('/v1/metrics/test', { definition: def({ calculation: 'sum' }) });
  isProblem(t, bad, 400, 'validation_failed');
  t.same(
    bad.body.errors.map((e: any) => e.field),
    ['definition.target_property'],
  );
  const unknown = await admin.post('/v1/metrics/test', { definition: def({ source_event: 'nope' }) });
  isProblem(t, unknown, 422, 'unknown_event');
  t.same(
    unknown.body.errors.map((e: any) => e.field),
    ['definition.source_event'],
  );
  const op = await admin.post('/v1/metrics/test', {
    definition: def({ filter: [{ field: 'user_id', op: 'like', value: 1 }] }),
  });
  isProblem(t, op, 400, 'validation_failed');
  t.same(
    op.body.errors.map((e: any) => e.field),
    ['definition.filter[0].op'],
  );
  const many = Array.from({ length: 11 }, (_, i) => `0192f0c4-8a55-7b3e-9d1c-${String(i).padStart(12, '0')}`);
  isProblem(
    t,
    await admin.post('/v1/metrics/test', { definition: def({}), customer_ids: many }),
    400,
    'validation_failed',
  );
  const foreign = await admin.post('/v1/metrics/test', { definition: def({}), customer_ids: [many[0]] });
  isProblem(t, foreign, 400, 'validation_failed');
  t.same(
    foreign.body.errors.map((e: any) => [e.field, e.code]),
    [['customer_ids[0]', 'not_found']],
  );
  isProblem(t, await admin.post('/v1/metrics/test', { definition: def({}), sample_size: 4 }), 400, 'validation_failed');
});

t.test('usage widget values over the same events', async (t) => {
  const w = async (aggregation: string, period: string, event_name?: string) => {
    const r = await admin.post('/v1/usage-widgets', {
      name: `${aggregation} ${period}`,
      aggregation,
      period,
      event_name,
    });
    if (r.status !== 201) throw new Error(r.text);
    const v = await admin.get(`/v1/usage-widgets/${r.body.id}/value?customer_id=${A}`);
    await admin.del(`/v1/usage-widgets/${r.body.id}`);
    return v.body;
  };
  const today = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate());
  const inDays = (n: number, es = Object.values(orders).filter((e) => e.customer === 'cust-000001')) =>
    es.filter((e) => started - e.ago >= today - (n - 1) * DAY);
  const a7 = inDays(7);
  t.equal((await w('count', '7d', 'order_placed')).value, a7.length, 'count');
  t.equal(
    (await w('unique_users', '30d', 'order_placed')).value,
    new Set(inDays(30).flatMap((e) => (e.user ? [e.user] : []))).size,
    'users',
  );
  const days30 = new Set(inDays(30).map((e) => new Date(started - e.ago).toISOString().slice(0, 10))).size;
  t.equal((await w('frequency', '30d')).value, Math.round((days30 / 30) * 10_000) / 10_000, 'frequency');
  const cur = inDays(30).length;
  const prev = inDays(60).length - cur;
  const trend = await w('trend_pct', '30d', 'order_placed');
  t.equal(trend.value, prev === 0 ? null : Math.round(((cur - prev) / prev) * 10_000) / 100, 'trend_pct');
  t.equal(trend.previous.count, prev);
});
