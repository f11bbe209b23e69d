import { chTenant, dateTime, num, str, uuid } from '../../lib/metrics/literal.js';
import { PORTFOLIO_CUSTOMER } from '../../schemas/materialize.js';
import type { ClickHouse } from '../clickhouse.js';
import type { EventTrigger, MetricThresholdTrigger } from './definition.js';

/**
 * What a trigger needs from ClickHouse, one query per trigger and workspace (GROUP BY
 * customer_id), read as TabSeparated text: a workspace of 100k customers is one response, parsed
 * without a JSON object per row. Every value is a literal of lib/metrics/literal.ts.
 */

/** The latest materialized value per (metric, customer), index-aligned, for the metric_latest relation. */
export interface LatestValues {
  metricIds: string[];
  customerIds: string[];
  values: Array<number | null>;
}

/**
 * The latest computation of each (metric, customer) over every period, as GET …/values with
 * latest values reads it: argMax over (computed_at, period_start), no FINAL (parts not merged yet
 * hold older computations); a NULL value travels through argMax as nan so it is not skipped for
 * an older number. Portfolio values belong to no customer and are left out.
 */
export async function latestValues(ch: ClickHouse, tenantId: string, metricIds: string[]): Promise<LatestValues> {
  const out: LatestValues = { metricIds: [], customerIds: [], values: [] };
  if (!metricIds.length) return out;
  const text = await ch.text(`SELECT toString(metric_id), toString(customer_id), v
FROM (
  SELECT metric_id, customer_id, argMax(ifNull(value, nan), (computed_at, period_start)) AS v
  FROM ${ch.database}.metric_values
  WHERE ${chTenant(tenantId)} AND metric_id IN (${metricIds.map(uuid).join(', ')})
    AND customer_id != ${uuid(PORTFOLIO_CUSTOMER)}
  GROUP BY metric_id, customer_id
)`);
  for (const line of lines(text)) {
    const [m, c, v] = line.split('\t');
    const n = Number(v);
    out.metricIds.push(m);
    out.customerIds.push(c);
    out.values.push(Number.isFinite(n) ? n : null);
  }
  return out;
}

const OPERATORS = { gt: '>', gte: '>=', lt: '<', lte: '<=' } as const;

/** Customers whose latest value of the metric passes the threshold (a null value never does). */
export async function thresholdMatches(ch: ClickHouse, tenantId: string, t: MetricThresholdTrigger): Promise<string[]> {
  const op = OPERATORS[t.operator];
  if (!op) throw new Error(`unknown operator ${String(t.operator)}`);
  return lines(
    await ch.text(`SELECT toString(customer_id)
FROM (
  SELECT customer_id, argMax(ifNull(value, nan), (computed_at, period_start)) AS v
  FROM ${ch.database}.metric_values
  WHERE ${chTenant(tenantId)} AND metric_id = ${uuid(t.metric_id)}
    AND customer_id != ${uuid(PORTFOLIO_CUSTOMER)}
  GROUP BY customer_id
)
WHERE NOT isNaN(v) AND v ${op} ${num(t.value)}`),
  );
}

/** Customers with at least `count` events of the name in the last `within_days` days (to `now`). */
export async function eventMatches(ch: ClickHouse, tenantId: string, t: EventTrigger, now: Date): Promise<string[]> {
  const count = t.count ?? 1;
  const days = t.within_days ?? 1;
  const since = new Date(now.getTime() - days * 86_400_000);
  return lines(
    await ch.text(`SELECT toString(customer_id)
FROM ${ch.database}.events
WHERE ${chTenant(tenantId)} AND event_name = ${str(t.event_name)} AND ts >= ${dateTime(since)}
GROUP BY customer_id
HAVING count() >= ${num(count)}`),
  );
}

function lines(text: string): string[] {
  return text.split('\n').filter(Boolean);
}
