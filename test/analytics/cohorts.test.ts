import t from '#tap';
import { client, isProblem, startApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb } from '../helpers/stack.js';
import { apiCustomer, monthOf, monthsFromNow, pastChange, quarterOf, sqlCustomer } from './support.js';

// GET /v1/analytics/cohorts over HTTP. Customers are created in past months straight in SQL, and
// their past status changes are written into the status history directly: the API records changes
// only at the time they happen (that path has its own test in history.test.ts). Changes happening
// now go through the API. No caching on this server (ANALYTICS_CACHE_TTL_MS=0).
t.teardown(closeDb);
const api = await startApi(t, { ANALYTICS_CACHE_TTL_MS: '0' });
const ws = await bootstrap();
const other = await bootstrap();
const c = client(api.url, ws.api_key);
const M = monthsFromNow;
const SECOND = 1000;

const offsets = (size: number, retained: number[]) =>
  retained.map((r, offset) => ({ offset, retained: r, rate: Math.round((r / size) * 10_000) / 10_000 }));

// The last second of month −4: cohort −4, retained throughout.
await sqlCustomer(ws, { name: 'b1', created_at: new Date(M(-3).getTime() - SECOND) });
// Cohort −3.
await sqlCustomer(ws, { name: 'a1', created_at: M(-3, 10) });
const a2 = await sqlCustomer(ws, { name: 'a2', created_at: M(-3, 5) });
await pastChange(ws, a2, 'churned', M(-2, 15));
const a3 = await sqlCustomer(ws, { name: 'a3', created_at: M(-3, 2) });
await pastChange(ws, a3, 'churned', M(-3, 20));
await pastChange(ws, a3, 'active', M(-1, 3));
// Created at the first instant of month −3 and churned at the first instant of month −2: active at
// the end of month −3 (the change is not before its end), churned from offset 1 on.
const a4 = await sqlCustomer(ws, { name: 'a4', created_at: M(-3) });
await pastChange(ws, a4, 'churned', M(-2));
const a5 = await sqlCustomer(ws, { name: 'a5 (trash)', created_at: M(-3, 12) });
const a6 = await sqlCustomer(ws, { name: 'a6', created_at: M(-3, 15) });
// Month −1: churned from the start.
await sqlCustomer(ws, { name: 'c1', status: 'churned', created_at: M(-1, 5) });
// Month −5: before the window of months_out=4.
await sqlCustomer(ws, { name: 'old', created_at: M(-5, 5) });
// Another workspace's customers never count.
const o1 = await sqlCustomer(other, { name: 'elsewhere', created_at: M(-3, 10) });
await pastChange(other, o1, 'churned', M(-2, 1));

t.test('month cohorts: sizes, retention at every offset, the current month as of now', async (t) => {
  // Through the API, now: churned in the current month, and a customer of the current month.
  t.equal((await c.patch(`/v1/customers/${a6}`, { status: 'churned' })).status, 200);
  t.equal((await c.del(`/v1/customers/${a5}`)).status, 204, 'soft-deleted: in no cohort');
  await apiCustomer(api.url, ws, { name: 'n1' });

  const r = await c.get('/v1/analytics/cohorts?months_out=4');
  t.equal(r.status, 200, r.text);
  t.same(r.body, {
    cohort_period: 'month',
    months_out: 4,
    data: [
      { cohort: monthOf(M(-4)), size: 1, retention: offsets(1, [1, 1, 1, 1, 1]) },
      { cohort: monthOf(M(-3)), size: 5, retention: offsets(5, [4, 2, 3, 2]) },
      { cohort: monthOf(M(-1)), size: 1, retention: offsets(1, [0, 0]) },
      { cohort: monthOf(M(0)), size: 1, retention: offsets(1, [1]) },
    ],
  });
  t.same(r.body.data[1].retention[1], { offset: 1, retained: 2, rate: 0.4 });

  const one = await c.get('/v1/analytics/cohorts?cohort_period=month&months_out=1');
  t.same(
    one.body.data,
    [
      { cohort: monthOf(M(-1)), size: 1, retention: offsets(1, [0, 0]) },
      { cohort: monthOf(M(0)), size: 1, retention: offsets(1, [1]) },
    ],
    'months_out=1: the current month and the one before',
  );

  const def = await c.get('/v1/analytics/cohorts');
  t.equal(def.body.months_out, 12, 'months_out defaults to 12');
  t.equal(def.body.cohort_period, 'month');
  t.equal(def.body.data[0].cohort, monthOf(M(-5)), 'the month −5 cohort is inside 12 months');
  t.same(def.body.data[0].retention, offsets(1, [1, 1, 1, 1, 1, 1]));

  const o = await client(api.url, other.api_key).get('/v1/analytics/cohorts?months_out=4');
  t.same(
    o.body.data,
    [{ cohort: monthOf(M(-3)), size: 1, retention: offsets(1, [1, 0, 0, 0]) }],
    'the other workspace',
  );
});

/** Start of the quarter `n` quarters from the current one (UTC). */
function quarterStart(n: number): Date {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), Math.floor(now.getUTCMonth() / 3) * 3 + 3 * n, 1));
}
const plusDays = (d: Date, n: number) => new Date(d.getTime() + n * 86_400_000);

t.test('quarter cohorts: offsets count quarters, months_out covers months', async (t) => {
  const q = await bootstrap();
  const q1 = await sqlCustomer(q, { name: 'q1', created_at: plusDays(quarterStart(-2), 5) });
  await pastChange(q, q1, 'churned', plusDays(quarterStart(-1), 10));
  await sqlCustomer(q, { name: 'q2', created_at: quarterStart(-1) });
  await sqlCustomer(q, { name: 'q3', created_at: new Date(quarterStart(-1).getTime() - SECOND) });
  const q4 = await sqlCustomer(q, { name: 'q4', created_at: plusDays(quarterStart(-2), 40) });
  await pastChange(q, q4, 'churned', quarterStart(-1));
  await sqlCustomer(q, { name: 'too old', created_at: plusDays(quarterStart(-3), 1) });

  const r = await client(api.url, q.api_key).get('/v1/analytics/cohorts?cohort_period=quarter&months_out=6');
  t.equal(r.status, 200, r.text);
  t.same(r.body, {
    cohort_period: 'quarter',
    months_out: 6,
    data: [
      { cohort: quarterOf(quarterStart(-2)), size: 3, retention: offsets(3, [3, 1, 1]) },
      { cohort: quarterOf(quarterStart(-1)), size: 1, retention: offsets(1, [1, 1]) },
    ],
  });
  t.equal(r.body.data[0].retention[1].rate, 0.3333, 'rates are rounded to 4 decimals');
  const short = await client(api.url, q.api_key).get('/v1/analytics/cohorts?cohort_period=quarter&months_out=5');
  t.same(short.body.data, [r.body.data[1]], 'months_out=5 covers one quarter back');
});

t.test('year boundary: December and January are different cohorts', async (t) => {
  const y = await bootstrap();
  const year = new Date().getUTCFullYear();
  await sqlCustomer(y, { name: 'dec', created_at: new Date(`${year - 1}-12-31T23:59:59Z`) });
  await sqlCustomer(y, { name: 'jan', created_at: new Date(`${year}-01-01T00:00:00Z`) });
  const yc = client(api.url, y.api_key);
  const months = await yc.get('/v1/analytics/cohorts?months_out=36');
  t.same(
    months.body.data.map((d: any) => [d.cohort, d.size]),
    [
      [`${year - 1}-12`, 1],
      [`${year}-01`, 1],
    ],
  );
  const monthNow = new Date().getUTCMonth();
  t.equal(months.body.data[0].retention.length, monthNow + 2, 'offsets up to the current month');
  const quarters = await yc.get('/v1/analytics/cohorts?cohort_period=quarter&months_out=36');
  t.same(
    quarters.body.data.map((d: any) => [d.cohort, d.size, d.retention.length]),
    [
      [`${year - 1}-Q4`, 1, Math.floor(monthNow / 3) + 2],
      [`${year}-Q1`, 1, Math.floor(monthNow / 3) + 1],
    ],
  );
});

t.test('bad parameters: 400 naming the parameter', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['months_out=0', 'months_out', 'too_small'],
    ['months_out=37', 'months_out', 'too_large'],
    ['months_out=abc', 'months_out', 'invalid_type'],
    ['months_out=1.5', 'months_out', 'invalid_type'],
    ['cohort_period=week', 'cohort_period', 'invalid_value'],
    ['period=month', 'period', 'unknown_field'],
  ];
  for (const [q, field, code] of cases) {
    const r = await c.get(`/v1/analytics/cohorts?${q}`);
    isProblem(t, r, 400, 'validation_failed');
    t.match(r.body.errors, [{ field, code }], `${q}: ${field} ${code}`);
  }
  t.equal((await c.get('/v1/analytics/cohorts?months_out=36')).status, 200, '36 is the most');
});
