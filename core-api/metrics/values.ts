import { chTenant, dateTime, uuid } from '../../lib/metrics/literal.js';
import type { Sql } from '../../lib/pg.js';
import { IdParams, Problem } from '../../schemas/core/common.js';
import { MaterializeResult, MetricValues, MetricValuesQuery } from '../../schemas/core/metrics.js';
import { MATERIALIZE_RETRY_AFTER_S, PORTFOLIO_CUSTOMER } from '../../schemas/materialize.js';
import type { ClickHouseReader } from '../clickhouse.js';
import { json, type Ctx, type Reply } from '../http/context.js';
import { ApiError, invalid, notFound } from '../../lib/problem.js';
import type { Route } from '../http/router.js';
import type { MaterializeClient } from './materialize.js';
import { getMetric } from './repo.js';

export interface StoredValue {
  customer_id: string | null;
  value: number | null;
  period_start: string;
  period_end: string;
  computed_at: string;
}

interface Row {
  customer_id: string;
  value: number | null;
  period_start: number;
  period_end: number;
  computed_at: number;
}

const iso = (seconds: number) => new Date(seconds * 1000).toISOString();
/** The last second ClickHouse's DateTime (unsigned 32 bits) holds: 2106-02-07T06:28:15Z. */
const DATETIME_MAX_S = 2 ** 32 - 1;
const seconds = (d: Date) => Math.floor(d.getTime() / 1000);

/**
 * The latest computation of each (customer, period) of csp.metric_values: argMax over
 * computed_at (no FINAL; parts not merged yet hold older computations). A NULL value travels
 * through argMax as nan, because argMax over a Nullable argument would skip it and answer an
 * older computation's number.
 */
export async function storedValues(
  ch: ClickHouseReader,
  q: { tenantId: string; metricIds: string[]; customerIds?: string[]; from?: Date; to?: Date; limit: number },
  latestOnly = false,
): Promise<Array<StoredValue & { metric_id: string }>> {
  if (!q.metricIds.length) return [];
  // Stored periods lie within DateTime's range, which no literal can leave (toDateTime of a later
  // second wraps around): a bound outside it holds for every period or for none.
  const from = q.from && seconds(q.from) > 0 ? q.from : undefined;
  const to = q.to && seconds(q.to) < DATETIME_MAX_S ? q.to : undefined;
  if ((q.to && seconds(q.to) < 0) || (q.from && seconds(q.from) > DATETIME_MAX_S)) return [];
  const where = [
    chTenant(q.tenantId),
    `metric_id IN (${q.metricIds.map(uuid).join(', ')})`,
    ...(q.customerIds ? [`customer_id IN (${q.customerIds.map(uuid).join(', ')})`] : []),
    ...(from ? [`period_end >= ${dateTime(from)}`] : []),
    ...(to ? [`period_start <= ${dateTime(to)}`] : []),
  ];
  // latestOnly: one value per (metric, customer), the last computed over every period.
  const key = latestOnly ? 'metric_id, customer_id' : 'metric_id, customer_id, period_start';
  const query = `SELECT toString(metric_id) AS metric_id, toString(customer_id) AS customer_id,
  if(isNaN(v), NULL, v) AS value, toUInt32(ps) AS period_start, toUInt32(pe) AS period_end,
  toUInt32(at) AS computed_at
FROM (
  SELECT metric_id, customer_id, argMax(ifNull(value, nan), (computed_at, period_start)) AS v,
    ${latestOnly ? 'argMax(period_start, (computed_at, period_start))' : 'period_start'} AS ps,
    argMax(period_end, (computed_at, period_start)) AS pe, max(computed_at) AS at
  FROM ${ch.database}.metric_values
  WHERE ${where.join(' AND ')}
  GROUP BY ${key}
)
ORDER BY metric_id, customer_id, period_start
LIMIT ${q.limit}`;
  const rows = await ch.rows<Row & { metric_id: string }>(query, 'The metric value store');
  return rows.map((r) => ({
    metric_id: r.metric_id,
    customer_id: r.customer_id === PORTFOLIO_CUSTOMER ? null : r.customer_id,
    value: r.value,
    period_start: iso(r.period_start),
    period_end: iso(r.period_end),
    computed_at: iso(r.computed_at),
  }));
}

export function valueRoutes(sql: Sql, ch: ClickHouseReader, materializer: MaterializeClient): Route[] {
  async function values(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const metric = await getMetric(sql, tenantId, c.params.id);
    if (!metric) throw notFound('Metric');
    const from = c.query.from ? new Date(c.query.from) : undefined;
    const to = c.query.to ? new Date(c.query.to) : undefined;
    if (from && to && from > to)
      throw invalid([{ field: 'from', code: 'invalid_range', message: 'from must not be after to' }]);
    const rows = await storedValues(ch, {
      tenantId,
      metricIds: [metric.id],
      customerIds: c.query.customer_id ? [c.query.customer_id.toLowerCase()] : undefined,
      from,
      to,
      limit: c.query.limit ?? 1000,
    });
    return json(200, { data: rows.map(({ metric_id: _m, ...v }) => v) });
  }

  async function materialize(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const metric = await getMetric(sql, tenantId, c.params.id);
    if (!metric) throw notFound('Metric');
    if (metric.status === 'deleted')
      throw new ApiError('conflict', 'The metric is deleted; it is no longer materialized.');
    return json(200, await materializer.materialize({ tenant_id: tenantId, metric_id: metric.id }));
  }

  const common = { tag: 'Metrics', auth: 'bearer' as const, params: IdParams };
  return [
    {
      ...common,
      method: 'GET',
      path: '/v1/metrics/{id}/values',
      summary: 'Materialized values of a metric',
      description: [
        'The stored series from ClickHouse: per customer and period, the latest computation. A value is listed',
        'when its period overlaps [`from`, `to`] (period_end ≥ from, period_start ≤ to); `customer_id` narrows',
        'it to one customer. Ordered by customer, then period; at most `limit` rows (default 1000). A portfolio',
        "metric's values have `customer_id` null. A deleted metric's values stay readable.",
      ].join(' '),
      scope: 'metrics:read',
      query: MetricValuesQuery,
      handler: values,
      errors: [404],
      responses: { 200: { description: 'The values.', schema: MetricValues } },
    },
    {
      ...common,
      method: 'POST',
      path: '/v1/metrics/{id}/materialize',
      summary: 'Materialize a metric now (admin)',
      description: [
        'Runs the metric now in the processors (over NATS) and answers once its values are stored: for the',
        'customers its consumers need (objectives: their customers; health drivers and playbook triggers: every',
        'customer), or every customer of the workspace when nothing uses it yet. The hourly schedule is unchanged.',
        'A deleted metric → 409 `conflict`. No materializer answering in time → 503 `materializer_unavailable`',
        'with Retry-After.',
      ].join(' '),
      scope: 'metrics:write',
      role: 'admin',
      handler: materialize,
      errors: [404, 409],
      responses: {
        200: { description: 'What was stored.', schema: MaterializeResult },
        503: {
          description:
            'No materializer answered (`materializer_unavailable`); header ' +
            `\`Retry-After: ${MATERIALIZE_RETRY_AFTER_S}\`.`,
          schema: Problem,
          contentType: 'application/problem+json',
        },
      },
    },
  ] satisfies Route[];
}
