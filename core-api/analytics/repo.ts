import { inTenant, type Sql } from '../../lib/pg.js';
import { FORECAST_CATEGORIES, TOP_RISKS, type ForecastCategory } from '../../schemas/core/analytics.js';
import { monthLabel, monthStart, type RenewalRange } from './params.js';

/**
 * The portfolio and renewal aggregates: one SQL statement each over the workspace's customers and
 * their current health (customer_health; no row = never scored), whatever the workspace's size.
 * Sums of arr stay numeric in PostgreSQL and become JSON numbers only at the end.
 */

const HEALTH = ['healthy', 'neutral', 'at_risk', 'unscored'] as const;
const num = (v: string | number | null): number => (v === null ? 0 : Number(v));

export async function portfolio(sql: Sql, tenantId: string): Promise<Record<string, unknown>> {
  const [r] = await sql<Array<Record<string, string | number | null> & { top_risks: unknown[]; as_of: Date }>>`
    WITH live AS (
      SELECT c.arr, c.status, coalesce(h.status, 'unscored') AS health
      FROM customers c
        LEFT JOIN customer_health h ON h.customer_id = c.id AND ${inTenant(tenantId, 'h')}
      WHERE ${inTenant(tenantId, 'c')} AND c.deleted_at IS NULL
    )
    SELECT now() AS as_of,
      coalesce(sum(arr) FILTER (WHERE status <> 'churned'), 0) AS total_arr,
      count(*)::int AS customer_count,
      count(*) FILTER (WHERE status = 'active')::int AS s_active,
      count(*) FILTER (WHERE status = 'trial')::int AS s_trial,
      count(*) FILTER (WHERE status = 'churned')::int AS s_churned,
      count(*) FILTER (WHERE status = 'paused')::int AS s_paused,
      count(*) FILTER (WHERE status <> 'churned' AND health = 'healthy')::int AS n_healthy,
      count(*) FILTER (WHERE status <> 'churned' AND health = 'neutral')::int AS n_neutral,
      count(*) FILTER (WHERE status <> 'churned' AND health = 'at_risk')::int AS n_at_risk,
      count(*) FILTER (WHERE status <> 'churned' AND health = 'unscored')::int AS n_unscored,
      sum(arr) FILTER (WHERE status <> 'churned' AND health = 'healthy') AS a_healthy,
      sum(arr) FILTER (WHERE status <> 'churned' AND health = 'neutral') AS a_neutral,
      sum(arr) FILTER (WHERE status <> 'churned' AND health = 'at_risk') AS a_at_risk,
      sum(arr) FILTER (WHERE status <> 'churned' AND health = 'unscored') AS a_unscored,
      (SELECT coalesce(json_agg(t), '[]') FROM (
        SELECT c.id AS customer_id, c.name, c.arr, h.score AS health_score, h.status AS health_status,
          c.renewal_date, c.owner_email
        FROM customer_health h JOIN customers c ON c.id = h.customer_id AND ${inTenant(tenantId, 'c')}
        WHERE ${inTenant(tenantId, 'h')} AND h.status = 'at_risk' AND c.deleted_at IS NULL AND c.status <> 'churned'
        ORDER BY c.arr DESC NULLS LAST, c.renewal_date ASC NULLS LAST, c.id
        LIMIT ${TOP_RISKS}) t) AS top_risks
    FROM live`;
  return {
    as_of: r.as_of.toISOString(),
    total_arr: num(r.total_arr),
    customer_count: r.customer_count,
    customers_by_status: { active: r.s_active, trial: r.s_trial, churned: r.s_churned, paused: r.s_paused },
    health_distribution: Object.fromEntries(HEALTH.map((h) => [h, r[`n_${h}`]])),
    arr_by_health: Object.fromEntries(HEALTH.map((h) => [h, num(r[`a_${h}`])])),
    top_risks: r.top_risks,
  };
}

/** The forecast category of `c` (customers) with `h` (customer_health, maybe null) in SQL. */
const CATEGORY = `CASE
  WHEN c.custom_fields->>'forecast_category' IN ('commit', 'best_case', 'at_risk')
    THEN c.custom_fields->>'forecast_category'
  WHEN h.status = 'healthy' THEN 'commit'
  WHEN h.status = 'at_risk' THEN 'at_risk'
  ELSE 'best_case' END`;

interface RenewalRow {
  month: string;
  count: number;
  arr: string;
  [k: string]: string | number;
}

export async function renewals(
  sql: Sql,
  tenantId: string,
  range: RenewalRange,
): Promise<{ from: string; to: string; data: unknown[] }> {
  const from = monthStart(range.from);
  // The month after `to` is computed by PostgreSQL: after December 9999 it has no four-digit year.
  const last = monthStart(range.to);
  const cats = range.categories;
  // Every month of the range from generate_series, so months without renewals are rows of zeros.
  const rows = await sql<RenewalRow[]>`
    WITH due AS (
      SELECT date_trunc('month', c.renewal_date)::date AS month, c.arr, ${sql.unsafe(CATEGORY)} AS category
      FROM customers c
        LEFT JOIN customer_health h ON h.customer_id = c.id AND ${inTenant(tenantId, 'h')}
      WHERE ${inTenant(tenantId, 'c')} AND c.deleted_at IS NULL AND c.status <> 'churned'
        AND c.renewal_date >= ${from}::date AND c.renewal_date < ${last}::date + interval '1 month'
    ), picked AS (
      SELECT * FROM due WHERE category = ANY(${cats}::text[])
    )
    SELECT to_char(m.month, 'YYYY-MM') AS month,
      count(p.category)::int AS count, coalesce(sum(p.arr), 0) AS arr,
      count(p.category) FILTER (WHERE p.category = 'commit')::int AS commit_count,
      coalesce(sum(p.arr) FILTER (WHERE p.category = 'commit'), 0) AS commit_arr,
      count(p.category) FILTER (WHERE p.category = 'best_case')::int AS best_case_count,
      coalesce(sum(p.arr) FILTER (WHERE p.category = 'best_case'), 0) AS best_case_arr,
      count(p.category) FILTER (WHERE p.category = 'at_risk')::int AS at_risk_count,
      coalesce(sum(p.arr) FILTER (WHERE p.category = 'at_risk'), 0) AS at_risk_arr
    FROM generate_series(${from}::date, ${last}::date, interval '1 month') AS m(month)
      LEFT JOIN picked p ON p.month = m.month::date
    GROUP BY m.month
    ORDER BY m.month`;
  const bucket = (r: RenewalRow, c: ForecastCategory) => ({ count: r[`${c}_count`], arr: num(r[`${c}_arr`]) });
  return {
    from: monthLabel(range.from),
    to: monthLabel(range.to),
    data: rows.map((r) => ({
      month: r.month,
      count: r.count,
      arr: num(r.arr),
      by_forecast_category: Object.fromEntries(FORECAST_CATEGORIES.map((c) => [c, bucket(r, c)])),
    })),
  };
}
