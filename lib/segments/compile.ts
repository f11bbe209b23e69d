import { isDate } from '../../schemas/formats.js';
import type { FieldError } from '../problem.js';
import type { SqlParams } from '../sql-params.js';

/**
 * A segment's rules as ONE boolean SQL expression for PostgreSQL over the aliases `c` (customers)
 * and `h` (customer_health, LEFT JOINed: NULL for an unscored customer), so membership of a whole
 * workspace is one statement (the customers list's `segment_id` filter, the customer detail's
 * segments, playbook conditions). Field names map through the table below, never spliced; every
 * value is a parameter.
 *
 * Decisions (docs/playbooks.md "Segments"):
 * - two-valued logic: a missing value (NULL column, no health row, an absent custom field or one
 *   of another JSON type than the rule's value) makes eq, gt, gte, lt, lte, in and contains false
 *   and neq true;
 * - owner_email and email_domain compare case-insensitively (they are addresses), everything
 *   else exactly; contains is a substring test on text;
 * - days_to_renewal counts whole days from today (UTC) to renewal_date, negative once past;
 * - a custom field compares as a number when the rule's value is a number and the stored value is
 *   a JSON number, as text when both are strings, as a boolean when both are booleans;
 * - no rules: every customer (with either match).
 */

export const SEGMENT_OPS = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'contains', 'in'] as const;
export type SegmentOp = (typeof SEGMENT_OPS)[number];

export interface SegmentRule {
  field: string;
  op: SegmentOp;
  value: unknown;
}

export interface SegmentDefinition {
  rules: unknown;
  match: 'all' | 'any';
}

type Kind = 'text' | 'ci_text' | 'number' | 'date';

/** Fields of a customer a rule may name (besides custom_fields.<key>), with their SQL and kind. */
const FIELDS: Record<string, { sql: string; kind: Kind; values?: readonly string[] }> = {
  status: { sql: 'c.status', kind: 'text', values: ['active', 'trial', 'churned', 'paused'] },
  arr: { sql: 'c.arr', kind: 'number' },
  owner_email: { sql: 'c.owner_email', kind: 'ci_text' },
  email_domain: { sql: 'c.email_domain', kind: 'ci_text' },
  renewal_date: { sql: 'c.renewal_date', kind: 'date' },
  days_to_renewal: { sql: `(c.renewal_date - (now() AT TIME ZONE 'UTC')::date)`, kind: 'number' },
  health_score: { sql: 'h.score', kind: 'number' },
  health_status: { sql: 'h.status', kind: 'text', values: ['healthy', 'neutral', 'at_risk'] },
};

export const SEGMENT_FIELDS = [...Object.keys(FIELDS), 'custom_fields.<key>'];

const ORDERING = new Set(['gt', 'gte', 'lt', 'lte']);
const SQL_OP: Record<string, string> = { eq: '=', neq: '<>', gt: '>', gte: '>=', lt: '<', lte: '<=' };
const MAX_RULES = 50;
const MAX_IN = 100;
const CUSTOM = 'custom_fields.';

const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const scalarOk = (kind: Kind | 'custom', v: unknown): boolean => {
  switch (kind) {
    case 'number':
      return isNum(v);
    case 'date':
      return typeof v === 'string' && isDate(v);
    case 'custom':
      return isNum(v) || typeof v === 'string' || typeof v === 'boolean';
    default:
      return typeof v === 'string';
  }
};

/** The errors of a rules list, each naming `rules[i].<part>`; empty when the list is valid. */
export function segmentRuleErrors(rules: unknown): FieldError[] {
  if (!Array.isArray(rules)) return [{ field: 'rules', code: 'invalid_type', message: 'rules must be an array' }];
  if (rules.length > MAX_RULES) return [{ field: 'rules', code: 'too_many', message: `at most ${MAX_RULES} rules` }];
  const out: FieldError[] = [];
  for (const [i, r] of rules.entries()) {
    const at = `rules[${i}]`;
    if (typeof r !== 'object' || r === null || Array.isArray(r)) {
      out.push({ field: at, code: 'invalid_type', message: 'a rule is an object {field, op, value}' });
      continue;
    }
    const { field, op, value } = r as Record<string, unknown>;
    const custom = typeof field === 'string' && field.startsWith(CUSTOM) && field.length > CUSTOM.length;
    const spec = typeof field === 'string' ? FIELDS[field] : undefined;
    if (!custom && !spec) {
      out.push({
        field: `${at}.field`,
        code: 'unknown_field',
        message: `unknown field ${JSON.stringify(field)}; one of ${SEGMENT_FIELDS.join(', ')}`,
      });
      continue;
    }
    if (typeof op !== 'string' || !(SEGMENT_OPS as readonly string[]).includes(op)) {
      out.push({
        field: `${at}.op`,
        code: 'unknown_op',
        message: `unknown op ${JSON.stringify(op)}; one of ${SEGMENT_OPS.join(', ')}`,
      });
      continue;
    }
    const kind: Kind | 'custom' = spec ? spec.kind : 'custom';
    const bad = (message: string) => out.push({ field: `${at}.value`, code: 'invalid_value', message });
    if (op === 'contains') {
      if (kind === 'number' || kind === 'date') bad(`contains does not apply to ${field}`);
      else if (typeof value !== 'string' || !value) bad('contains needs a non-empty string');
    } else if (op === 'in') {
      if (!Array.isArray(value) || value.length === 0 || value.length > MAX_IN)
        bad(`in needs an array of 1 to ${MAX_IN} values`);
      else if (
        !value.every((v) => scalarOk(kind, v)) ||
        (kind === 'custom' && new Set(value.map((v) => typeof v)).size > 1)
      )
        bad(
          `every value of in must be ${
            kind === 'custom' ? 'of one type (string, number or boolean)' : `a ${kind === 'ci_text' ? 'text' : kind}`
          }`,
        );
    } else if (ORDERING.has(op) && (kind === 'text' || kind === 'ci_text')) {
      bad(`${op} does not apply to ${field}`);
    } else if (ORDERING.has(op) && kind === 'custom' && !isNum(value)) {
      bad(`${op} needs a number`);
    } else if (!scalarOk(kind, value)) {
      bad(
        kind === 'date'
          ? 'a date YYYY-MM-DD'
          : `a ${kind === 'custom' ? 'string, number or boolean' : kind === 'ci_text' ? 'text' : kind} value`,
      );
    }
  }
  return out;
}

/** `cmp` is a SQL comparison that may be NULL; the rule's result never is. */
const decided = (cmp: string, op: string) => `coalesce(${cmp}, ${op === 'neq' ? 'true' : 'false'})`;

function ruleSql(r: SegmentRule, p: SqlParams): string {
  const { op, value } = r;
  if (r.field.startsWith(CUSTOM)) {
    const key = p.add(r.field.slice(CUSTOM.length), 'text');
    const sample = Array.isArray(value) ? value[0] : value;
    const type = typeof sample === 'number' ? 'number' : typeof sample === 'boolean' ? 'boolean' : 'string';
    const cast = type === 'number' ? 'numeric' : type === 'boolean' ? 'boolean' : 'text';
    const expr =
      `(CASE WHEN jsonb_typeof(c.custom_fields -> ${key}) = '${type}' ` +
      `THEN (c.custom_fields ->> ${key})::${cast} END)`;
    if (op === 'contains') return decided(`strpos(${expr}, ${p.add(value, 'text')}) > 0`, op);
    if (op === 'in') return decided(`${expr} = ANY(${p.add(value, `${cast}[]`)})`, op);
    return decided(`${expr} ${SQL_OP[op]} ${p.add(value, cast)}`, op);
  }
  const spec = FIELDS[r.field];
  const cast = spec.kind === 'number' ? 'numeric' : spec.kind === 'date' ? 'date' : 'text';
  const ci = spec.kind === 'ci_text';
  const col = ci ? `lower(${spec.sql})` : spec.sql;
  const val = (v: unknown) => (ci ? `lower(${p.add(v, 'text')})` : p.add(v, cast));
  if (op === 'contains') return decided(`strpos(${col}, ${val(value)}) > 0`, op);
  if (op === 'in') {
    const list = ci ? (value as string[]).map((s) => s.toLowerCase()) : value;
    return decided(`${col} = ANY(${p.add(list, `${cast}[]`)})`, op);
  }
  return decided(`${col} ${SQL_OP[op]} ${val(value)}`, op);
}

/** Thrown for rules that were never validated (stored rules always are). */
export class SegmentRulesError extends Error {
  readonly code = 'invalid_segment_rules';
}

export function compileSegment(def: SegmentDefinition, p: SqlParams): string {
  const errors = segmentRuleErrors(def.rules);
  if (errors.length) throw new SegmentRulesError(errors.map((e) => `${e.field}: ${e.message}`).join('; '));
  const rules = def.rules as SegmentRule[];
  if (!rules.length) return 'true';
  return `(${rules.map((r) => ruleSql(r, p)).join(def.match === 'any' ? ' OR ' : ' AND ')})`;
}
