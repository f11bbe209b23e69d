import type { MetricDefinition } from '../../schemas/core/metrics.js';
import { RESERVED_EVENT_NAMES } from '../../schemas/events.js';
import { CompileError, EMPTY, filterSql, numeric, ORDER, prop, readsRollup } from './compile.js';
import { chTenant, dateTime, str } from './literal.js';
import { windowPeriod, type Period } from './window.js';

/**
 * Several customer-grain metrics over the same source event → ONE query over csp.events that
 * returns `customer_id, v0, v1, …`: each metric's aggregate becomes its -If form under its own
 * window and filters, so the event rows (and their property arrays, most of the cost) are read
 * once for the group instead of once per metric. The materializer groups the metrics it runs for
 * every customer this way; a value equals what compileMetric's query gives for that metric alone
 * (test/metrics/group.test.ts compares them), including a customer whose rows match another
 * metric of the group but not this one: the calculation's empty value.
 */

export interface CompiledGroup {
  sql: string;
  /** Per metric, in the order given. */
  periods: Period[];
  empty: Array<number | null>;
}

/** Metrics a group may hold: customer grain over csp.events (rollup reads are already cheap). */
export const groupable = (def: MetricDefinition, now: Date): boolean =>
  def.grain === 'customer' && !readsRollup(def, windowPeriod(def.window, now));

function conditionalValue(def: MetricDefinition, c: string): string {
  const target = def.target_property ?? undefined;
  const x = target ? numeric(prop(target)) : '';
  // NULL when no matching row carries a value: maxIf over only NULLs gives 0 on ClickHouse 18.16.
  const noneOr = (expr: string, valued = x) =>
    `if(countIf(${valued ? `isNotNull(${valued}) AND ` : ''}${c}) = 0, NULL, ${expr})`;
  if (!target && !['count', 'exists', 'last_value'].includes(def.calculation))
    throw new CompileError(`${def.calculation} needs target_property`);
  switch (def.calculation) {
    case 'count':
      return `toFloat64(countIf(${c}))`;
    case 'exists':
      return `toFloat64(countIf(${c}) > 0)`;
    case 'sum':
      return `ifNull(sumIf(${x}, ${c}), 0)`;
    case 'avg':
      return noneOr(`avgIf(${x}, ${c})`);
    case 'max':
      return noneOr(`maxIf(${x}, ${c})`);
    case 'distinct_count': {
      const p = prop(target as string);
      return `toFloat64(uniqExactIf(${p}, ${p} != '' AND ${c}))`;
    }
    case 'last_value':
      return target
        ? numeric(`argMaxIf(${prop(target)}, ${ORDER}, indexOf(prop_keys, ${str(target)}) > 0 AND ${c})`)
        : noneOr(`toFloat64(toUInt32(maxIf(ts, ${c})))`, '');
    default:
      throw new CompileError(`unknown calculation ${String(def.calculation)}`);
  }
}

export function compileMetricGroup(
  defs: MetricDefinition[],
  o: { tenantId: string; now: Date; database?: string },
): CompiledGroup {
  const db = o.database ?? 'csp';
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(db)) throw new CompileError('invalid database name');
  if (!defs.length) throw new CompileError('an empty group');
  const source = defs[0].source_event;
  if (defs.some((d) => d.source_event !== source || !groupable(d, o.now)))
    throw new CompileError('a group holds customer-grain metrics over one source event read from csp.events');
  const periods = defs.map((d) => windowPeriod(d.window, o.now));
  const values = defs.map((d, i) => {
    const cond = [
      `ts >= ${dateTime(periods[i].from)}`,
      `ts <= ${dateTime(periods[i].to)}`,
      ...(d.filter ?? []).map(filterSql),
    ].join(' AND ');
    return `${conditionalValue(d, `(${cond})`)} AS v${i}`;
  });
  const from = new Date(Math.min(...periods.map((p) => p.from.getTime())));
  const to = new Date(Math.max(...periods.map((p) => p.to.getTime())));
  const where = [
    chTenant(o.tenantId),
    `event_name = ${str(source)}`,
    `ts >= ${dateTime(from)}`,
    `ts <= ${dateTime(to)}`,
    ...(RESERVED_EVENT_NAMES.has(source) ? [] : ["surface != 'system'"]),
  ];
  return {
    sql:
      `SELECT customer_id,\n  ${values.join(',\n  ')}\nFROM ${db}.events\n` +
      `WHERE ${where.join('\n  AND ')}\nGROUP BY customer_id`,
    periods,
    empty: defs.map((d) => EMPTY[d.calculation]),
  };
}
