import t from '#tap';
import { client, isProblem, sharedApi } from '../core-api/_helpers.js';
import { processorsTier } from '../health/support.js';
import { bootstrap, closeDb, seed } from '../helpers/stack.js';
import { customerIds } from '../ingest/support.js';
import { known, storeEvents } from '../metrics/support.js';

// Values a request carries or a handler derives that once reached a store it could not read:
// numbers nearer zero than the smallest normal double in a metric filter (ClickHouse 18.16 has no
// literal for them), an item of an `in` list as long as the whole query allows, a history range
// whose default start falls before 1970, a renewals range whose month after ends past 9999, and
// a metric values range reaching outside ClickHouse's DateTime (1970 to 2106).
// Each answers as documented (a value, or a 400 naming the field), never a 500.
t.teardown(closeDb);
const api = await sharedApi(t);
await processorsTier(t, []);
const ws = await bootstrap();
await seed(ws.tenant_id, 2);
const admin = client(api.url, ws.api_key);
const ids = await customerIds(ws.tenant_id);
const A = ids.get('cust-000001')!;
await known(ws, 'report_exported');
await storeEvents(ws.tenant_id, [
  { customer: A, name: 'report_exported', ago: 3_600_000, props: { pages: '1e-300' } },
  { customer: A, name: 'report_exported', ago: 7_200_000, props: { pages: '2' } },
]);

const definition = (filter: unknown[]) => ({
  source_event: 'report_exported',
  calculation: 'count',
  window: { type: 'rolling', days: 30 },
  grain: 'portfolio',
  filter,
});

t.test('numbers of every size JSON carries compare in a metric filter', async (t) => {
  for (const value of [1e-310, 5e-324, -5e-324, 2.225e-308, 2.2250738585072014e-308, 1.7976931348623157e308, 0]) {
    const r = await admin.post('/v1/metrics/test', {
      definition: definition([{ field: 'properties.pages', op: 'gte', value }]),
    });
    t.equal(r.status, 200, `gte ${value}: ${r.text.slice(0, 200)}`);
  }
  const count = async (op: string, value: number) =>
    (
      await admin.post('/v1/metrics/test', {
        definition: definition([{ field: 'properties.pages', op, value }]),
      })
    ).body.results?.[0]?.value;
  t.equal(await count('gt', 5e-324), 2, 'pages 1e-300 and 2 are above 5e-324');
  t.equal(await count('lt', 1e-310), 0, 'neither is below 1e-310');
  t.equal(await count('gt', -5e-324), 2, 'both are above -5e-324');
});

t.test('a stored metric with such a filter materializes', async (t) => {
  const m = await admin.post('/v1/metrics', {
    name: 'Tiny pages',
    ...definition([{ field: 'properties.pages', op: 'gt', value: 1e-310 }]),
  });
  t.equal(m.status, 201, m.text.slice(0, 200));
  const run = await admin.post(`/v1/metrics/${m.body.id}/materialize`);
  t.equal(run.status, 200, run.text.slice(0, 200));
  const values = await admin.get(`/v1/metrics/${m.body.id}/values`);
  t.match(values.body.data, [{ customer_id: null, value: 2 }], 'pages 1e-300 and 2 are above 1e-310');
});

t.test('metric values over a range outside 1970 to 2106: the periods it holds, never a 500', async (t) => {
  const m = await admin.post('/v1/metrics', { name: 'All exports', ...definition([]) });
  t.equal(m.status, 201, m.text.slice(0, 200));
  t.equal((await admin.post(`/v1/metrics/${m.body.id}/materialize`)).status, 200);
  const values = (q: string) => admin.get(`/v1/metrics/${m.body.id}/values?${q}`);
  for (const q of [
    'to=0001-01-01T00:00:00Z',
    'to=1969-12-31T23:59:59Z',
    'from=2106-02-07T06:28:16Z',
    'from=9999-12-31T23:59:59Z',
  ]) {
    const r = await values(q);
    t.equal(r.status, 200, `${q}: ${r.text.slice(0, 200)}`);
    t.same(r.body.data, [], `${q}: no period`);
  }
  for (const q of [
    'from=0001-01-01T00:00:00Z',
    'to=9999-12-31T23:59:59Z',
    'from=1969-01-01T00:00:00Z&to=2200-01-01T00:00:00Z',
  ]) {
    const r = await values(q);
    t.equal(r.status, 200, `${q}: ${r.text.slice(0, 200)}`);
    t.match(r.body.data, [{ customer_id: null, value: 2 }], `${q}: the stored period`);
  }
});

t.test('an item of an in list is capped like a single value', async (t) => {
  const long = 'x'.repeat(16_000);
  for (const path of ['/v1/metrics/test', '/v1/metrics']) {
    const body =
      path === '/v1/metrics/test'
        ? { definition: definition([{ field: 'properties.plan', op: 'in', value: ['pro', long] }]) }
        : { name: 'Long list', ...definition([{ field: 'properties.plan', op: 'in', value: ['pro', long] }]) };
    const r = await admin.post(path, body);
    isProblem(t, r, 400, 'validation_failed');
    t.match(JSON.stringify(r.body.errors), /too_long/, `${path}: the item is named as too long`);
  }
  // 100 items of 1000 characters: each within its cap, together past the filter's.
  const many = Array.from({ length: 100 }, (_, i) => `${i}`.padEnd(1000, 'y'));
  const r = await admin.post('/v1/metrics/test', {
    definition: definition([{ field: 'properties.plan', op: 'in', value: many }]),
  });
  t.equal(r.status, 400, r.text.slice(0, 200));
  t.match(r.body.errors, [{ field: /filter/, code: 'too_long' }]);
  const fits = await admin.post('/v1/metrics/test', {
    definition: definition([{ field: 'properties.plan', op: 'in', value: many.slice(0, 20) }]),
  });
  t.equal(fits.status, 200, `20 items of 1000 characters are answered (${fits.text.slice(0, 200)})`);
});

t.test('a health history whose default start falls before 1970 starts at 1970-01-01', async (t) => {
  for (const to of ['1970-01-01', '1970-03-30']) {
    const r = await admin.get(`/v1/customers/${A}/health/history?to=${to}`);
    t.equal(r.status, 200, `to=${to}: ${r.text.slice(0, 200)}`);
    t.same(r.body.data, [], 'nothing was calculated then');
  }
});

t.test('renewals in December 9999', async (t) => {
  for (const q of ['from=9999-01-01', 'from=9999-12-01&to=9999-12-31', 'from=9999-06']) {
    const r = await admin.get(`/v1/analytics/renewals?${q}`);
    t.equal(r.status, 200, `${q}: ${r.text.slice(0, 200)}`);
    t.equal(r.body.to, '9999-12', `${q}: the range ends in December 9999`);
  }
});
