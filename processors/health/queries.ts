import { chTenant } from '../../lib/metrics/literal.js';
import type { HealthModel } from '../../schemas/health.js';
import type { ClickHouse } from '../clickhouse.js';
import { type Aggregates, emptyAggregates, keyEventsActive, PAYMENT_PENALTIES } from './score.js';

/**
 * The aggregation queries of one workspace over the daily rollups (infra/clickhouse/schema.sql),
 * each one GROUP BY customer_id for all its customers at once, or filtered to the customers of a
 * batch of on-demand recalculations. ClickHouse 18.16 SQL: AggregateFunction columns are read with the
 * -Merge combinators, and a lambda sees an outer column only when the SELECT lists it.
 *
 * "Last N days" are the N days ending `today` (UTC): day BETWEEN today - (N - 1) AND today. The
 * day comes from the caller so the scored window and the history point share one date.
 */

export interface Scope {
  tenantId: string;
  /** YYYY-MM-DD, UTC. */
  today: string;
  /** Only these customers (on-demand recalculations). */
  customerIds?: string[];
}

const literal = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
const list = (names: string[]) => names.map(literal).join(', ');

/**
 * The rows of the scope's customers and last `days` days. For some customers it is a PREWHERE:
 * the primary key narrows the read to whole granules (8192 rows, mostly other customers'), and
 * the filter then skips deserialising their aggregate states, which is most of such a query.
 * A whole workspace keeps nearly every row of its granules: a plain WHERE.
 */
function where(s: Scope, days: number): string {
  const customer = s.customerIds ? ` AND customer_id IN (${list(s.customerIds)})` : '';
  const conditions =
    `${chTenant(s.tenantId)}${customer}` +
    ` AND day >= toDate(${literal(s.today)}) - ${days - 1} AND day <= toDate(${literal(s.today)})`;
  return `${s.customerIds ? 'PREWHERE' : 'WHERE'} ${conditions}`;
}

/** customer_id, active days (28), Σ daily distinct users, distinct users and distinct names (30). */
export function usageSql(s: Scope): string {
  return `SELECT customer_id, countIf(day >= toDate(${literal(s.today)}) - 27) AS active_days,
  sum(du) AS user_days, uniqMerge(us) AS mau, uniqMerge(ns) AS names
FROM (
  SELECT customer_id, day, uniqMerge(users) AS du, uniqMergeState(users) AS us, uniqMergeState(names) AS ns
  FROM csp.usage_daily ${where(s, 30)}
  GROUP BY customer_id, day
) GROUP BY customer_id`;
}

/** customer_id, events of the positive and of the negative key events (30 days). */
export function keyEventsSql(s: Scope, model: HealthModel): string {
  const { positive, negative } = model.key_events;
  const sumOf = (names: string[]) => (names.length ? `sumIf(events, event_name IN (${list(names)}))` : '0');
  return `SELECT customer_id, ${sumOf(positive)} AS positive, ${sumOf(negative)} AS negative
FROM csp.usage_daily_names
${where(s, 30)} AND event_name IN (${list([...positive, ...negative])})
GROUP BY customer_id`;
}

/**
 * customer_id, billing events (90 days), unresolved negatives after the latest payment_succeeded
 * and their penalty. Day-granular: a (day, type, status) group counts when its latest event came
 * after the latest success; past 30 days it costs half.
 */
export function billingSql(s: Scope): string {
  const penalty = Object.entries(PAYMENT_PENALTIES)
    .map(([type, p]) => `event_type = ${literal(type)}, ${p}`)
    .join(', ');
  return `SELECT customer_id, billing, succeeded,
  arraySum(arrayMap((c, t) -> if(t > succeeded, c, 0), nc, nt)) AS negatives,
  arraySum(arrayMap((p, t) -> if(t > succeeded, p, 0), np, nt)) AS penalty
FROM (
  SELECT customer_id, sum(c) AS billing, maxIf(last, event_type = 'payment_succeeded') AS succeeded,
    groupArrayIf(c, p > 0) AS nc, groupArrayIf(last, p > 0) AS nt, groupArrayIf(p * c, p > 0) AS np
  FROM (
    SELECT customer_id, event_type, countMerge(events) AS c, toUInt32(maxMerge(last_ts)) AS last,
      if(status = 'resolved', 0, multiIf(${penalty}, 0)) * if(day < toDate(${literal(s.today)}) - 29, 0.5, 1) AS p
    FROM csp.billing_daily ${where(s, 90)}
    GROUP BY customer_id, day, event_type, status
  ) GROUP BY customer_id
)`;
}

/** The queries a model needs: a dimension that is not active costs no query. */
export function queriesFor(s: Scope, model: HealthModel): { usage?: string; keyEvents?: string; billing?: string } {
  const on = new Set(model.active_dimensions);
  return {
    usage: on.has('usage_frequency') || on.has('breadth') || on.has('active_users') ? usageSql(s) : undefined,
    keyEvents: keyEventsActive(model) ? keyEventsSql(s, model) : undefined,
    billing: on.has('payment_health') ? billingSql(s) : undefined,
  };
}

/**
 * Runs a scope's queries (at once) and lays their rows out by the index of each customer in
 * `ids`; customers without rows keep zeros, which is "no events" for every dimension. Rows of
 * customers not in `ids` (deleted meanwhile) are ignored.
 */
export async function aggregate(ch: ClickHouse, s: Scope, model: HealthModel, ids: string[]): Promise<Aggregates> {
  const a = emptyAggregates(ids.length, model.drivers.length);
  const index = new Map<string, number>();
  for (let i = 0; i < ids.length; i++) index.set(ids[i], i);
  const q = queriesFor(s, model);
  const fill = async (sql: string | undefined, columns: Array<Float64Array | undefined>) => {
    if (!sql) return;
    const text = await ch.text(sql);
    let start = 0;
    while (start < text.length) {
      let end = text.indexOf('\n', start);
      if (end < 0) end = text.length;
      const f = text.slice(start, end).split('\t');
      start = end + 1;
      const i = index.get(f[0]);
      if (i === undefined) continue;
      for (let c = 0; c < columns.length; c++) {
        const col = columns[c];
        if (col) col[i] = Number(f[c + 1]);
      }
    }
  };
  await Promise.all([
    fill(q.usage, [a.activeDays, a.userDays, a.mau, a.names]),
    fill(q.keyEvents, [a.positive, a.negative]),
    fill(q.billing, [a.billing, undefined, a.negatives, a.penalty]),
    fillDrivers(ch, s, model, index, a),
  ]);
  return a;
}

/**
 * customer_id, metric_id and the latest materialized value of each driver's metric (one query for
 * all drivers): argMax over computed_at, NULL carried as nan (argMax would skip a NULL).
 */
export function driversSql(s: Scope, model: HealthModel): string {
  const customer = s.customerIds ? ` AND customer_id IN (${list(s.customerIds)})` : '';
  const metrics = list(model.drivers.map((d) => d.metric_id));
  return `SELECT toString(customer_id), toString(metric_id), argMax(ifNull(value, nan), (computed_at, period_start))
FROM csp.metric_values
WHERE ${chTenant(s.tenantId)} AND metric_id IN (${metrics})${customer}
GROUP BY customer_id, metric_id`;
}

async function fillDrivers(
  ch: ClickHouse,
  s: Scope,
  model: HealthModel,
  index: Map<string, number>,
  a: Aggregates,
): Promise<void> {
  if (!model.drivers.length) return;
  const column = new Map(model.drivers.map((d, k) => [d.metric_id, a.drivers[k]]));
  const text = await ch.text(driversSql(s, model));
  for (const line of text.split('\n')) {
    const [customer, metric, value] = line.split('\t');
    const i = index.get(customer);
    const col = column.get(metric);
    if (i !== undefined && col) col[i] = Number(value);
  }
}
