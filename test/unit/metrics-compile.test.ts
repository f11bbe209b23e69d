import t from '#tap';
import { compileMetric } from '../../lib/metrics/compile.js';
import { num, str, uuid } from '../../lib/metrics/literal.js';
import { definitionErrors, slugify } from '../../lib/metrics/validate.js';
import { windowPeriod } from '../../lib/metrics/window.js';
import type { MetricDefinition } from '../../schemas/core/metrics.js';

// The metrics compiler without any server: literal encoding, windows, the SQL's shape, the rules.
const TENANT = '0192f0c4-8a55-7b3e-9d1c-2b7f3c4d5e6f';
const C1 = '0192f0c4-8a55-7b3e-9d1c-000000000001';
const NOW = new Date('2026-11-19T15:30:45.250Z'); // a Thursday
const UNSAFE = { code: 'unsafe_literal' };
const INVALID = { code: 'invalid_definition' };

/** ClickHouse's reading of a quoted literal, to prove what the server would see. */
function unquote(lit: string): string {
  if (!lit.startsWith("'") || !lit.endsWith("'")) throw new Error(`not a literal: ${lit}`);
  const body = lit.slice(1, -1);
  let out = '';
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === "'") throw new Error(`unescaped quote in ${lit}`);
    if (c !== '\\') {
      out += c;
      continue;
    }
    const n = body[++i];
    const map: Record<string, string> = { '0': '\0', n: '\n', r: '\r', t: '\t', b: '\b', f: '\f' };
    if (n === 'x') {
      out += String.fromCharCode(Number.parseInt(body.slice(i + 1, i + 3), 16));
      i += 2;
    } else out += map[n] ?? n;
  }
  return out;
}

const def = (d: Partial<MetricDefinition>): MetricDefinition => ({
  source_event: 'report_exported',
  calculation: 'count',
  window: { type: 'rolling', days: 30 },
  grain: 'customer',
  ...d,
});

t.test('string literals: injection attempts stay inside one literal and decode to themselves', async (t) => {
  const attempts = [
    "') OR 1=1 --",
    "' OR ''='",
    "\\'; DROP TABLE csp.events; --",
    'back\\slash\\',
    "trailing\\'",
    'nul\0byte',
    'new\nline\r\ttab',
    '\x01\x1f\x7f controls',
    "quote'quote''",
    '/* comment */',
    'ünïcödé ☃',
    '',
  ];
  for (const a of attempts) {
    const lit = str(a);
    t.equal(unquote(lit), a, JSON.stringify(a));
    t.notOk(/[\0\n\r]/.test(lit), `no raw NUL or line break in ${JSON.stringify(a)}`);
  }
  t.throws(() => str(1 as unknown as string), UNSAFE);
});

t.test('number and UUID literals refuse what is not one', async (t) => {
  t.equal(num(42), '42');
  t.equal(num(0.5), '0.5');
  t.equal(num(-3), '(-3)');
  t.equal(num(1e21), '1e+21');
  for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, '1' as unknown as number])
    t.throws(() => num(bad), UNSAFE);
  t.equal(uuid(TENANT.toUpperCase()), `toUUID('${TENANT}')`);
  t.throws(() => uuid("x') OR 1=1 --"), UNSAFE);
});

t.test('windows: rolling N days ending now, calendar periods so far (UTC, ISO weeks)', async (t) => {
  const p = (w: MetricDefinition['window']) => {
    const r = windowPeriod(w, NOW);
    return [r.from.toISOString(), r.to.toISOString()];
  };
  const to = NOW.toISOString();
  t.same(p({ type: 'rolling', days: 7 }), ['2026-11-12T15:30:45.250Z', to]);
  t.same(p({ type: 'rolling', days: 1 }), ['2026-11-18T15:30:45.250Z', to]);
  t.same(p({ type: 'calendar', unit: 'day' }), ['2026-11-19T00:00:00.000Z', to]);
  t.same(p({ type: 'calendar', unit: 'week' }), ['2026-11-16T00:00:00.000Z', to]);
  t.same(p({ type: 'calendar', unit: 'month' }), ['2026-11-01T00:00:00.000Z', to]);
  t.same(p({ type: 'calendar', unit: 'quarter' }), ['2026-10-01T00:00:00.000Z', to]);
  const sunday = new Date('2026-11-22T23:59:59Z');
  t.equal(windowPeriod({ type: 'calendar', unit: 'week' }, sunday).from.toISOString(), '2026-11-16T00:00:00.000Z');
  const monday = new Date('2026-11-23T00:00:00Z');
  t.equal(windowPeriod({ type: 'calendar', unit: 'week' }, monday).from.toISOString(), '2026-11-23T00:00:00.000Z');
  const feb = new Date('2026-03-31T10:00:00Z');
  t.equal(windowPeriod({ type: 'calendar', unit: 'quarter' }, feb).from.toISOString(), '2026-01-01T00:00:00.000Z');
});

t.test('count and exists over a calendar window without filters read the daily rollup', async (t) => {
  const c = compileMetric(def({ window: { type: 'calendar', unit: 'month' } }), { tenantId: TENANT, now: NOW });
  t.equal(c.source, 'rollup');
  t.match(c.sql, /FROM csp\.usage_daily_names/);
  t.match(c.sql, /day >= toDate\('2026-11-01'\)/);
  t.match(c.sql, /GROUP BY customer_id/);
  t.equal(c.empty, 0);
  const e = compileMetric(def({ calculation: 'exists', window: { type: 'calendar', unit: 'day' } }), {
    tenantId: TENANT,
    now: NOW,
  });
  t.equal(e.source, 'rollup');
  // A rolling window starts mid-day, a filter needs the properties, a generated event is not in the rollup.
  for (const d of [
    def({}),
    def({ window: { type: 'calendar', unit: 'day' }, filter: [{ field: 'user_id', op: 'eq', value: 'u' }] }),
    def({ source_event: 'health_changed', window: { type: 'calendar', unit: 'day' } }),
  ])
    t.equal(compileMetric(d, { tenantId: TENANT, now: NOW }).source, 'events');
});

t.test('events query: tenant, name, window, surface, customers, filters, one GROUP BY', async (t) => {
  const c = compileMetric(
    def({
      calculation: 'sum',
      target_property: "am'ount",
      filter: [
        { field: 'properties.plan', op: 'in', value: ['pro', "x') OR 1=1 --"] },
        { field: 'properties.seats', op: 'gte', value: -2 },
        { field: 'external_source', op: 'neq', value: 'hubspot' },
        { field: 'properties.n', op: 'neq', value: 3 },
        { field: 'product_code', op: 'contains', value: 'a\\b' },
      ],
    }),
    { tenantId: TENANT, customerIds: [C1], now: NOW },
  );
  t.equal(c.source, 'events');
  t.match(c.sql, `FROM csp.events`);
  t.match(c.sql, `tenant_id = toUUID('${TENANT}')`);
  t.match(c.sql, `event_name = 'report_exported'`);
  t.match(c.sql, `ts >= toDateTime(${Math.floor(NOW.getTime() / 1000) - 30 * 86400})`);
  t.match(c.sql, `ts <= toDateTime(${Math.floor(NOW.getTime() / 1000)})`);
  t.match(c.sql, "surface != 'system'");
  t.match(c.sql, `customer_id IN (toUUID('${C1}'))`);
  t.match(c.sql, "ifNull(sum(toFloat64OrNull(prop_values[indexOf(prop_keys, 'am\\'ount')])), 0)");
  t.match(c.sql, "prop_values[indexOf(prop_keys, 'plan')] IN ('pro', 'x\\') OR 1=1 --')");
  t.match(c.sql, "toFloat64OrNull(prop_values[indexOf(prop_keys, 'seats')]) >= (-2)");
  t.match(c.sql, "toString(external_source) != 'hubspot'");
  t.match(c.sql, "(isNull(toFloat64OrNull(prop_values[indexOf(prop_keys, 'n')])) OR");
  t.match(c.sql, "position(product_code, 'a\\\\b') > 0");
  t.equal(c.sql.match(/GROUP BY/g)?.length, 1);
  t.equal(c.empty, 0);
});

t.test('portfolio grain: one row, customer_id NULL, no customer restriction', async (t) => {
  const c = compileMetric(def({ calculation: 'avg', target_property: 'x', grain: 'portfolio' }), {
    tenantId: TENANT,
    customerIds: [C1],
    now: NOW,
  });
  t.match(c.sql, /^SELECT NULL AS customer_id, avg\(/);
  t.notMatch(c.sql, /GROUP BY|customer_id IN/);
  t.equal(c.empty, null);
});

t.test('generated events are read with the system surface; last_value forms', async (t) => {
  const g = compileMetric(def({ source_event: 'health_changed', calculation: 'last_value' }), {
    tenantId: TENANT,
    now: NOW,
  });
  t.notMatch(g.sql, /surface/);
  t.match(g.sql, 'toFloat64(toUInt32(max(ts)))');
  const v = compileMetric(def({ calculation: 'last_value', target_property: 'score' }), { tenantId: TENANT, now: NOW });
  t.match(v.sql, "argMaxIf(prop_values[indexOf(prop_keys, 'score')], (toUInt64(ts) * 1000 + ts_ms)");
});

t.test('what the compiler refuses instead of writing SQL', async (t) => {
  const o = { tenantId: TENANT, now: NOW };
  t.throws(() => compileMetric(def({ calculation: 'sum' }), o), INVALID);
  t.throws(() => compileMetric(def({ filter: [{ field: 'ts; DROP', op: 'eq', value: 1 }] }), o), INVALID);
  t.throws(() => compileMetric(def({ filter: [{ field: 'user_id', op: 'gt', value: 'x' }] }), o), INVALID);
  t.throws(() => compileMetric(def({}), { ...o, tenantId: "' OR 1=1" }), UNSAFE);
  t.throws(() => compileMetric(def({}), { ...o, customerIds: ['nope'] }), UNSAFE);
  t.throws(() => compileMetric(def({}), { ...o, database: 'csp; DROP' }), INVALID);
  t.match(compileMetric(def({}), { ...o, customerIds: [] }).sql, /AND 0/);
});

t.test('definition rules beyond the schema name their field', async (t) => {
  const codes = (d: Partial<MetricDefinition>) => definitionErrors(def(d)).map((e) => `${e.field}:${e.code}`);
  t.same(codes({}), []);
  for (const c of ['sum', 'avg', 'max', 'distinct_count'] as const)
    t.same(codes({ calculation: c }), ['target_property:required']);
  t.same(codes({ calculation: 'last_value' }), []);
  t.same(codes({ window: { type: 'rolling' } }), ['window.days:required']);
  t.same(codes({ window: { type: 'calendar', days: 3 } }), ['window.unit:required', 'window.days:unknown_field']);
  t.same(codes({ filter: [{ field: 'plan', op: 'eq', value: 'x' }] }), ['filter[0].field:invalid_field']);
  t.same(codes({ filter: [{ field: 'properties.', op: 'eq', value: 'x' }] }), ['filter[0].field:invalid_field']);
  t.same(codes({ filter: [{ field: 'properties.plan', op: 'in', value: 'x' }] }), ['filter[0].value:invalid_type']);
  t.same(codes({ filter: [{ field: 'user_id', op: 'in', value: [] }] }), ['filter[0].value:invalid_value']);
  t.same(codes({ filter: [{ field: 'user_id', op: 'lt', value: '3' }] }), ['filter[0].value:invalid_type']);
  t.same(codes({ filter: [{ field: 'user_id', op: 'eq', value: ['a'] }] }), ['filter[0].value:invalid_type']);
});

t.test('slugs from names', async (t) => {
  t.equal(slugify('Reports exported (30 days)'), 'reports_exported_30_days');
  t.equal(slugify('  Café  Revenue!! '), 'cafe_revenue');
  t.equal(slugify('30-day active'), 'm_30_day_active');
  t.equal(slugify('!!!'), 'metric');
  t.ok(slugify('x'.repeat(100)).length <= 64);
});
