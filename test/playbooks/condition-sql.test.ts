import t from '#tap';
import { type ConditionEnv, compileCondition } from '../../lib/playbooks/condition-sql.js';
import { SqlParams } from '../../lib/sql-params.js';
import { bootstrap, closeDb, db } from '../helpers/stack.js';
import { newId } from './support.js';

// Compiled conditions run by PostgreSQL over three customers that differ in every variable, most
// of all in what is missing (no health row, NULL columns, absent or differently typed custom
// fields, no metric value): what each comparison matches is what docs/playbooks.md promises.
t.teardown(closeDb);
const ws = await bootstrap();
const other = await bootstrap();
const T = ws.tenant_id;
const METRIC = newId();
const SEGMENT = newId();

const ids: Record<string, string> = {};
async function customer(tenant: string, name: string, f: Record<string, unknown>): Promise<string> {
  const [r] = await db()<Array<{ id: string }>>`
    INSERT INTO customers (tenant_id, name, status, arr, owner_email, renewal_date, custom_fields)
    VALUES (${tenant}, ${name}, ${(f.status as string) ?? 'active'}, ${(f.arr as number) ?? null},
      ${(f.owner_email as string) ?? null},
      ${f.renew_in === undefined ? null : db()`(now() AT TIME ZONE 'UTC')::date + ${f.renew_in as number}::int`},
      ${JSON.stringify(f.custom_fields ?? {})}::text::jsonb)
    RETURNING id::text`;
  return r.id;
}
async function health(id: string, score: number, status: string) {
  await db()`INSERT INTO customer_health (customer_id, tenant_id, score, status, dimensions, calculated_at)
    VALUES (${id}, ${T}, ${score}, ${status}, '{}', now())`;
}

ids.A = await customer(T, 'A', {
  arr: 5000,
  owner_email: 'Ann@X.com',
  renew_in: 10,
  custom_fields: { plan: 'pro', seats: 12, sso: true },
});
ids.B = await customer(T, 'B', { status: 'trial', custom_fields: { plan: 5, seats: '12' } });
ids.C = await customer(T, 'C', { status: 'churned', arr: 100, custom_fields: { note: null } });
// Matches everything it can; it is in another workspace, so never in a result.
await customer(other.tenant_id, 'X', { arr: 9999, custom_fields: { plan: 'pro' } });
await health(ids.A, 30, 'at_risk');
await health(ids.C, 80, 'healthy');

const env: ConditionEnv = {
  segments: new Map([
    ['active', { id: SEGMENT, rules: [{ field: 'status', op: 'eq', value: 'active' }], match: 'all' as const }],
  ]),
  metrics: new Map([['logins', METRIC]]),
};
// A has 7, B a NULL value, C none.
const latest: Array<[string, string, number | null]> = [
  [METRIC, ids.A, 7],
  [METRIC, ids.B, null],
  [newId(), ids.C, 7],
];

async function matching(src: string): Promise<string[]> {
  const p = new SqlParams();
  const tenant = p.add(T, 'uuid');
  const rows = latest.map(([m, c, v]) => `(${p.add(m, 'uuid')}, ${p.add(c, 'uuid')}, ${p.add(v, 'float8')})`);
  const predicate = compileCondition(src, env, p);
  const text = `WITH metric_latest (metric_id, customer_id, value) AS (VALUES ${rows.join(', ')})
    SELECT c.name, (${predicate}) AS hit FROM customers c LEFT JOIN customer_health h ON h.customer_id = c.id
    WHERE c.tenant_id = ${tenant} ORDER BY c.name`;
  const out = await db().unsafe<Array<{ name: string; hit: boolean | null }>>(text, p.values as never[]);
  for (const r of out) if (r.hit === null) throw new Error(`NULL for ${r.name}: ${src}`);
  return out.filter((r) => r.hit).map((r) => r.name);
}

const cases: Array<[string, string[]]> = [
  ['health_score < 40', ['A']],
  ['health_score == null', ['B']],
  ['health_score != 30', ['B', 'C']],
  ['not (health_score < 40)', ['B', 'C']],
  ['health_score >= 30 and health_score <= 80', ['A', 'C']],
  ['health_status in ["at_risk", "neutral"]', ['A']],
  ['health_status not in ["at_risk"]', ['B', 'C']],
  ['arr > 1000', ['A']],
  ['arr == null', ['B']],
  ['arr <= 100.00', ['C']],
  ['status != "churned"', ['A', 'B']],
  ['owner_email == "ann@x.COM"', ['A']],
  ['owner_email == null', ['B', 'C']],
  ['days_to_renewal <= 30', ['A']],
  ['days_to_renewal == 10', ['A']],
  ['days_to_renewal == null', ['B', 'C']],
  ['custom_fields.plan == "pro"', ['A']],
  ['custom_fields.plan == 5', ['B']],
  ['custom_fields.plan >= "p"', ['A']],
  ['custom_fields.plan != null', ['A', 'B']],
  ['custom_fields.seats > 10', ['A']],
  ['custom_fields.seats == "12"', ['B']],
  ['custom_fields.sso == true', ['A']],
  ['custom_fields.sso != true', ['B', 'C']],
  ['custom_fields.note == null', ['A', 'B', 'C']],
  ['custom_fields.plan in ["pro", "basic"]', ['A']],
  ['metric.logins > 5', ['A']],
  ['metric.logins == 7', ['A']],
  ['metric.logins != 7', ['B', 'C']],
  ['metric.logins == null', ['B', 'C']],
  ['metric.logins != null', ['A']],
  ['metric.logins in [6, 7]', ['A']],
  ['metric.logins not in [6, 7]', ['B', 'C']],
  ['segment == "Active"', ['A']],
  ['segment != "active"', ['B', 'C']],
  ['(health_score < 40 or arr == null) and not status == "churned"', ['A', 'B']],
  ['not (not (arr > 1000 or metric.logins == null))', ['A', 'B', 'C']],
  ['arr > 1000 or false', ['A']],
  ['arr > 1000 or true', ['A', 'B', 'C']],
  ['(arr == null) and true', ['B']],
  ['not true', []],
  ['false', []],
];

for (const [src, expected] of cases)
  t.test(src, async (t) => {
    t.same(await matching(src), expected);
  });
