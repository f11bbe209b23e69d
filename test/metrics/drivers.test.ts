import t from '#tap';
import { client, isProblem, sharedApi } from '../core-api/_helpers.js';
import { processorsTier } from '../health/support.js';
import { bootstrap, closeDb, seed } from '../helpers/stack.js';
import { customerIds } from '../ingest/support.js';
import { known, storeEvents } from './support.js';

// Health drivers over HTTP with real servers: PATCH /v1/health/model drivers, the dimension
// metric:<slug> scored from the latest materialized value by its curve, its weight in the score,
// "no value yet" inactive, and the driver as a consumer of its metric.
t.teardown(closeDb);
const api = await sharedApi(t);
await processorsTier(t, []);
const ws = await bootstrap();
const other = await bootstrap();
await seed(ws.tenant_id, 3);
const admin = client(api.url, ws.api_key);
const ids = await customerIds(ws.tenant_id);
const [A, B, C] = ['cust-000001', 'cust-000002', 'cust-000003'].map((e) => ids.get(e)!);
const HOUR = 3600_000;

await known(ws, 'report_exported');
await known(other, 'report_exported');
await storeEvents(
  ws.tenant_id,
  [A, A, A, A, B].map((customer, i) => ({ customer, name: 'report_exported', ago: (i + 1) * HOUR })),
);

async function metric(
  c: ReturnType<typeof client>,
  body: Record<string, unknown>,
): Promise<{ id: string; slug: string }> {
  const r = await c.post('/v1/metrics', {
    source_event: 'report_exported',
    calculation: 'count',
    window: { type: 'rolling', days: 30 },
    grain: 'customer',
    ...body,
  });
  if (r.status !== 201) throw new Error(`${r.status} ${r.text}`);
  return r.body;
}

const exports = await metric(admin, { name: 'Exports', unit: 'reports' });
// Payment health alone (no billing events: 100) beside the drivers, so each score is easy to check.
const base = { active_dimensions: ['payment_health'], weights: { payment_health: 1 } };

async function recalculated(customer: string) {
  const r = await admin.post(`/v1/customers/${customer}/health/recalculate`);
  if (r.status !== 200) throw new Error(`${r.status} ${r.text}`);
  return r.body as { score: number; dimensions: Array<{ key: string; active: boolean; score: number; value: number }> };
}
const driverDim = (h: Awaited<ReturnType<typeof recalculated>>, slug: string) =>
  h.dimensions.find((d) => d.key === `metric:${slug}`);

t.test('drivers are validated and named by index', async (t) => {
  const portfolio = await metric(admin, { name: 'All exports', grain: 'portfolio' });
  const gone = await metric(admin, { name: 'Gone' });
  t.equal((await admin.del(`/v1/metrics/${gone.id}`)).status, 204);
  const foreign = await metric(client(api.url, other.api_key), { name: 'Theirs' });
  const driver = (metric_id: string) => ({ metric_id, weight: 1, target: 10, direction: 'higher_is_better' });
  const r = await admin.patch('/v1/health/model', {
    drivers: [driver(exports.id), driver(portfolio.id), driver(gone.id), driver(foreign.id), driver(exports.id)],
  });
  isProblem(t, r, 400, 'validation_failed');
  t.same(
    r.body.errors.map((e: { field: string; code: string }) => [e.field, e.code]),
    [
      ['drivers[1].metric_id', 'invalid_grain'],
      ['drivers[2].metric_id', 'metric_deleted'],
      ['drivers[3].metric_id', 'not_found'],
      ['drivers[4].metric_id', 'duplicate'],
    ],
  );
  const badDirection = await admin.patch('/v1/health/model', {
    drivers: [{ ...driver(exports.id), direction: 'sideways' }],
  });
  isProblem(t, badDirection, 400, 'validation_failed');
  t.match(badDirection.body.errors, [{ field: 'drivers[0].direction' }]);
  const zeroTarget = await admin.patch('/v1/health/model', { drivers: [{ ...driver(exports.id), target: 0 }] });
  isProblem(t, zeroTarget, 400, 'validation_failed');
  t.same((await admin.get('/v1/health/model')).body.drivers, [], 'nothing changed');
});

t.test('a driver is a dimension scored by its curve and weighed like the others', async (t) => {
  const set = await admin.patch('/v1/health/model', {
    ...base,
    drivers: [{ metric_id: exports.id, weight: 1, target: 4, direction: 'higher_is_better' }],
  });
  t.equal(set.status, 200, set.text);
  t.same(set.body.drivers, [
    { metric_id: exports.id, slug: exports.slug, unit: 'reports', weight: 1, target: 4, direction: 'higher_is_better' },
  ]);
  t.match((await admin.get(`/v1/metrics/${exports.id}`)).body.consumers, { health_drivers: 1, objectives: 0 });

  // Before any materialized value the driver is inactive: payment health alone.
  const before = await recalculated(B);
  t.equal(before.score, 100);
  t.match(driverDim(before, exports.slug), { active: false, score: null, value: null, unit: 'reports' });

  const m = await admin.post(`/v1/metrics/${exports.id}/materialize`);
  t.match(m.body, { customers: 3 }, 'a driver needs every customer');
  const [a, b, c] = [await recalculated(A), await recalculated(B), await recalculated(C)];
  t.match(driverDim(a, exports.slug), { active: true, score: 100, value: 4, weight: 1 });
  t.match(driverDim(b, exports.slug), { active: true, score: 25, value: 1 });
  t.match(driverDim(c, exports.slug), { active: true, score: 0, value: 0 });
  t.same([a.score, b.score, c.score], [100, 63, 50], '(100 + driver) / 2');

  await admin.patch('/v1/health/model', {
    drivers: [{ metric_id: exports.id, weight: 3, target: 4, direction: 'higher_is_better' }],
  });
  const [b3, c3] = [await recalculated(B), await recalculated(C)];
  t.same([b3.score, c3.score], [44, 25], 'weight 3: (100 + 3 × driver) / 4');

  await admin.patch('/v1/health/model', {
    drivers: [{ metric_id: exports.id, weight: 1, target: 2, direction: 'lower_is_better' }],
  });
  const [al, bl, cl] = [await recalculated(A), await recalculated(B), await recalculated(C)];
  t.same(
    [al, bl, cl].map((h) => driverDim(h, exports.slug)!.score),
    [0, 100, 100],
    'lower_is_better: 100 up to the target, 100 − (value − target) / target × 100 above',
  );
  t.same([al.score, bl.score], [50, 100]);
});

t.test('a driver keeps its metric in use until removed', async (t) => {
  const blocked = await admin.del(`/v1/metrics/${exports.id}`);
  isProblem(t, blocked, 409, 'metric_in_use');
  t.match(blocked.body, {
    consumers: { health_drivers: 1 },
    used_by: [{ type: 'health_driver', name: `metric:${exports.slug}` }],
  });
  const cleared = await admin.patch('/v1/health/model', { drivers: [] });
  t.equal(cleared.status, 200, cleared.text);
  t.same(cleared.body.drivers, []);
  const h = await recalculated(A);
  t.equal(driverDim(h, exports.slug), undefined, 'the dimension is gone with the driver');
  t.equal((await admin.del(`/v1/metrics/${exports.id}`)).status, 204);
});

t.test('another workspace cannot use or see the drivers', async (t) => {
  const theirs = client(api.url, other.api_key);
  const r = await theirs.patch('/v1/health/model', {
    drivers: [{ metric_id: exports.id, weight: 1, target: 1, direction: 'higher_is_better' }],
  });
  isProblem(t, r, 400, 'validation_failed');
  t.match(r.body.errors, [{ field: 'drivers[0].metric_id', code: 'not_found' }]);
  t.same((await theirs.get('/v1/health/model')).body.drivers, []);
});
