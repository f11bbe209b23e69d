import { RESERVED_EVENT_NAMES } from '../../schemas/events.js';
import type { Calculation, MetricDefinition, MetricFilter } from '../../schemas/core/metrics.js';
import { chTenant, date, dateTime, num, str, uuid } from './literal.js';
import { startsAtMidnight, windowPeriod, type Period } from './window.js';

/**
 * One metric definition → one ClickHouse query returning `customer_id, value` (Float64 or NULL),
 * one row per customer with matching events (GROUP BY customer_id), or a single row with
 * customer_id NULL for grain `portfolio`. Pure: no I/O. The core API's test query and the
 * materializer run the same SQL. Every user value passes through ./literal.ts; table and
 * column names are constants of this file.
 *
 * Decisions (docs/metrics.md):
 * - property filters read `prop_values[indexOf(prop_keys, name)]`: an absent key is '' there, so
 *   a filter on an absent property matches only with `neq`;
 * - numbers compare as numbers (`toFloat64OrNull`; a non-numeric value matches no gt/gte/lt/lte);
 *   `in` and string `eq`/`neq` compare text;
 * - count and exists without filters over a window starting at a UTC midnight (calendar windows)
 *   read the daily rollup csp.usage_daily_names, everything else csp.events;
 * - events the service generates (surface 'system') count only for metrics over a generated event.
 */

export interface CompileOptions {
  tenantId: string;
  /** 'all' (default): every customer with events; a list restricts the query to those customers. */
  customerIds?: string[] | 'all';
  now: Date;
  database?: string;
}

export interface CompiledMetric {
  sql: string;
  period: Period;
  /** Which table the query reads. */
  source: 'rollup' | 'events';
  /** The value of a customer without any row: no matching event. */
  empty: number | null;
}

const EVENT_COLUMNS: Record<string, string> = {
  user_id: 'user_id',
  product_id: 'product_id',
  product_code: 'product_code',
  // LowCardinality: converted so that every function sees a plain String on ClickHouse 18.16.
  external_source: 'toString(external_source)',
};

export const EMPTY: Record<Calculation, number | null> = {
  count: 0,
  sum: 0,
  distinct_count: 0,
  exists: 0,
  avg: null,
  max: null,
  last_value: null,
};

export const prop = (name: string) => `prop_values[indexOf(prop_keys, ${str(name)})]`;
export const numeric = (expr: string) => `toFloat64OrNull(${expr})`;
/** Event order: seconds and milliseconds in one sortable number. */
export const ORDER = '(toUInt64(ts) * 1000 + ts_ms)';
const AND = '\n  AND ';

export class CompileError extends Error {
  readonly code = 'invalid_definition';
}

function fieldExpr(field: string): string {
  if (field.startsWith('properties.') && field.length > 'properties.'.length)
    return prop(field.slice('properties.'.length));
  const col = EVENT_COLUMNS[field];
  if (!col) throw new CompileError(`unknown filter field ${field}`);
  return col;
}

export function filterSql(f: MetricFilter): string {
  const e = fieldExpr(f.field);
  const v = f.value;
  const text = (x: unknown) => str(String(x));
  switch (f.op) {
    case 'eq':
      return typeof v === 'number' ? `${numeric(e)} = ${num(v)}` : `${e} = ${text(v)}`;
    case 'neq':
      return typeof v === 'number' ? `(isNull(${numeric(e)}) OR ${numeric(e)} != ${num(v)})` : `${e} != ${text(v)}`;
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte': {
      if (typeof v !== 'number') throw new CompileError(`${f.op} needs a number`);
      const op = { gt: '>', gte: '>=', lt: '<', lte: '<=' }[f.op];
      return `${numeric(e)} ${op} ${num(v)}`;
    }
    case 'contains':
      return `position(${e}, ${text(v)}) > 0`;
    case 'in':
      if (!Array.isArray(v) || v.length === 0) throw new CompileError('in needs a non-empty array');
      return `${e} IN (${v.map(text).join(', ')})`;
    default:
      throw new CompileError(`unknown op ${String(f.op)}`);
  }
}

export function valueExpr(def: MetricDefinition): string {
  const target = def.target_property ?? undefined;
  const needTarget = () => {
    if (!target) throw new CompileError(`${def.calculation} needs target_property`);
    return target;
  };
  switch (def.calculation) {
    case 'count':
      return 'toFloat64(count())';
    case 'exists':
      return 'toFloat64(count() > 0)';
    case 'sum':
      return `ifNull(sum(${numeric(prop(needTarget()))}), 0)`;
    case 'avg':
      return `avg(${numeric(prop(needTarget()))})`;
    case 'max':
      return `max(${numeric(prop(needTarget()))})`;
    case 'distinct_count': {
      const p = prop(needTarget());
      return `toFloat64(uniqExactIf(${p}, ${p} != ''))`;
    }
    case 'last_value':
      // The latest event that carries the property; without a target, the latest event's time.
      return target
        ? `${numeric(`argMaxIf(${prop(target)}, ${ORDER}, indexOf(prop_keys, ${str(target)}) > 0)`)}`
        : 'toFloat64(toUInt32(max(ts)))';
    default:
      throw new CompileError(`unknown calculation ${String(def.calculation)}`);
  }
}

/** True when the metric is read from the daily rollup rather than csp.events (see the decisions above). */
export function readsRollup(def: MetricDefinition, period: Period): boolean {
  return (
    (def.calculation === 'count' || def.calculation === 'exists') &&
    (def.filter ?? []).length === 0 &&
    !RESERVED_EVENT_NAMES.has(def.source_event) &&
    startsAtMidnight(period)
  );
}

export function compileMetric(def: MetricDefinition, o: CompileOptions): CompiledMetric {
  const db = o.database ?? 'csp';
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(db)) throw new CompileError('invalid database name');
  const period = windowPeriod(def.window, o.now);
  const generated = RESERVED_EVENT_NAMES.has(def.source_event);
  const filters = def.filter ?? [];
  const portfolio = def.grain === 'portfolio';
  const ids = portfolio ? 'all' : (o.customerIds ?? 'all');
  const customerWhere =
    ids === 'all' ? [] : ids.length === 0 ? ['0'] : [`customer_id IN (${ids.map(uuid).join(', ')})`];
  const select = portfolio ? 'NULL AS customer_id' : 'customer_id';
  const groupBy = portfolio ? '' : '\nGROUP BY customer_id';
  const empty = EMPTY[def.calculation];

  if (readsRollup(def, period)) {
    const value = def.calculation === 'count' ? 'toFloat64(sum(events))' : 'toFloat64(sum(events) > 0)';
    const where = [
      chTenant(o.tenantId),
      `event_name = ${str(def.source_event)}`,
      `day >= ${date(period.from)}`,
      `day <= ${date(period.to)}`,
      ...customerWhere,
    ];
    return {
      sql: `SELECT ${select}, ${value} AS value\nFROM ${db}.usage_daily_names\nWHERE ${where.join(AND)}${groupBy}`,
      period,
      source: 'rollup',
      empty,
    };
  }
  const where = [
    chTenant(o.tenantId),
    `event_name = ${str(def.source_event)}`,
    `ts >= ${dateTime(period.from)}`,
    `ts <= ${dateTime(period.to)}`,
    ...(generated ? [] : ["surface != 'system'"]),
    ...customerWhere,
    ...filters.map(filterSql),
  ];
  return {
    sql: `SELECT ${select}, ${valueExpr(def)} AS value\nFROM ${db}.events\nWHERE ${where.join(AND)}${groupBy}`,
    period,
    source: 'events',
    empty,
  };
}
