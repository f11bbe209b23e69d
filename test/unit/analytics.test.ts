import t from '#tap';
import { ResponseCache } from '../../core-api/analytics/cache.js';
import { cohortLabel, cohortWindow, parseMonth, renewalRange } from '../../core-api/analytics/params.js';
import { ApiError } from '../../lib/problem.js';

// The pure parts of the analytics endpoints: month parsing, the renewal range and its 400s, the
// cohort window, and the response cache's expiry, sharing and failure handling.

const NOW = new Date('2026-11-23T14:00:00Z');
const M = (y: number, m: number) => y * 12 + m - 1;

t.test('parseMonth: YYYY-MM or a real date', async (t) => {
  t.equal(parseMonth('2026-01'), M(2026, 1));
  t.equal(parseMonth('2026-12-31'), M(2026, 12));
  t.equal(parseMonth('2024-02-29'), M(2024, 2), 'leap day');
  for (const bad of ['2026-13', '2026-00', '2025-02-29', '2026-1', '26-01', '2026-01-01T00:00:00Z', '1969-12', ''])
    t.equal(parseMonth(bad), null, JSON.stringify(bad));
});

const fieldsOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    if (e instanceof ApiError) return e.errors?.map((x) => `${x.field} ${x.code}`);
    throw e;
  }
  return undefined;
};

t.test('renewalRange: defaults, bounds and the parameter named', async (t) => {
  t.same(renewalRange({}, NOW), { from: M(2026, 11), to: M(2027, 10), categories: ['commit', 'best_case', 'at_risk'] });
  t.same(renewalRange({ from: '2030-05' }, NOW), {
    from: M(2030, 5),
    to: M(2031, 4),
    categories: ['commit', 'best_case', 'at_risk'],
  });
  t.same(renewalRange({ to: '2026-12' }, NOW).from, M(2026, 11), 'from defaults to the current month');
  t.same(renewalRange({ forecast_category: 'at_risk,commit' }, NOW).categories, ['commit', 'at_risk']);
  t.same(renewalRange({ from: '2030-01', to: '2032-12' }, NOW).to, M(2032, 12), '36 months');
  t.same(
    fieldsOf(() => renewalRange({ from: '2030-01', to: '2033-01' }, NOW)),
    ['to range_too_long'],
  );
  t.same(
    fieldsOf(() => renewalRange({ from: '2031-01', to: '2030-12' }, NOW)),
    ['from invalid_range'],
  );
  t.same(
    fieldsOf(() => renewalRange({ to: '2026-10' }, NOW)),
    ['to invalid_range'],
  );
  t.same(
    fieldsOf(() => renewalRange({ from: 'x', to: 'y', forecast_category: 'nope' }, NOW)),
    ['from invalid_date', 'to invalid_date', 'forecast_category invalid_value'],
  );
});

t.test('cohortWindow and labels', async (t) => {
  const m = cohortWindow('month', 12, NOW);
  t.match(m, { step: 1, maxOffset: 12, current: M(2026, 11), first: M(2025, 11) });
  t.equal(m.firstStart.toISOString(), '2025-11-01T00:00:00.000Z');
  const q = cohortWindow('quarter', 7, NOW);
  t.match(q, { step: 3, maxOffset: 2, current: 2026 * 4 + 3, first: 2026 * 4 + 1 });
  t.equal(q.firstStart.toISOString(), '2026-04-01T00:00:00.000Z');
  t.equal(cohortWindow('quarter', 2, NOW).maxOffset, 0, 'fewer than 3 months: the current quarter only');
  t.equal(cohortLabel('month', M(2026, 1)), '2026-01');
  t.equal(cohortLabel('quarter', 2026 * 4 + 3), '2026-Q4');
});

t.test('ResponseCache: shared while fresh, per workspace, failures forgotten, 0 disables', async (t) => {
  let now = 0;
  const cache = new ResponseCache(30_000, 3, () => now);
  let runs = 0;
  const compute = async () => ++runs;
  const [a, b] = await Promise.all([cache.get('t1', 'k', compute), cache.get('t1', 'k', compute)]);
  t.same([a.value, b.value, runs], [1, 1, 1], 'concurrent callers share one computation');
  t.equal(a.maxAgeS, 30);
  t.equal((await cache.get('t2', 'k', compute)).value, 2, 'another workspace computes its own');
  now = 29_999;
  // Past half its life: served at once, refreshed behind it (the refresh started at 29,999).
  t.same(await cache.get('t1', 'k', compute), { value: 1, maxAgeS: 0 }, 'an old answer is served without waiting');
  await new Promise((r) => setImmediate(r));
  t.equal(runs, 3, 'and refreshed in the background');
  t.same(await cache.get('t1', 'k', compute), { value: 3, maxAgeS: 30 }, 'the refreshed answer follows');
  now = 29_999 + 30_000;
  t.equal((await cache.get('t1', 'k', compute)).value, 4, 'an expired answer is never served: the reader waits');
  await t.rejects(cache.get('t1', 'bad', async () => Promise.reject(new Error('down'))));
  t.equal((await cache.get('t1', 'bad', compute)).value, 5, 'a failure is not cached');
  await cache.get('t3', 'k', compute);
  await cache.get('t4', 'k', compute);
  t.ok(cache.size <= 3, 'bounded');
  const off = new ResponseCache(0);
  t.same([(await off.get('t', 'k', compute)).value, (await off.get('t', 'k', compute)).value], [8, 9]);
});

t.test('ResponseCache.sweep keeps answers in use fresh and forgets the others', async (t) => {
  let now = 0;
  const failures: unknown[] = [];
  const cache = new ResponseCache(
    30_000,
    100,
    () => now,
    60_000,
    (err) => failures.push(err),
  );
  let runs = 0;
  let fail = false;
  const compute = async () => {
    runs++;
    if (fail) throw new Error('down');
    return runs;
  };
  await cache.get('t', 'read', compute);
  await cache.get('t', 'idle', compute);
  now = 10_000;
  cache.sweep();
  t.equal(runs, 2, 'nothing to refresh before half the life');
  await cache.get('t', 'read', compute);
  now = 16_000;
  cache.sweep();
  await new Promise((r) => setImmediate(r));
  t.equal(runs, 4, 'both refreshed past half their life');
  t.same(await cache.get('t', 'read', compute), { value: 3, maxAgeS: 30 }, 'a reader gets the swept answer at once');
  fail = true;
  now = 40_000;
  cache.sweep();
  await new Promise((r) => setImmediate(r));
  t.equal(failures.length, 2, 'a failed refresh is reported');
  t.equal((await cache.get('t', 'read', compute)).value, 3, 'and the previous answer stays while within the bound');
  now = 16_000 + 60_000;
  cache.sweep();
  t.equal(cache.size, 1, 'an answer nobody read for keepWarmMs is forgotten');
});
