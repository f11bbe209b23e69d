import t from '#tap';
import { client, isProblem, startApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb } from '../helpers/stack.js';
import { apiCustomer, monthOf, monthsFromNow, scored, sqlCustomer, type NewCustomer } from './support.js';

// GET /v1/analytics/renewals over HTTP on hand-built customers. Most renew in 2030–2031 so that the
// month and year boundaries are fixed dates; the default range is checked with customers renewing
// relative to today. No caching on this server (ANALYTICS_CACHE_TTL_MS=0).
t.teardown(closeDb);
const api = await startApi(t, { ANALYTICS_CACHE_TTL_MS: '0' });
const ws = await bootstrap();
const other = await bootstrap();
const c = client(api.url, ws.api_key);

const zero = { count: 0, arr: 0 };
const month = (m: string, commit = zero, best_case = zero, at_risk = zero) => ({
  month: m,
  count: commit.count + best_case.count + at_risk.count,
  arr: commit.arr + best_case.arr + at_risk.arr,
  by_forecast_category: { commit, best_case, at_risk },
});

async function renewing(renewal_date: string, o: Partial<NewCustomer> & { deleted_at?: Date } = {}, health?: string) {
  const id = await sqlCustomer(ws, { name: `R ${renewal_date}`, renewal_date, ...o });
  if (health) await scored(ws, id, health === 'healthy' ? 80 : health === 'neutral' ? 55 : 20, health);
  return id;
}

// The custom field wins over health when it is one of the three categories.
await renewing('2030-11-30', { arr: 1000, custom_fields: { forecast_category: 'commit' } }, 'at_risk');
await renewing('2030-12-01', { arr: 2000 }, 'healthy');
await renewing('2030-12-31', { arr: 3000 }, 'neutral');
await renewing('2031-01-01', { arr: 4000 });
// Not one of the three: the category follows health.
await renewing('2031-01-31', { arr: 500.25, custom_fields: { forecast_category: 'maybe' } }, 'at_risk');
// No arr: counted, adds 0.
await renewing('2031-01-15', { custom_fields: { forecast_category: 'best_case' } }, 'healthy');
// Never counted: churned, in the trash, outside the range, another workspace's.
await renewing('2031-01-10', { arr: 9999, status: 'churned' }, 'healthy');
await renewing('2030-12-10', { arr: 9999, deleted_at: new Date() }, 'healthy');
await renewing('2031-03-01', { arr: 9999 });
await renewing('2030-10-31', { arr: 9999 });
await sqlCustomer(other, { name: 'Elsewhere', renewal_date: '2030-12-15', arr: 9999 });

const NOV = month('2030-11', { count: 1, arr: 1000 });
const DEC = month('2030-12', { count: 1, arr: 2000 }, { count: 1, arr: 3000 });
const JAN = month('2031-01', zero, { count: 2, arr: 4000 }, { count: 1, arr: 500.25 });
const FEB = month('2031-02');

t.test('every month of the range, split by forecast category, across a year boundary', async (t) => {
  const r = await c.get('/v1/analytics/renewals?from=2030-11&to=2031-02');
  t.equal(r.status, 200, r.text);
  t.same(r.body, { from: '2030-11', to: '2031-02', data: [NOV, DEC, JAN, FEB] });
  const dates = await c.get('/v1/analytics/renewals?from=2030-11-30&to=2031-02-01');
  t.same(dates.body, r.body, 'a date names its whole month');
  const one = await c.get('/v1/analytics/renewals?from=2030-12&to=2030-12');
  t.same(one.body, { from: '2030-12', to: '2030-12', data: [DEC] }, 'a single month');
});

t.test('forecast_category filters; the others show zeros', async (t) => {
  const r = await c.get('/v1/analytics/renewals?from=2030-11&to=2031-02&forecast_category=at_risk,commit');
  t.equal(r.status, 200, r.text);
  t.same(r.body.data, [
    NOV,
    month('2030-12', { count: 1, arr: 2000 }),
    month('2031-01', zero, zero, { count: 1, arr: 500.25 }),
    FEB,
  ]);
  const best = await c.get('/v1/analytics/renewals?from=2030-11&to=2031-02&forecast_category=best_case');
  t.same(
    best.body.data.map((m: any) => [m.month, m.count, m.arr]),
    [
      ['2030-11', 0, 0],
      ['2030-12', 1, 3000],
      ['2031-01', 2, 4000],
      ['2031-02', 0, 0],
    ],
  );
});

t.test('default range: the current month and the next 11', async (t) => {
  const fresh = await bootstrap();
  const today = new Date().toISOString().slice(0, 10);
  const last = new Date(monthsFromNow(12).getTime() - 86_400_000).toISOString().slice(0, 10);
  await apiCustomer(api.url, fresh, { name: 'Today', arr: 10, renewal_date: today });
  await apiCustomer(api.url, fresh, { name: 'Last day', arr: 20, renewal_date: last });
  await apiCustomer(api.url, fresh, { name: 'A year out', arr: 40, renewal_date: `${monthOf(monthsFromNow(12))}-01` });
  const r = await client(api.url, fresh.api_key).get('/v1/analytics/renewals');
  t.equal(r.status, 200, r.text);
  t.equal(r.body.from, monthOf(monthsFromNow(0)));
  t.equal(r.body.to, monthOf(monthsFromNow(11)));
  t.equal(r.body.data.length, 12);
  t.same(
    r.body.data.map((m: any) => m.month),
    Array.from({ length: 12 }, (_, i) => monthOf(monthsFromNow(i))),
  );
  // Never scored: best_case.
  t.same(r.body.data[0], month(monthOf(monthsFromNow(0)), zero, { count: 1, arr: 10 }));
  t.same(r.body.data[11], month(monthOf(monthsFromNow(11)), zero, { count: 1, arr: 20 }));
  t.equal(
    r.body.data.reduce((s: number, m: any) => s + m.count, 0),
    2,
    'the renewal 12 months out is outside',
  );
  const from = await client(api.url, fresh.api_key).get('/v1/analytics/renewals?from=2030-05');
  t.same([from.body.from, from.body.to, from.body.data.length], ['2030-05', '2031-04', 12], 'to: from + 11');
});

t.test('bad parameters: 400 naming the parameter', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['from=2030-13', 'from', 'invalid_date'],
    ['from=30-01', 'from', 'invalid_date'],
    ['to=2031-02-30', 'to', 'invalid_date'],
    ['from=2031-02&to=2030-11', 'from', 'invalid_range'],
    ['to=2020-01', 'to', 'invalid_range'],
    ['from=2030-01&to=2033-01', 'to', 'range_too_long'],
    ['forecast_category=commit,maybe', 'forecast_category', 'invalid_value'],
    ['forecast_category=', 'forecast_category', 'invalid_value'],
    ['foo=1', 'foo', 'unknown_field'],
  ];
  for (const [q, field, code] of cases) {
    const r = await c.get(`/v1/analytics/renewals?${q}`);
    isProblem(t, r, 400, 'validation_failed');
    t.match(r.body.errors, [{ field, code }], `${q}: ${field} ${code}`);
  }
  const longest = await c.get('/v1/analytics/renewals?from=2030-01&to=2032-12');
  t.equal(longest.status, 200, '36 months is the most');
  t.equal(longest.body.data.length, 36);
});
