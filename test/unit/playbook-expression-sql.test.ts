import t from '#tap';
import { type ConditionEnv, compileCondition, conditionRefs } from '../../lib/playbooks/condition-sql.js';
import { ExpressionError } from '../../lib/playbooks/expression.js';
import { compileSegment } from '../../lib/segments/compile.js';
import { SqlParams } from '../../lib/sql-params.js';

// The condition compiler without any server: the SQL text for each kind of comparison, the values
// only ever as parameters, unknown segments and metrics, the ids a condition refers to. The same
// SQL run against PostgreSQL over real rows: test/playbooks/condition-sql.test.ts.

const SEG = { id: '0192f0c4-8a55-7b3e-9d1c-00000000000a', rules: [{ field: 'status', op: 'eq', value: 'active' }] };
const SEG2 = { id: '0192f0c4-8a55-7b3e-9d1c-00000000000b', rules: [{ field: 'arr', op: 'gt', value: 1000 }] };
const M1 = '0192f0c4-8a55-7b3e-9d1c-0000000000f1';
const env: ConditionEnv = {
  segments: new Map([
    ['enterprise', { ...SEG, match: 'all' as const }],
    ['big', { ...SEG2, match: 'any' as const }],
  ]),
  metrics: new Map([['weekly_logins', M1]]),
};

function compiled(src: string): { text: string; values: unknown[] } {
  const p = new SqlParams();
  return { text: compileCondition(src, env, p), values: p.values };
}

t.test('columns and NULL semantics of each comparison', async (t) => {
  t.same(compiled('health_score < 40'), { text: 'coalesce(h.score < $1::float8, false)', values: ['40'] });
  t.same(compiled('health_score == null'), { text: '(h.score) IS NULL', values: [] });
  t.same(compiled('health_score != null'), { text: '(NOT (h.score) IS NULL)', values: [] });
  t.same(compiled('health_score != 50'), { text: '(NOT coalesce(h.score = $1::float8, false))', values: ['50'] });
  t.same(compiled('arr >= 1000.5'), { text: 'coalesce(c.arr >= $1::numeric, false)', values: ['1000.5'] });
  t.same(compiled('health_status == "at_risk"'), {
    text: `coalesce(h.status = $1::text COLLATE "C", false)`,
    values: ['at_risk'],
  });
  t.same(compiled('owner_email == "Ann@Example.com"'), {
    text: `coalesce(lower(c.owner_email) = $1::text COLLATE "C", false)`,
    values: ['ann@example.com'],
  });
  t.same(compiled('days_to_renewal <= 30'), {
    text: `coalesce((c.renewal_date - (now() AT TIME ZONE 'UTC')::date) <= $1::float8, false)`,
    values: ['30'],
  });
  t.same(compiled('status not in ["churned", "paused"]'), {
    text: '(NOT coalesce(c.status = ANY($1::text[]), false))',
    values: [['churned', 'paused']],
  });
});

t.test('custom fields are read as the type of the value compared with', async (t) => {
  const n = compiled('custom_fields.seats > 10');
  t.equal(
    n.text,
    `coalesce(CASE WHEN jsonb_typeof(c.custom_fields->$1::text) = 'number' THEN (c.custom_fields->$1::text)::float8 END > $2::float8, false)`,
  );
  t.same(n.values, ['seats', '10']);
  t.match(compiled('custom_fields.plan == "pro"').text, `= 'string' THEN c.custom_fields->>$1::text END = $2::text`);
  t.match(
    compiled('custom_fields.sso == true').text,
    `= 'boolean' THEN (c.custom_fields->$1::text)::boolean END = $2::boolean`,
  );
  t.same(compiled('custom_fields.sso == true').values, ['sso', true]);
  t.equal(
    compiled('custom_fields.x == null').text,
    `(CASE WHEN jsonb_typeof(c.custom_fields->$1::text) <> 'null' THEN c.custom_fields->$1::text END) IS NULL`,
  );
  t.same(compiled('custom_fields."it\'s" in [1, 2]').values, ["it's", ['1', '2']]);
});

t.test('metrics are membership in metric_latest', async (t) => {
  const sub = (cond: string) =>
    `coalesce(c.id IN (SELECT ml.customer_id FROM metric_latest ml WHERE ml.metric_id = $1::uuid AND ${cond}), false)`;
  t.same(compiled('metric.weekly_logins > 5'), { text: sub('ml.value > $2::float8'), values: [M1, '5'] });
  t.same(compiled('metric.weekly_logins != 5'), { text: `(NOT ${sub('ml.value = $2::float8')})`, values: [M1, '5'] });
  t.same(compiled('metric.weekly_logins == null'), { text: `(NOT ${sub('ml.value IS NOT NULL')})`, values: [M1] });
  t.same(compiled('metric.weekly_logins in [1, 2]'), {
    text: sub('ml.value = ANY($2::float8[])'),
    values: [M1, ['1', '2']],
  });
});

t.test('segments inline their rules', async (t) => {
  const seg = (def: { rules: unknown; match: 'all' | 'any' }, first: number) => {
    const p = new SqlParams(first);
    return { text: compileSegment(def as never, p), values: p.values };
  };
  const a = seg({ rules: SEG.rules, match: 'all' }, 1);
  t.same(compiled('segment == "Enterprise"'), { text: `coalesce((${a.text}), false)`, values: a.values });
  t.same(compiled('segment != "ENTERPRISE"'), { text: `(NOT coalesce((${a.text}), false))`, values: a.values });
  const b = seg({ rules: SEG2.rules, match: 'any' }, 1 + a.values.length);
  t.same(compiled('segment in ["enterprise", "Big"]'), {
    text: `(coalesce((${a.text}), false) OR coalesce((${b.text}), false))`,
    values: [...a.values, ...b.values],
  });
});

t.test('and, or, not compose; the text holds no value', async (t) => {
  const hostile = `x'); DROP TABLE customers; --`;
  const src = `not (health_score < 40 or custom_fields.note == "${hostile}") and status == "active"`;
  const r = compiled(src);
  t.equal(
    r.text,
    '((NOT (coalesce(h.score < $1::float8, false) OR ' +
      `coalesce(CASE WHEN jsonb_typeof(c.custom_fields->$2::text) = 'string' THEN c.custom_fields->>$2::text END = $3::text COLLATE "C", false))) AND ` +
      `coalesce(c.status = $4::text COLLATE "C", false))`,
  );
  t.same(r.values, ['40', 'note', hostile, 'active']);
  t.notMatch(r.text, 'DROP');
  t.notMatch(compiled('custom_fields."a\'b" == 1').text, "a'b");
});

t.test('unknown segments and metrics; the ids referred to', async (t) => {
  const err = (src: string) => {
    try {
      compileCondition(src, env, new SqlParams());
    } catch (e) {
      return e as ExpressionError;
    }
    throw new Error('compiled');
  };
  t.match(err('arr > 1 and segment == "Nope"'), {
    code: 'unknown_variable',
    position: 13,
    message: 'Unknown segment "nope" at position 13',
  });
  t.match(err('metric.unknown_slug > 1'), { code: 'unknown_variable', position: 1, message: /metric\.unknown_slug/ });
  t.ok(err('healthscore > 1') instanceof ExpressionError);
  t.same(conditionRefs('segment in ["big", "Enterprise"] or metric.weekly_logins > 1 or segment == "BIG"', env), {
    segment_ids: [SEG2.id, SEG.id],
    metric_ids: [M1],
  });
  t.same(conditionRefs('arr > 1', env), { segment_ids: [], metric_ids: [] });
});

t.test('numbering continues after the placeholders a statement already has', async (t) => {
  const p = new SqlParams(3);
  t.equal(compileCondition('arr > 1', env, p), 'coalesce(c.arr > $3::numeric, false)');
});
