import { cohorts } from '../core-api/analytics/cohorts.js';
import { cohortWindow, renewalRange } from '../core-api/analytics/params.js';
import { portfolio, renewals } from '../core-api/analytics/repo.js';
import { connectPg } from '../lib/pg.js';
import { sampler, type BenchContext } from './context.js';
import { Histogram, type LatencySummary } from './histogram.js';
import type { Usage } from './proc-stats.js';
import { cpuS } from './scheduled-job.js';
import { node, say, startTier, type Tier } from './tiers.js';

/**
 * GET /v1/analytics/portfolio, /renewals and /cohorts on one workspace of `analyticsCustomers`
 * customers (100,000 by default) created over the last 24 months, each with 0–3 status changes in
 * its history, four in five scored. Each endpoint is measured through a core API that never
 * caches (ANALYTICS_CACHE_TTL_MS=0, so every request runs its SQL) under concurrent callers, with
 * varied parameters; beside it the same SQL functions called straight on PostgreSQL one after
 * another, the ceiling the HTTP figure is compared with. Then the core API as deployed (its 30 s
 * cache refreshed in the background while read), each endpoint polled for longer than that life.
 */

const ENDPOINTS = ['portfolio', 'renewals', 'cohorts'] as const;
type Endpoint = (typeof ENDPOINTS)[number];
/** Targets of the issue: p99 on 100,000 customers with 24 months of status history. */
export const ANALYTICS_TARGET_MS: Record<Endpoint, number> = { portfolio: 200, renewals: 200, cohorts: 500 };

export interface EndpointFigures {
  http: LatencySummary & { errors: number; statusCounts: Record<string, number> };
  /**
   * As deployed (30 s cache, refreshed in the background while read): callers polling the
   * dashboard's query for longer than the cache's life; the first request, cold, apart.
   */
  served?: LatencySummary & { errors: number; coldMs: number };
  /** The same SQL straight on PostgreSQL, one call at a time. */
  sql: LatencySummary;
}

export interface AnalyticsResult {
  customers: number;
  historyRows: number;
  generateS: number;
  callers: number;
  requestsPerEndpoint: number;
  endpoints: Record<Endpoint, EndpointFigures>;
  /** CPU while the HTTP phase ran: core-api and PostgreSQL, seconds. */
  usage: Usage;
  coreApiCpuS: number;
  postgresCpuS: number;
  /** Seconds each endpoint was polled in the served phase. */
  servedS?: number;
}

/** How long the served phase polls each endpoint: past the cache's 30 s life, so refreshes happen under it. */
const SERVED_S = 40;
/** Pause between one caller's polls in the served phase. */
const POLL_MS = 50;

/** Status after change j (1-based) of customer i: about one change in five is a churn. */
const change = (i: string, j: string) =>
  `(CASE (${i} + ${j}) % 5 WHEN 0 THEN 'churned' WHEN 1 THEN 'paused' ELSE 'active' END)`;
const initial = (i: string) => `(CASE WHEN ${i} % 3 = 0 THEN 'trial' ELSE 'active' END)`;

async function generate(ctx: BenchContext, n: number): Promise<{ tenant: string; apiKey: string; rows: number }> {
  const env = { STACK_PROFILE: ctx.profile.name, DATABASE_URL: ctx.urls.DATABASE_URL };
  const ws = JSON.parse(
    await node('infra/bin/bootstrap.js', ['--json', '--plan', 'enterprise', '--name', `bench analytics ${n}`], env),
  ) as { tenant_id: string; api_key: string };
  const tenant = ws.tenant_id;
  const sql = connectPg(ctx.urls.DATABASE_URL, 2);
  try {
    // Customer i: created up to 730 days ago, i % 4 status changes spread over its life; the
    // customers row holds the final status, the trigger's first row is set back to the initial one.
    await sql.unsafe(`INSERT INTO customers (tenant_id, name, arr, status, renewal_date, custom_fields, created_at,
        deleted_at)
      SELECT '${tenant}', 'Customer ' || i, 1000 + (i * 37) % 200000,
        CASE WHEN i % 4 = 0 THEN ${initial('i')} ELSE ${change('i', 'i % 4')} END,
        current_date + (i * 13) % 540 - 60,
        CASE WHEN i % 7 = 0 THEN '{"forecast_category":"commit"}'::jsonb ELSE '{}'::jsonb END,
        now() - ((i * 7919) % 730) * interval '1 day' - (i % 86400) * interval '1 second',
        CASE WHEN i % 50 = 0 THEN now() END
      FROM generate_series(1, ${n}) AS i`);
    await sql.unsafe(`UPDATE customer_status_history h SET status = ${initial('(substring(cu.name FROM 10)::int)')}
      FROM customers cu WHERE cu.tenant_id = '${tenant}' AND h.customer_id = cu.id AND h.tenant_id = '${tenant}'`);
    await sql.unsafe(`INSERT INTO customer_status_history (tenant_id, customer_id, status, changed_at)
      SELECT c.tenant_id, c.id, ${change('c.i', 'j')},
        c.created_at + (now() - c.created_at) * j / (c.i % 4 + 1)
      FROM (SELECT tenant_id, id, created_at, substring(name FROM 10)::int AS i FROM customers
            WHERE tenant_id = '${tenant}') c
        CROSS JOIN LATERAL generate_series(1, c.i % 4) AS j`);
    await sql.unsafe(`INSERT INTO customer_health (customer_id, tenant_id, score, status, dimensions, calculated_at)
      SELECT id, tenant_id, s, CASE WHEN s >= 70 THEN 'healthy' WHEN s < 40 THEN 'at_risk' ELSE 'neutral' END,
        '[]', now()
      FROM (SELECT id, tenant_id, (substring(name FROM 10)::int * 13) % 101 AS s,
              substring(name FROM 10)::int AS i FROM customers WHERE tenant_id = '${tenant}') c
      WHERE i % 5 <> 0`);
    await sql`ANALYZE customers`;
    await sql`ANALYZE customer_status_history`;
    await sql`ANALYZE customer_health`;
    const [r] = await sql<Array<{ n: number }>>`
      SELECT count(*)::int AS n FROM customer_status_history WHERE tenant_id = ${tenant}`;
    return { tenant, apiKey: ws.api_key, rows: r.n };
  } finally {
    await sql.end();
  }
}

/** Varied parameters, so that the figures are not one query's. */
function query(e: Endpoint, i: number): string {
  if (e === 'portfolio') return '';
  if (e === 'renewals') {
    const y = new Date().getUTCFullYear();
    const from = `${y}-${String((i % 12) + 1).padStart(2, '0')}`;
    const to = `${y + 1}-${String((i % 12) + 1).padStart(2, '0')}`;
    return `?from=${from}&to=${to}${i % 3 === 0 ? '&forecast_category=commit,at_risk' : ''}`;
  }
  return `?cohort_period=${i % 2 ? 'quarter' : 'month'}&months_out=${12 + (i % 25)}`;
}

async function sqlCeiling(ctx: BenchContext, tenant: string, runs: number): Promise<Record<Endpoint, LatencySummary>> {
  const sql = connectPg(ctx.urls.DATABASE_URL, 1);
  try {
    const out = {} as Record<Endpoint, LatencySummary>;
    for (const e of ENDPOINTS) {
      const h = new Histogram();
      for (let i = 0; i < runs; i++) {
        const now = new Date();
        const q = Object.fromEntries(new URLSearchParams(query(e, i)));
        const t0 = performance.now();
        if (e === 'portfolio') await portfolio(sql, tenant);
        else if (e === 'renewals') await renewals(sql, tenant, renewalRange(q, now));
        else await cohorts(sql, tenant, cohortWindow(q.cohort_period as 'month', Number(q.months_out), now), now);
        if (i > 0) h.record((performance.now() - t0) * 1000);
      }
      out[e] = h.summary();
    }
    return out;
  } finally {
    await sql.end();
  }
}

export async function analyticsScenario(ctx: BenchContext): Promise<AnalyticsResult> {
  const o = ctx.opts;
  const n = o.analyticsCustomers;
  const t0 = performance.now();
  const ws = await generate(ctx, n);
  const generateS = Math.round(performance.now() - t0) / 1000;
  say(`analytics: ${n} customers, ${ws.rows} status history rows in ${generateS} s`);
  const ceiling = await sqlCeiling(ctx, ws.tenant, Math.max(20, Math.floor(o.analyticsRequests / 4)));
  say(`analytics: bare SQL p99 ${ENDPOINTS.map((e) => `${e} ${ceiling[e].p99Ms} ms`).join(', ')}`);

  let api: Tier | undefined;
  try {
    const limits = JSON.stringify({ enterprise: { reads_per_min: 10_000_000, writes_per_min: 10_000_000 } });
    api = await startTier('core-api', 'API_PORT', {
      NATS_URL: ctx.urls.NATS_URL,
      DATABASE_URL: ctx.urls.DATABASE_URL,
      CLICKHOUSE_URL: ctx.urls.CLICKHOUSE_URL,
      STACK_PROFILE: ctx.profile.name,
      API_READS_PER_MIN: '10000000',
      API_PLAN_LIMITS: limits,
      ANALYTICS_CACHE_TTL_MS: '0',
    });
    const url = api.url;
    const get = async (e: Endpoint, i: number) => {
      const s = performance.now();
      const res = await fetch(`${url}/v1/analytics/${e}${query(e, i)}`, {
        headers: { authorization: `Bearer ${ws.apiKey}` },
      });
      await res.arrayBuffer();
      return { status: res.status, us: (performance.now() - s) * 1000 };
    };
    for (const e of ENDPOINTS) for (let i = 0; i < 5; i++) await get(e, i);
    const s = sampler(ctx, { 'core-api': () => [api!.pid] });
    const endpoints = {} as Record<Endpoint, EndpointFigures>;
    for (const e of ENDPOINTS) {
      const h = new Histogram();
      const statusCounts: Record<string, number> = {};
      let next = 0;
      const caller = async () => {
        for (let i = next++; i < o.analyticsRequests; i = next++) {
          const r = await get(e, i);
          h.record(r.us);
          statusCounts[r.status] = (statusCounts[r.status] ?? 0) + 1;
        }
      };
      await Promise.all(Array.from({ length: o.analyticsCallers }, caller));
      const errors = o.analyticsRequests - (statusCounts['200'] ?? 0);
      endpoints[e] = { http: { ...h.summary(), errors, statusCounts }, sql: ceiling[e] };
      say(`analytics: ${e} p50 ${h.summary().p50Ms} ms, p99 ${h.summary().p99Ms} ms, ${errors} errors`);
    }
    const usage = s.stop();
    await api.stop();
    api = undefined;
    await served(ctx, ws, endpoints);
    return {
      customers: n,
      historyRows: ws.rows,
      generateS,
      callers: o.analyticsCallers,
      requestsPerEndpoint: o.analyticsRequests,
      endpoints,
      usage,
      coreApiCpuS: cpuS(usage, 'core-api'),
      postgresCpuS: cpuS(usage, 'postgres'),
      servedS: SERVED_S,
    };
  } finally {
    await api?.stop();
  }
}

/** The served phase: a core API as deployed, each endpoint's default query polled by every caller. */
async function served(ctx: BenchContext, ws: { apiKey: string }, endpoints: Record<Endpoint, EndpointFigures>) {
  const api = await startTier('core-api', 'API_PORT', {
    NATS_URL: ctx.urls.NATS_URL,
    DATABASE_URL: ctx.urls.DATABASE_URL,
    CLICKHOUSE_URL: ctx.urls.CLICKHOUSE_URL,
    STACK_PROFILE: ctx.profile.name,
    API_READS_PER_MIN: '10000000',
    API_PLAN_LIMITS: JSON.stringify({ enterprise: { reads_per_min: 10_000_000, writes_per_min: 10_000_000 } }),
  });
  try {
    for (const e of ENDPOINTS) {
      const get = async () => {
        const t0 = performance.now();
        const res = await fetch(`${api.url}/v1/analytics/${e}`, { headers: { authorization: `Bearer ${ws.apiKey}` } });
        await res.arrayBuffer();
        return { ok: res.status === 200, ms: performance.now() - t0 };
      };
      const cold = await get();
      const h = new Histogram();
      let errors = cold.ok ? 0 : 1;
      const until = performance.now() + SERVED_S * 1000;
      const caller = async () => {
        while (performance.now() < until) {
          const r = await get();
          h.record(r.ms * 1000);
          if (!r.ok) errors++;
          await new Promise((r) => setTimeout(r, POLL_MS));
        }
      };
      await Promise.all(Array.from({ length: ctx.opts.analyticsCallers }, caller));
      endpoints[e].served = { ...h.summary(), errors, coldMs: Math.round(cold.ms) };
      say(
        `analytics: ${e} served p99 ${h.summary().p99Ms} ms over ${h.summary().count} requests (cold ${Math.round(cold.ms)} ms)`,
      );
    }
  } finally {
    await api.stop();
  }
}

/** The rows of bench/RESULTS.md; `bound` is report.ts's boundBy (passed in: report.ts imports this file). */
export function analyticsRows(
  r: AnalyticsResult,
  bound: (u: Usage) => string,
): Array<{ figure: string; measured: string; target: string; ratio: string; bound: string }> {
  const served = ENDPOINTS.filter((e) => r.endpoints[e].served).map((e) => {
    const f = r.endpoints[e];
    const v = f.served!;
    const target = ANALYTICS_TARGET_MS[e];
    return {
      figure:
        `Analytics served as deployed: GET /v1/analytics/${e} polled by ${r.callers} callers for ${r.servedS} s ` +
        `(answers at most 30 s old, refreshed in the background), ${r.customers / 1000}k customers`,
      measured:
        `p50 ${v.p50Ms} ms, p99 ${v.p99Ms} ms over ${v.count} requests, ${v.errors} errors; ` +
        `the first (cold) request ${v.coldMs} ms`,
      target: `p99 ≤ ${target} ms`,
      ratio: `${(v.p99Ms / target).toFixed(2)} of target; cold request ${(v.coldMs / Math.max(f.sql.p50Ms, 0.001)).toFixed(2)} × the bare SQL's p50`,
      bound: '—',
    };
  });
  const computed = ENDPOINTS.map((e) => {
    const f = r.endpoints[e];
    const target = ANALYTICS_TARGET_MS[e];
    return {
      figure:
        `Analytics: GET /v1/analytics/${e}, ${r.customers / 1000}k customers, ` +
        `${Math.round(r.historyRows / 1000)}k history rows, ${r.callers} callers, every request computed (no cache)`,
      measured:
        `p50 ${f.http.p50Ms} ms, p99 ${f.http.p99Ms} ms over ${f.http.count} requests, ${f.http.errors} errors; ` +
        `bare SQL p50 ${f.sql.p50Ms} ms, p99 ${f.sql.p99Ms} ms`,
      target: `p99 ≤ ${target} ms`,
      ratio:
        `${(f.http.p99Ms / target).toFixed(2)} of target; ` +
        `p99 ${(f.http.p99Ms / Math.max(f.sql.p99Ms, 0.001)).toFixed(2)} × the bare SQL's`,
      bound: `${bound(r.usage)}; CPU over the three: core-api ${r.coreApiCpuS} s, PostgreSQL ${r.postgresCpuS} s`,
    };
  });
  return [...served, ...computed];
}
