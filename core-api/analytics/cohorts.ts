import { inTenant, type Sql } from '../../lib/pg.js';
import { cohortLabel, type CohortWindow } from './params.js';

/**
 * Retention cohorts in one SQL statement over customers and customer_status_history.
 *
 * Periods are numbered since year 0 (months, or quarters = months / 3), so "the end of offset k of
 * cohort c" is the start of period c + k + 1. The status at that instant is the status of the
 * customer's latest history row before it. Instead of looking that up for every customer and
 * offset (100,000 × 37 lookups), each history row is an interval [a, b) up to the next row, and a
 * churned interval covers exactly the offsets k with a < start(c + k + 1) ≤ b, that is
 * k ∈ [p(a) − c, p(b) − c − 1] (p = period of a time); the open last interval reaches the current
 * period, whose status is the one as of now. The covered ranges go in as +1 / −1 at their ends and
 * a running sum per cohort counts the churned customers at every offset: the work grows with the
 * number of churned intervals, not with customers × offsets. A customer's intervals never overlap,
 * so none is counted twice.
 */

const period = (ts: string, step: number) =>
  `((extract(year FROM ${ts} AT TIME ZONE 'UTC')::int * 12` +
  ` + extract(month FROM ${ts} AT TIME ZONE 'UTC')::int - 1) / ${step})`;

export interface CohortRow {
  cohort: string;
  size: number;
  retention: Array<{ offset: number; retained: number; rate: number }>;
}

export async function cohorts(sql: Sql, tenantId: string, w: CohortWindow, now: Date): Promise<CohortRow[]> {
  const p = (ts: string) => sql.unsafe(period(ts, w.step));
  const rows = await sql<Array<{ c0: number; size: number; k: number; retained: number }>>`
    WITH cust AS (
      SELECT c.id, ${p('c.created_at')} AS c0
      FROM customers c
      WHERE ${inTenant(tenantId, 'c')} AND c.deleted_at IS NULL
        AND c.created_at >= ${w.firstStart} AND c.created_at <= ${now}
    ), hist AS (
      SELECT h.customer_id, h.status, h.changed_at AS a,
        lead(h.changed_at) OVER (PARTITION BY h.customer_id ORDER BY h.changed_at, h.id) AS b
      FROM customer_status_history h
      WHERE ${inTenant(tenantId, 'h')} AND h.changed_at <= ${now}
        AND h.customer_id IN (SELECT id FROM cust)
    ), churned AS (
      SELECT cust.c0,
        greatest(${p('hist.a')} - cust.c0, 0) AS k_lo,
        least(
          CASE WHEN hist.b IS NULL THEN ${w.current} - cust.c0 ELSE ${p('hist.b')} - cust.c0 - 1 END,
          ${w.maxOffset}
        ) AS k_hi
      FROM hist JOIN cust ON cust.id = hist.customer_id
      WHERE hist.status = 'churned'
    ), steps AS (
      SELECT c0, k, sum(d)::int AS d FROM (
        SELECT c0, k_lo AS k, 1 AS d FROM churned WHERE k_lo <= k_hi
        UNION ALL
        SELECT c0, k_hi + 1, -1 FROM churned WHERE k_lo <= k_hi
      ) s GROUP BY c0, k
    ), sizes AS (
      SELECT c0, count(*)::int AS size FROM cust GROUP BY c0
    ), grid AS (
      SELECT s.c0, s.size, k
      FROM sizes s CROSS JOIN LATERAL generate_series(0, least(${w.maxOffset}, ${w.current} - s.c0)) AS k
    )
    SELECT g.c0, g.size, g.k,
      g.size - coalesce(sum(st.d) OVER (PARTITION BY g.c0 ORDER BY g.k), 0)::int AS retained
    FROM grid g LEFT JOIN steps st ON st.c0 = g.c0 AND st.k = g.k
    ORDER BY g.c0, g.k`;
  const out: CohortRow[] = [];
  let cur: CohortRow | undefined;
  let c0 = -1;
  for (const r of rows) {
    if (r.c0 !== c0) {
      c0 = r.c0;
      cur = { cohort: cohortLabel(w.period, r.c0), size: r.size, retention: [] };
      out.push(cur);
    }
    cur!.retention.push({
      offset: r.k,
      retained: r.retained,
      rate: Math.round((r.retained / r.size) * 10_000) / 10_000,
    });
  }
  return out;
}
