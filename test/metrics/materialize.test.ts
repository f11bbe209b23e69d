import t from '#tap';
import { connect } from 'nats';
import { subjects } from '../../lib/nats.js';
import { client, isProblem, type Res, sharedApi, startApi } from '../core-api/_helpers.js';
import { processorsTier } from '../health/support.js';
import { bootstrap, closeDb, db, nextSecond, privateNats, seed, waitFor } from '../helpers/stack.js';
import { customerIds } from '../ingest/support.js';
import { apiKey, known, storeEvents } from './support.js';

// Materialization over HTTP with real servers: materialize now then read the values, objectives
// and their progress, deletion blocked by a consumer and allowed without, the hourly schedule
// (only metrics in use, only the customers they need), other workspaces, roles and scopes, and
// 503 when no materializer answers.
t.teardown(closeDb);
const api = await sharedApi(t);
await processorsTier(t, []);
const ws = await bootstrap();
const other = await bootstrap();
await seed(ws.tenant_id, 3);
await seed(other.tenant_id, 1);
const admin = client(api.url, ws.api_key);
const stranger = client(api.url, other.api_key);
const ids = await customerIds(ws.tenant_id);
const [A, B, C] = ['cust-000001', 'cust-000002', 'cust-000003'].map((e) => ids.get(e)!);
const foreignCustomer = (await customerIds(other.tenant_id)).get('cust-000001')!;
const HOUR = 3600_000;
const DAY = 24 * HOUR;

await known(ws, 'report_exported');
await known(other, 'report_exported');
await storeEvents(ws.tenant_id, [
  { customer: A, name: 'report_exported', ago: HOUR, props: { pages: '2' } },
  { customer: A, name: 'report_exported', ago: 2 * DAY, props: { pages: '3' } },
  { customer: A, name: 'report_exported', ago: 40 * DAY, props: { pages: '100' } },
  { customer: B, name: 'report_exported', ago: 3 * DAY, props: { pages: '5' } },
]);

async function metric(body: Record<string, unknown>): Promise<string> {
  const r = await admin.post('/v1/metrics', {
    source_event: 'report_exported',
    calculation: 'count',
    window: { type: 'rolling', days: 30 },
    grain: 'customer',
    ...body,
  });
  if (r.status !== 201) throw new Error(`${r.status} ${r.text}`);
  return r.body.id;
}

const byCustomer = (r: Res) =>
  Object.fromEntries(
    (r.body.data as Array<{ customer_id: string; value: number }>).map((v) => [v.customer_id, v.value]),
  );

t.test('materialize now, then the stored values', async (t) => {
  const id = await metric({ name: 'Exports 30d' });
  t.same((await admin.get(`/v1/metrics/${id}/values`)).body, { data: [] }, 'nothing stored before a run');
  const before = Date.now();
  const m = await admin.post(`/v1/metrics/${id}/materialize`);
  t.equal(m.status, 200, m.text);
  t.match(m.body, { metric_id: id, customers: 3 });
  t.ok(Date.parse(m.body.computed_at) >= before - 2000, 'computed now');
  t.equal(Date.parse(m.body.period_end) - Date.parse(m.body.period_start), 30 * DAY, 'the 30-day window');
  const v = await admin.get(`/v1/metrics/${id}/values`);
  t.equal(v.status, 200, v.text);
  t.same(byCustomer(v), { [A]: 2, [B]: 1, [C]: 0 }, 'every customer, 0 without events');
  t.same(Object.keys(v.body.data[0]).sort(), ['computed_at', 'customer_id', 'period_end', 'period_start', 'value']);
  t.match(v.body.data[0], {
    period_start: m.body.period_start,
    period_end: m.body.period_end,
    computed_at: m.body.computed_at,
  });
  const one = await admin.get(`/v1/metrics/${id}/values?customer_id=${B}`);
  t.same(byCustomer(one), { [B]: 1 }, 'customer_id narrows to one customer');
  const later = new Date(Date.now() + DAY).toISOString();
  t.same((await admin.get(`/v1/metrics/${id}/values?from=${later}`)).body, { data: [] }, 'from after every period');
  const early = new Date(Date.now() - 60 * DAY).toISOString();
  t.same((await admin.get(`/v1/metrics/${id}/values?to=${early}`)).body, { data: [] }, 'to before every period');
  isProblem(t, await admin.get(`/v1/metrics/${id}/values?from=${later}&to=${early}`), 400, 'validation_failed');

  const sum = await metric({ name: 'Pages 30d', calculation: 'sum', target_property: 'pages' });
  await admin.post(`/v1/metrics/${sum}/materialize`);
  t.same(byCustomer(await admin.get(`/v1/metrics/${sum}/values`)), { [A]: 5, [B]: 5, [C]: 0 });
  const avg = await metric({ name: 'Pages avg 30d', calculation: 'avg', target_property: 'pages' });
  await admin.post(`/v1/metrics/${avg}/materialize`);
  t.same(byCustomer(await admin.get(`/v1/metrics/${avg}/values`)), { [A]: 2.5, [B]: 5, [C]: null }, 'null kept');

  const portfolio = await metric({ name: 'All exports', grain: 'portfolio' });
  const p = await admin.post(`/v1/metrics/${portfolio}/materialize`);
  t.match(p.body, { customers: 1 });
  t.match((await admin.get(`/v1/metrics/${portfolio}/values`)).body, { data: [{ customer_id: null, value: 3 }] });
});

t.test('a later computation of the same period replaces the value; new periods add to the series', async (t) => {
  const id = await metric({ name: 'Exports this month', window: { type: 'calendar', unit: 'month' } });
  await admin.post(`/v1/metrics/${id}/materialize`);
  const first = await admin.get(`/v1/metrics/${id}/values?customer_id=${C}`);
  t.same(byCustomer(first), { [C]: 0 });
  await storeEvents(ws.tenant_id, [{ customer: C, name: 'report_exported', ago: 1000 }]);
  // DateTime has seconds: a second run in the same second would tie with the first.
  await nextSecond();
  await waitFor(
    'the new value',
    async () => {
      await admin.post(`/v1/metrics/${id}/materialize`);
      return byCustomer(await admin.get(`/v1/metrics/${id}/values?customer_id=${C}`))[C] === 1;
    },
    30_000,
    500,
  );
  const v = await admin.get(`/v1/metrics/${id}/values?customer_id=${C}`);
  t.equal(v.body.data.length, 1, 'one value for the calendar month: the latest computation');

  const rolling = await metric({ name: 'Exports 7d', window: { type: 'rolling', days: 7 } });
  await admin.post(`/v1/metrics/${rolling}/materialize`);
  await nextSecond();
  await admin.post(`/v1/metrics/${rolling}/materialize`);
  const series = await admin.get(`/v1/metrics/${rolling}/values?customer_id=${A}`);
  t.equal(series.body.data.length, 2, 'a rolling window: one point per run');
  t.ok(series.body.data[0].period_start < series.body.data[1].period_start, 'ordered by period');
});

t.test('objectives: current value and progress; they make the metric in use', async (t) => {
  const id = await metric({ name: 'Pages for objectives', calculation: 'sum', target_property: 'pages' });
  const o = await admin.post(`/v1/customers/${A}/objectives`, {
    name: 'Export 20 pages',
    metric_id: id,
    target_value: 20,
    due_date: '2030-01-31',
  });
  t.equal(o.status, 201, o.text);
  t.match(o.body, {
    customer_id: A,
    metric_id: id,
    name: 'Export 20 pages',
    target_value: 20,
    due_date: '2030-01-31',
    current_value: null,
    progress: null,
  });
  await admin.post(`/v1/metrics/${id}/materialize`);
  const list = await admin.get(`/v1/customers/${A}/objectives`);
  t.equal(list.status, 200, list.text);
  t.match(list.body.data, [{ id: o.body.id, current_value: 5, progress: 0.25 }]);
  t.same((await admin.get(`/v1/customers/${B}/objectives`)).body, { data: [] }, 'objectives are per customer');
  const v = await admin.get(`/v1/metrics/${id}/values`);
  t.same(byCustomer(v), { [A]: 5 }, 'materialized only for the customer of its objective');
  t.match((await admin.get(`/v1/metrics/${id}`)).body.consumers, { objectives: 1, health_drivers: 0 });

  const blocked = await admin.del(`/v1/metrics/${id}`);
  isProblem(t, blocked, 409, 'metric_in_use');
  t.match(blocked.body, {
    consumers: { objectives: 1, health_drivers: 0, playbook_triggers: 0 },
    used_by: [{ type: 'objective', id: o.body.id, customer_id: A, name: 'Export 20 pages' }],
  });
  t.equal((await admin.get(`/v1/metrics/${id}`)).body.status, 'active', 'still active');

  t.equal((await admin.del(`/v1/objectives/${o.body.id}`)).status, 204);
  isProblem(t, await admin.del(`/v1/objectives/${o.body.id}`), 404, 'not_found');
  t.match((await admin.get(`/v1/metrics/${id}`)).body.consumers, { objectives: 0 });
  t.equal((await admin.del(`/v1/metrics/${id}`)).status, 204, 'deletable without consumers');
  const kept = await admin.get(`/v1/metrics/${id}/values`);
  t.same(byCustomer(kept), { [A]: 5 }, "a deleted metric's values stay readable");
  isProblem(t, await admin.post(`/v1/metrics/${id}/materialize`), 409, 'conflict');
  const onDeleted = await admin.post(`/v1/customers/${A}/objectives`, { name: 'x', metric_id: id, target_value: 1 });
  isProblem(t, onDeleted, 400, 'validation_failed');
  t.match(onDeleted.body.errors, [{ field: 'metric_id', code: 'metric_deleted' }]);
});

t.test('objective rules', async (t) => {
  const id = await metric({ name: 'Rules metric' });
  const portfolio = await metric({ name: 'Rules portfolio', grain: 'portfolio' });
  const bad = async (customer: string, body: Record<string, unknown>, field: string, code: string) => {
    const r = await admin.post(`/v1/customers/${customer}/objectives`, body);
    isProblem(t, r, 400, 'validation_failed');
    t.match(r.body.errors, [{ field, code }], `${field}: ${code}`);
  };
  await bad(A, { name: 'x', metric_id: portfolio, target_value: 1 }, 'metric_id', 'invalid_grain');
  await bad(
    A,
    { name: 'x', metric_id: '0192f0c4-8a55-7b3e-9d1c-000000000000', target_value: 1 },
    'metric_id',
    'not_found',
  );
  await bad(A, { name: 'x', metric_id: id }, 'target_value', 'required');
  await bad(A, { name: 'x', metric_id: id, target_value: 1, due_date: '31/01/2030' }, 'due_date', 'invalid_date');
  // 1E400 is valid JSON that JSON.parse reads as Infinity: stored, it made every later list answer
  // null where the schema promises a number.
  const before = (await admin.get(`/v1/customers/${A}/objectives`)).body;
  const huge = await admin.raw(
    'POST',
    `/v1/customers/${A}/objectives`,
    `{"name":"Huge","metric_id":"${id}","target_value":1E400}`,
    { 'content-type': 'application/json' },
  );
  isProblem(t, huge, 400, 'validation_failed');
  t.match(huge.body.errors, [{ field: 'target_value', code: 'too_large' }], 'target_value: too_large');
  t.same((await admin.get(`/v1/customers/${A}/objectives`)).body, before, 'nothing stored');
  const zero = await admin.post(`/v1/customers/${A}/objectives`, { name: 'Zero', metric_id: id, target_value: 0 });
  t.equal(zero.status, 201, zero.text);
  await admin.post(`/v1/metrics/${id}/materialize`);
  t.match((await admin.get(`/v1/customers/${A}/objectives`)).body.data, [{ current_value: 2, progress: null }]);
  isProblem(
    t,
    await admin.post(`/v1/customers/0192f0c4-8a55-7b3e-9d1c-000000000000/objectives`, {
      name: 'x',
      metric_id: id,
      target_value: 1,
    }),
    404,
    'not_found',
  );
});

t.test('the schedule materializes only metrics in use, for the customers they need', async (t) => {
  const used = await metric({ name: 'Scheduled used' });
  const unused = await metric({ name: 'Scheduled unused' });
  const o = await admin.post(`/v1/customers/${B}/objectives`, { name: 'One export', metric_id: used, target_value: 1 });
  t.equal(o.status, 201);
  const tier = await processorsTier(t, [], {
    METRICS_TENANTS: ws.tenant_id,
    METRICS_MATERIALIZE_INTERVAL_MS: '3600000',
  });
  const [lease] = await waitFor(
    'a finished metrics run',
    async () => {
      const rows = await db()`
        SELECT last_finished_at FROM job_leases WHERE job = 'metrics' AND tenant_id = ${ws.tenant_id}`;
      return rows.length && rows[0].last_finished_at ? rows : undefined;
    },
    60_000,
    250,
  );
  t.ok(lease.last_finished_at, 'the lease records the run');
  t.same(byCustomer(await admin.get(`/v1/metrics/${used}/values`)), { [B]: 1 }, 'its objective customer only');
  t.same((await admin.get(`/v1/metrics/${unused}/values`)).body, { data: [] }, 'no consumer: not materialized');
  t.match((await admin.get(`/v1/customers/${B}/objectives`)).body.data, [{ current_value: 1, progress: 1 }]);
  await tier.stop('SIGTERM');
});

t.test('another workspace: 404 for its metrics, customers and objectives', async (t) => {
  const id = await metric({ name: 'Private metric' });
  const o = await admin.post(`/v1/customers/${A}/objectives`, { name: 'Mine', metric_id: id, target_value: 1 });
  isProblem(t, await stranger.get(`/v1/metrics/${id}/values`), 404, 'not_found');
  isProblem(t, await stranger.post(`/v1/metrics/${id}/materialize`), 404, 'not_found');
  isProblem(t, await stranger.get(`/v1/customers/${A}/objectives`), 404, 'not_found');
  isProblem(t, await stranger.del(`/v1/objectives/${o.body.id}`), 404, 'not_found');
  const cross = await stranger.post(`/v1/customers/${foreignCustomer}/objectives`, {
    name: 'x',
    metric_id: id,
    target_value: 1,
  });
  isProblem(t, cross, 400, 'validation_failed');
  t.match(cross.body.errors, [{ field: 'metric_id', code: 'not_found' }], "another workspace's metric is unknown");
  t.equal(
    (await admin.get(`/v1/customers/${A}/objectives`)).body.data.some((x: any) => x.id === o.body.id),
    true,
  );
});

t.test('roles and scopes', async (t) => {
  const id = await metric({ name: 'Scoped metric' });
  const csm = client(api.url, await apiKey(api.url, ws, 'csm', ['metrics:read', 'customers:read', 'customers:write']));
  const viewer = client(api.url, await apiKey(api.url, ws, 'viewer', ['metrics:read', 'customers:read']));
  const noMetrics = client(api.url, await apiKey(api.url, ws, 'admin', ['customers:read']));
  t.equal((await csm.get(`/v1/metrics/${id}/values`)).status, 200, 'csm reads values');
  isProblem(t, await csm.post(`/v1/metrics/${id}/materialize`), 403, 'insufficient_scope');
  isProblem(t, await noMetrics.get(`/v1/metrics/${id}/values`), 403, 'insufficient_scope');
  const made = await csm.post(`/v1/customers/${C}/objectives`, { name: 'By a CSM', metric_id: id, target_value: 3 });
  t.equal(made.status, 201, 'customers:write creates objectives');
  t.equal((await viewer.get(`/v1/customers/${C}/objectives`)).status, 200, 'customers:read lists them');
  isProblem(
    t,
    await viewer.post(`/v1/customers/${C}/objectives`, { name: 'x', metric_id: id, target_value: 1 }),
    403,
    'insufficient_scope',
  );
  isProblem(t, await viewer.del(`/v1/objectives/${made.body.id}`), 403, 'insufficient_scope');
  isProblem(
    t,
    await noMetrics.post(`/v1/customers/${C}/objectives`, { name: 'x', metric_id: id, target_value: 1 }),
    403,
    'insufficient_scope',
  );
  t.equal((await csm.del(`/v1/objectives/${made.body.id}`)).status, 204);
});

t.test('no materializer answering → 503 materializer_unavailable with Retry-After', async (t) => {
  const { url } = await privateNats(t);
  const isolated = await startApi(t, { NATS_URL: url, METRICS_MATERIALIZE_TIMEOUT_MS: '1500' });
  const iso = client(isolated.url, ws.api_key);
  const id = await metric({ name: 'Unanswered metric' });
  const check = (r: Res) => {
    isProblem(t, r, 503, 'materializer_unavailable');
    t.equal(r.headers.get('retry-after'), '30');
  };
  check(await iso.post(`/v1/metrics/${id}/materialize`));
  const nc = await connect({ servers: url });
  t.teardown(() => nc.close());
  const silent = nc.subscribe(subjects.metricsMaterialize, { queue: 'metric-materializer' });
  await nc.flush();
  const started = Date.now();
  check(await iso.post(`/v1/metrics/${id}/materialize`));
  t.ok(Date.now() - started >= 1400, 'waited METRICS_MATERIALIZE_TIMEOUT_MS');
  silent.unsubscribe();
  t.same((await iso.get(`/v1/metrics/${id}/values`)).body, { data: [] }, 'nothing stored');
});
