import t from '#tap';
import {
  ExpressionError,
  MAX_COMPARISONS,
  MAX_DEPTH,
  MAX_EXPRESSION_LENGTH,
  namesIn,
  parseExpression,
} from '../../lib/playbooks/expression.js';

// The condition language's parser without any server: the AST of valid conditions, and for each
// invalid one its code, its 1-based position and what the message says was expected.

/** The error a condition throws (or a failure when it parses). */
function errorOf(src: string): ExpressionError {
  try {
    parseExpression(src);
  } catch (err) {
    if (err instanceof ExpressionError) return err;
    throw err;
  }
  throw new Error(`parsed: ${src}`);
}

t.test('comparisons, values and variables', async (t) => {
  t.same(parseExpression('health_score < 40'), {
    kind: 'compare',
    variable: { name: 'health_score' },
    op: '<',
    value: { type: 'number', value: 40 },
    pos: 1,
  });
  t.match(parseExpression('arr >= 1.5e4'), { variable: { name: 'arr' }, op: '>=', value: { value: 15000 } });
  t.match(parseExpression('days_to_renewal <= -3'), { op: '<=', value: { value: -3 } });
  t.match(parseExpression("health_status == 'at_risk'"), { value: { type: 'string', value: 'at_risk' } });
  t.match(parseExpression('status != "churned"'), { op: '!=' });
  t.match(parseExpression('owner_email == null'), { value: { type: 'null', value: null } });
  t.match(parseExpression('custom_fields.plan == "pro"'), { variable: { name: 'custom_fields', key: 'plan' } });
  t.match(parseExpression('custom_fields."Plan tier" == "pro"'), { variable: { key: 'Plan tier' } });
  t.match(parseExpression('custom_fields.sso-enabled == true'), {
    variable: { key: 'sso-enabled' },
    value: { type: 'boolean', value: true },
  });
  t.match(parseExpression('metric.weekly_logins > 5'), { variable: { name: 'metric', slug: 'weekly_logins' } });
  t.match(parseExpression('segment == "Enterprise"'), { variable: { name: 'segment' } });
  t.match(parseExpression('"a\\"b\\\\c" == custom_fields.x'), { value: { value: 'a"b\\c' } });
});

t.test('a value on the left is turned around', async (t) => {
  t.match(parseExpression('40 > health_score'), { variable: { name: 'health_score' }, op: '<', value: { value: 40 } });
  t.match(parseExpression('10 <= arr'), { op: '>=' });
});

t.test('and binds tighter than or; not and parentheses nest', async (t) => {
  const e = parseExpression('health_score < 40 or arr > 10 and status == "active"');
  t.match(e, { kind: 'or', items: [{ kind: 'compare' }, { kind: 'and', items: [{}, {}] }] });
  const f = parseExpression('not (health_score < 40 or segment == "A") and not arr > 5');
  t.match(f, {
    kind: 'and',
    items: [
      { kind: 'not', item: { kind: 'or' } },
      { kind: 'not', item: { kind: 'compare' } },
    ],
  });
  // Chains are flat lists, not nested pairs.
  const g = parseExpression(Array.from({ length: 50 }, (_, i) => `arr > ${i}`).join(' and '));
  t.equal(g.kind === 'and' && g.items.length, 50);
});

t.test('in and not in', async (t) => {
  t.match(parseExpression('health_status in ["at_risk", "neutral"]'), {
    kind: 'in',
    negated: false,
    values: [{ value: 'at_risk' }, { value: 'neutral' }],
  });
  t.match(parseExpression('status not in ["churned"]'), { kind: 'in', negated: true });
  t.match(parseExpression('metric.logins in [1, 2, 3]'), { values: [{ value: 1 }, { value: 2 }, { value: 3 }] });
});

t.test('names a condition refers to', async (t) => {
  const n = namesIn(parseExpression('segment == "Enterprise" or segment in ["SMB", "enterprise"] or metric.a > 1'));
  t.same(
    [...n.segments],
    [
      ['enterprise', 1],
      ['smb', 28],
    ],
  );
  t.same([...n.metrics], [['a', 64]]);
});

t.test('syntax errors give the position and what was expected', async (t) => {
  const cases: Array<[string, number, RegExp]> = [
    ['', 1, /Expected a condition, found the end of the expression/],
    ['health_score <', 15, /Expected a variable or a value, found the end/],
    ['health_score = 40', 14, /Expected == \(a single = is not an operator\) at position 14/],
    ['health_score 40', 14, /Expected a comparison operator .* found "40"/],
    ['(health_score < 40', 19, /Expected "\)"/],
    ['health_score < 40)', 18, /unbalanced "\)"/],
    ['health_score < 40 and', 22, /found the end/],
    ['arr > 5 arr < 10', 9, /Expected "and", "or" or the end, found "arr"/],
    ['status == "active', 11, /Unterminated string/],
    ['status == "a\\q"', 13, /Unknown escape/],
    ['arr > 5 # comment', 9, /Unexpected character "#"/],
    ['status in "active"', 11, /Expected "\[" to start the list/],
    ['status in ["active" "trial"]', 21, /Expected "," or "\]"/],
    ['status in []', 12, /Expected a value/],
    ['status in [null]', 12, /cannot hold null/],
    ['custom_fields.x in [1, "2"]', 24, /one type: number expected/],
    ['arr in [1, "2"]', 12, /arr is a number/],
    ['health_score < 40 and not', 26, /found the end/],
    ['arr > health_score', 1, /a variable on one side and a value on the other/],
    ['5 > 4', 1, /a variable on one side/],
    ['health_score == "high"', 17, /health_score is a number/],
    ['health_status == "atrisk"', 18, /health_status is one of healthy, neutral, at_risk; "atrisk" is not/],
    ['status < "b"', 10, /status is compared with ==, != or in, not </],
    ['arr < null', 7, /cannot compare with null/],
    ['segment == null', 12, /segment compares with a segment name/],
    ['custom_fields.x > true', 19, /not booleans/],
    ['custom_fields. == 1', 15, /Expected a key after "custom_fields\."/],
    ['metric == 1', 1, /Expected metric\.<slug>/],
    ['status not "active"', 12, /Expected "in" after "not"/],
    ['and arr > 1', 1, /Expected a variable or a value, found "and"/],
    ['1e999 < arr', 1, /out of range/],
  ];
  for (const [src, pos, message] of cases) {
    const e = errorOf(src);
    t.equal(e.code, 'invalid_expression', src);
    t.equal(e.position, pos, `${src}: position`);
    t.match(e.message, message, src);
    t.match(e.message, new RegExp(`position ${pos}\\b`), `${src}: the message says where`);
  }
});

t.test('unknown variables', async (t) => {
  for (const [src, pos, name] of [
    ['healthscore < 40', 1, 'healthscore'],
    ['arr > 5 and plan == "pro"', 13, 'plan'],
    ['custom.plan == "pro"', 1, 'custom.plan'],
  ] as const) {
    const e = errorOf(src);
    t.equal(e.code, 'unknown_variable', src);
    t.equal(e.position, pos, src);
    t.match(e.message, `Unknown variable "${name}" at position ${pos}`);
    t.match(e.message, /known: health_score, arr, days_to_renewal/);
  }
});

t.test('hostile input is bounded, not a stack overflow', async (t) => {
  t.match(errorOf('x'.repeat(MAX_EXPRESSION_LENGTH + 1)), {
    code: 'invalid_expression',
    position: MAX_EXPRESSION_LENGTH + 1,
  });
  const deep = `${'('.repeat(MAX_DEPTH + 1)}arr > 1${')'.repeat(MAX_DEPTH + 1)}`;
  t.match(errorOf(deep), { code: 'invalid_expression', position: MAX_DEPTH + 1, message: /Nesting deeper than 32/ });
  t.ok(parseExpression(`${'('.repeat(MAX_DEPTH)}arr > 1${')'.repeat(MAX_DEPTH)}`), 'the limit itself is accepted');
  t.match(errorOf(`${'not '.repeat(500)}arr > 1`), { message: /Nesting deeper/ });
  t.match(errorOf('('.repeat(3000)), { message: /Nesting deeper/ });
  const many = Array.from({ length: MAX_COMPARISONS + 1 }, () => 'arr>1').join(' or ');
  t.match(errorOf(many), { message: /More than 100 comparisons/ });
  t.match(errorOf(`arr in [${Array.from({ length: 101 }, (_, i) => i).join(',')}]`), { message: /at most 100 values/ });
});

t.test('true and false stand alone as conditions', async (t) => {
  t.same(parseExpression('true'), { kind: 'const', value: true });
  t.match(parseExpression('health_score < 40 or false'), {
    kind: 'or',
    items: [{ kind: 'compare' }, { kind: 'const', value: false }],
  });
  t.same(parseExpression('not true'), { kind: 'not', item: { kind: 'const', value: true } });
  t.match(parseExpression('(arr == 1) and true'), { kind: 'and', items: [{ kind: 'compare' }, { kind: 'const' }] });
  t.match(parseExpression('true == custom_fields.sso'), { kind: 'compare', value: { type: 'boolean', value: true } });
  t.match(parseExpression('custom_fields.sso in [true]'), { kind: 'in' });
  t.match(errorOf('true arr'), { code: 'invalid_expression', position: 6 });
  t.match(errorOf('null or true'), { code: 'invalid_expression' });
});
