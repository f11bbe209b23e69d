import { compileSegment } from '../segments/compile.js';
import type { SqlParams } from '../sql-params.js';
import { type CompareOp, type Expr, ExpressionError, type Literal, namesIn, parseExpression } from './expression.js';

/**
 * A parsed condition as ONE boolean SQL expression for PostgreSQL, evaluated for a whole workspace
 * in one statement. It reads the aliases `c` (customers), `h` (customer_health, LEFT JOINed, so
 * NULL for an unscored customer) and the relation `metric_latest (metric_id, customer_id, value)`
 * that the statement provides. Every value of the condition is a parameter of `p`; the text holds
 * only constants of this file and the placeholders.
 *
 * Logic is two-valued, never SQL's unknown: each comparison is true or false. A missing value
 * (NULL column, no health row, no metric value, an absent custom field or one of another JSON type
 * than the value compared with) makes ==, <, <=, >, >= and `in` false, and != and `not in` true;
 * `== null` is true exactly when the value is missing. So `not (x == 1)` always equals `x != 1`,
 * and `health_score < 40` is false for an unscored customer while `health_score == null` is true.
 */

export interface SegmentDef {
  id: string;
  rules: unknown;
  match: 'all' | 'any';
}

export interface ConditionEnv {
  /** The workspace's segments by lower-cased name. */
  segments: ReadonlyMap<string, SegmentDef>;
  /** Live (not deleted) metrics by slug → metric id. */
  metrics: ReadonlyMap<string, string>;
}

const SQL_OP: Record<CompareOp, string> = { '==': '=', '!=': '<>', '<': '<', '<=': '<=', '>': '>', '>=': '>=' };

/** Today in UTC, the day days_to_renewal counts from (as the customers list's renewal filter). */
const TODAY = `(now() AT TIME ZONE 'UTC')::date`;

const unknownSegment = (name: string, pos: number) =>
  new ExpressionError('unknown_variable', pos, `Unknown segment ${JSON.stringify(name)} at position ${pos}`);
const unknownMetric = (slug: string, pos: number) =>
  new ExpressionError('unknown_variable', pos, `Unknown metric "metric.${slug}" at position ${pos}`);

/** Segment ids and metric ids a condition refers to (stored in playbooks.segment_ids / metric_ids). */
export function conditionRefs(expr: Expr | string, env: ConditionEnv): { segment_ids: string[]; metric_ids: string[] } {
  const e = typeof expr === 'string' ? parseExpression(expr) : expr;
  const names = namesIn(e);
  const segment_ids: string[] = [];
  const metric_ids: string[] = [];
  for (const [name, pos] of names.segments) {
    const s = env.segments.get(name);
    if (!s) throw unknownSegment(name, pos);
    if (!segment_ids.includes(s.id)) segment_ids.push(s.id);
  }
  for (const [slug, pos] of names.metrics) {
    const id = env.metrics.get(slug);
    if (!id) throw unknownMetric(slug, pos);
    if (!metric_ids.includes(id)) metric_ids.push(id);
  }
  return { segment_ids, metric_ids };
}

/** The condition as a boolean SQL expression that is never NULL. */
export function compileCondition(expr: Expr | string, env: ConditionEnv, p: SqlParams): string {
  const e = typeof expr === 'string' ? parseExpression(expr) : expr;
  conditionRefs(e, env);
  return compile(e, env, p);
}

function compile(e: Expr, env: ConditionEnv, p: SqlParams): string {
  switch (e.kind) {
    case 'and':
    case 'or':
      return `(${e.items.map((x) => compile(x, env, p)).join(e.kind === 'and' ? ' AND ' : ' OR ')})`;
    case 'not':
      return `(NOT ${compile(e.item, env, p)})`;
    case 'const':
      return e.value ? 'true' : 'false';
    case 'compare':
      return atom(e, env, p);
    case 'in':
      return atom(e, env, p);
  }
}

type SegmentInput = Parameters<typeof compileSegment>[0];
type Atom = Extract<Expr, { kind: 'compare' | 'in' }>;

/** One comparison; `negative` ones (!=, not in) are the negation of their positive form. */
function atom(e: Atom, env: ConditionEnv, p: SqlParams): string {
  const v = e.variable;
  if (v.name === 'segment') return segmentAtom(e, env, p);
  if (v.name === 'metric') return metricAtom(e, env.metrics.get(v.slug)!, p);
  const isNull = e.kind === 'compare' && e.value.type === 'null';
  const negative = e.kind === 'in' ? e.negated : e.op === '!=';
  const first = e.kind === 'in' ? e.values[0] : e.value;
  const x = valueSql(e, first, p);
  let test: string;
  if (isNull) test = `(${x}) IS NULL`;
  else if (e.kind === 'in') test = `coalesce(${x} = ANY(${listParam(e, p)}), false)`;
  else test = `coalesce(${x} ${SQL_OP[e.op === '!=' ? '==' : e.op]} ${param(e, e.value, p)}, false)`;
  return negative ? `(NOT ${test})` : test;
}

/** The variable as a typed SQL value (NULL when missing), read as the compared value's type. */
function valueSql(e: Atom, value: Literal, p: SqlParams): string {
  const v = e.variable;
  switch (v.name) {
    case 'health_score':
      return 'h.score';
    case 'health_status':
      return 'h.status';
    case 'arr':
      return 'c.arr';
    case 'status':
      return 'c.status';
    case 'owner_email':
      return 'lower(c.owner_email)';
    case 'days_to_renewal':
      return `(c.renewal_date - ${TODAY})`;
    case 'open_alerts':
      // Open and acknowledged alerts of the customer (never NULL: 0 when it has none).
      return `(SELECT count(*) FROM alerts al WHERE al.customer_id = c.id AND al.status <> 'resolved')`;
    case 'custom_fields': {
      const k = p.add(v.key, 'text');
      const field = `c.custom_fields->${k}`;
      if (value.type === 'number') return `CASE WHEN jsonb_typeof(${field}) = 'number' THEN (${field})::float8 END`;
      if (value.type === 'boolean') return `CASE WHEN jsonb_typeof(${field}) = 'boolean' THEN (${field})::boolean END`;
      if (value.type === 'string') return `CASE WHEN jsonb_typeof(${field}) = 'string' THEN c.custom_fields->>${k} END`;
      // == null: an absent key and a JSON null are both missing.
      return `CASE WHEN jsonb_typeof(${field}) <> 'null' THEN ${field} END`;
    }
    default:
      throw new Error(`no SQL for ${v.name}`);
  }
}

/** The SQL type a variable's values are compared as. */
function castOf(e: Atom, value: Literal): string {
  const name = e.variable.name;
  if (name === 'arr') return 'numeric';
  if (value.type === 'number') return 'float8';
  if (value.type === 'boolean') return 'boolean';
  return 'text';
}

/** Text is compared by code point (COLLATE "C"), the same whatever the database's locale. */
function param(e: Atom, value: Literal, p: SqlParams): string {
  const cast = castOf(e, value);
  const v =
    e.variable.name === 'owner_email' && typeof value.value === 'string' ? value.value.toLowerCase() : value.value;
  const ph = p.add(cast === 'numeric' || cast === 'float8' ? String(v) : v, cast);
  return cast === 'text' ? `${ph} COLLATE "C"` : ph;
}

function listParam(e: Extract<Expr, { kind: 'in' }>, p: SqlParams): string {
  const cast = castOf(e, e.values[0]);
  const lower = e.variable.name === 'owner_email';
  const values = e.values.map((l) =>
    typeof l.value === 'string'
      ? lower
        ? l.value.toLowerCase()
        : l.value
      : cast === 'boolean'
        ? l.value
        : String(l.value),
  );
  return p.add(values, `${cast}[]`);
}

function segmentAtom(e: Atom, env: ConditionEnv, p: SqlParams): string {
  const names = e.kind === 'in' ? e.values : [e.value];
  const parts = names.map((n) => {
    const s = env.segments.get(String(n.value).toLowerCase())!;
    return `coalesce((${compileSegment({ rules: s.rules, match: s.match } as SegmentInput, p)}), false)`;
  });
  const any = parts.length === 1 ? parts[0] : `(${parts.join(' OR ')})`;
  const negative = e.kind === 'in' ? e.negated : e.op === '!=';
  return negative ? `(NOT ${any})` : any;
}

/**
 * A metric's latest value as membership in metric_latest, not a correlated lookup: an uncorrelated
 * `c.id IN (SELECT …)` is computed once and hashed, linear in the workspace's size whatever
 * indexes the relation has. Customers without a (non-NULL) value are in no positive set.
 */
function metricAtom(e: Atom, metricId: string, p: SqlParams): string {
  const id = p.add(metricId, 'uuid');
  const having = (cond: string) =>
    `coalesce(c.id IN (SELECT ml.customer_id FROM metric_latest ml WHERE ml.metric_id = ${id} AND ${cond}), false)`;
  if (e.kind === 'in') {
    const set = having(
      `ml.value = ANY(${p.add(
        e.values.map((l) => String(l.value)),
        'float8[]',
      )})`,
    );
    return e.negated ? `(NOT ${set})` : set;
  }
  if (e.value.type === 'null') {
    const has = having('ml.value IS NOT NULL');
    return e.op === '==' ? `(NOT ${has})` : has;
  }
  const op = e.op === '!=' ? '=' : SQL_OP[e.op];
  const set = having(`ml.value ${op} ${p.add(String(e.value.value), 'float8')}`);
  return e.op === '!=' ? `(NOT ${set})` : set;
}
