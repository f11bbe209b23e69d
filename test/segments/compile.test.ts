import { randomUUID } from 'node:crypto';
import t from '#tap';
import { compileSegment, segmentRuleErrors, type SegmentRule } from '../../lib/segments/compile.js';
import { SqlParams } from '../../lib/sql-params.js';
import { closeDb, db } from '../helpers/stack.js';

// Segment rules compile to one SQL predicate; here it runs against real PostgreSQL rows so the
// membership a user sees is checked, including missing values and custom fields of other types.

t.teardown(closeDb);

interface Row {
  name: string;
  status: string;
  arr: number | null;
  owner_email: string | null;
  renewal_in_days: number | null;
  custom_fields: Record<string, unknown>;
  health: { score: number; status: string } | null;
}

const ROWS: Row[] = [
  {
    name: 'acme',
    status: 'active',
    arr: 120000,
    owner_email: 'Ann@Example.com',
    renewal_in_days: 20,
    custom_fields: { tier: 'gold', seats: 50, beta: true },
    health: { score: 35, status: 'at_risk' },
  },
  {
    name: 'globex',
    status: 'trial',
    arr: 5000,
    owner_email: 'bob@example.com',
    renewal_in_days: 200,
    custom_fields: { tier: 'silver', seats: '50' },
    health: { score: 80, status: 'healthy' },
  },
  {
    name: 'initech',
    status: 'churned',
    arr: null,
    owner_email: null,
    renewal_in_days: null,
    custom_fields: {},
    health: null,
  },
  {
    name: 'umbrella',
    status: 'active',
    arr: 60000,
    owner_email: 'ann@example.com',
    renewal_in_days: -3,
    custom_fields: { seats: 10 },
    health: { score: 55, status: 'neutral' },
  },
];

t.test('rules select exactly the customers a user expects', async (t) => {
  const sql = db();
  const tenant = randomUUID();
  await sql`INSERT INTO tenants (id, name) VALUES (${tenant}, 'segments compile test')`;
  t.teardown(async () => {
    await sql`DELETE FROM tenants WHERE id = ${tenant}`;
  });
  for (const r of ROWS) {
    const [c] = await sql<Array<{ id: string }>>`
      INSERT INTO customers (tenant_id, name, status, arr, owner_email, renewal_date, custom_fields)
      VALUES (${tenant}, ${r.name}, ${r.status}, ${r.arr}, ${r.owner_email},
        ${r.renewal_in_days === null ? null : sql`(now() AT TIME ZONE 'UTC')::date + ${r.renewal_in_days}::int`},
        ${JSON.stringify(r.custom_fields)}::text::jsonb)
      RETURNING id`;
    if (r.health)
      await sql`INSERT INTO customer_health (customer_id, tenant_id, score, status, dimensions, calculated_at)
        VALUES (${c.id}, ${tenant}, ${r.health.score}, ${r.health.status}, '{}', now())`;
  }
  const members = async (rules: SegmentRule[], match: 'all' | 'any' = 'all') => {
    const p = new SqlParams(2);
    const where = compileSegment({ rules, match }, p);
    const rows = await sql.unsafe<Array<{ name: string }>>(
      `SELECT c.name FROM customers c LEFT JOIN customer_health h ON h.customer_id = c.id
       WHERE c.tenant_id = $1 AND ${where} ORDER BY c.name`,
      [tenant, ...p.values] as never[],
    );
    return rows.map((r) => r.name);
  };
  const cases: Array<[string, SegmentRule[], string[], ('all' | 'any')?]> = [
    ['no rules: everyone', [], ['acme', 'globex', 'initech', 'umbrella']],
    ['status eq', [{ field: 'status', op: 'eq', value: 'active' }], ['acme', 'umbrella']],
    ['status in', [{ field: 'status', op: 'in', value: ['trial', 'churned'] }], ['globex', 'initech']],
    ['arr gte (no arr never matches)', [{ field: 'arr', op: 'gte', value: 60000 }], ['acme', 'umbrella']],
    ['arr neq (no arr matches)', [{ field: 'arr', op: 'neq', value: 5000 }], ['acme', 'initech', 'umbrella']],
    ['owner_email ignores case', [{ field: 'owner_email', op: 'eq', value: 'ANN@example.COM' }], ['acme', 'umbrella']],
    ['health_score lt: unscored is not below', [{ field: 'health_score', op: 'lt', value: 60 }], ['acme', 'umbrella']],
    ['health_status', [{ field: 'health_status', op: 'eq', value: 'healthy' }], ['globex']],
    [
      'days_to_renewal window',
      [
        { field: 'days_to_renewal', op: 'lte', value: 30 },
        { field: 'days_to_renewal', op: 'gte', value: 0 },
      ],
      ['acme'],
    ],
    ['custom text', [{ field: 'custom_fields.tier', op: 'eq', value: 'gold' }], ['acme']],
    [
      'custom number: a string "50" is not the number 50',
      [{ field: 'custom_fields.seats', op: 'gte', value: 50 }],
      ['acme'],
    ],
    ['custom boolean', [{ field: 'custom_fields.beta', op: 'eq', value: true }], ['acme']],
    ['custom contains', [{ field: 'custom_fields.tier', op: 'contains', value: 'ilv' }], ['globex']],
    [
      'match any',
      [
        { field: 'status', op: 'eq', value: 'churned' },
        { field: 'arr', op: 'gt', value: 100000 },
      ],
      ['acme', 'initech'],
      'any',
    ],
    [
      'a value that looks like SQL stays a value',
      [{ field: 'custom_fields.tier', op: 'eq', value: "gold' OR true --" }],
      [],
    ],
  ];
  for (const [name, rules, expected, match] of cases) t.same(await members(rules, match), expected, name);
});

t.test('bad rules are named by their place', async (t) => {
  const codes = (rules: unknown) => segmentRuleErrors(rules).map((e) => `${e.field}:${e.code}`);
  t.same(codes('x'), ['rules:invalid_type']);
  t.same(codes([{ field: 'plan', op: 'eq', value: 'x' }]), ['rules[0].field:unknown_field']);
  t.same(codes([{ field: 'arr', op: 'like', value: 1 }]), ['rules[0].op:unknown_op']);
  t.same(codes([{ field: 'arr', op: 'gt', value: '10' }]), ['rules[0].value:invalid_value']);
  t.same(codes([{ field: 'status', op: 'gt', value: 'a' }]), ['rules[0].value:invalid_value']);
  t.same(codes([{ field: 'renewal_date', op: 'lt', value: '2026-02-30' }]), ['rules[0].value:invalid_value']);
  t.same(codes([{ field: 'status', op: 'in', value: [] }]), ['rules[0].value:invalid_value']);
  t.same(codes([{ field: 'custom_fields.x', op: 'in', value: ['a', 1] }]), ['rules[0].value:invalid_value']);
  t.same(codes([{ field: 'custom_fields.', op: 'eq', value: 'a' }]), ['rules[0].field:unknown_field']);
  t.same(codes([{ field: 'status', op: 'eq', value: 'active' }, null]), ['rules[1]:invalid_type']);
  t.same(codes([{ field: 'renewal_date', op: 'gte', value: '2026-02-28' }]), []);
});
