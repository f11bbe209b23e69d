import { compileMetric } from '../lib/metrics/compile.js';
import { compileMetricGroup } from '../lib/metrics/group.js';
import { plan } from '../processors/metrics/materializer.js';
import { connectPg } from '../lib/pg.js';
import type { MetricDefinition } from '../schemas/core/metrics.js';
import { sampler, type BenchContext } from './context.js';
import { Histogram, type LatencySummary } from './histogram.js';
import type { Usage } from './proc-stats.js';
import { NOBODY, cpuS, scheduledRun, startUnlimitedCoreApi } from './scheduled-job.js';
import { BenchError, say } from './tiers.js';
import { generateWorkspace } from './workspace-data.js';

export interface MetricsResult {
  customers: number;
  events: number;
  metrics: number;
  /** By calculation. */
  calculations: Record<string, number>;
  generateS: number;
  /** One scheduled materialization of the workspace by processors, as its lease row records it. */
  run: { seconds: number; rows?: number; usage: Usage; processorsCpuS: number; clickhouseCpuS: number };
  /** The same compiled queries straight against ClickHouse, one after another as the materializer runs them. */
  ceiling: { seconds: number; usage: Usage; clickhouseCpuS: number; queries: number };
  /** One compiled query per metric (no grouping by source event), one after another. */
  perMetric: { seconds: number; usage: Usage; clickhouseCpuS: number; queries: number };
  /** POST /v1/metrics/test (sampled customers), `callers` concurrent callers. */
  testQuery: LatencySummary & { callers: number; errors: number; statusCounts: Record<string, number> };
}

const CALCULATIONS = ['count', 'sum', 'avg', 'max', 'distinct_count', 'last_value', 'exists'] as const;
const WINDOWS: MetricDefinition['window'][] = [
  { type: 'rolling', days: 30 },
  { type: 'rolling', days: 7 },
  { type: 'calendar', unit: 'month' },
  { type: 'calendar', unit: 'week' },
];
const FILTERS: MetricDefinition['filter'][] = [
  [],
  [{ field: 'properties.plan', op: 'eq', value: 'pro' }],
  [{ field: 'properties.amount', op: 'gt', value: 500 }],
  [{ field: 'properties.plan', op: 'in', value: ['pro', 'enterprise'] }],
];

/** `count` mixed calculations over the generated event names, windows and filters. */
export function benchDefinitions(count: number): MetricDefinition[] {
  return Array.from({ length: count }, (_, i) => {
    const calculation = CALCULATIONS[i % CALCULATIONS.length];
    return {
      source_event: `feature_${i % 15}`,
      calculation,
      target_property: calculation === 'count' || calculation === 'exists' ? null : 'amount',
      filter: FILTERS[Math.floor(i / 7) % FILTERS.length],
      window: WINDOWS[Math.floor(i / 3) % WINDOWS.length],
      grain: 'customer',
    };
  });
}

/**
 * `metricsCount` metrics of mixed calculations over a workspace of `metricsCustomers` customers
 * and `metricsEvents` events (./workspace-data.ts, with properties), every one a health driver of
 * the workspace so that each is materialized for every customer. Then: one scheduled
 * materialization by processors (health scoring off), the bare compiled queries as the ceiling,
 * and the latency of POST /v1/metrics/test over the same data.
 */
export async function metricsScenario(ctx: BenchContext): Promise<MetricsResult> {
  const o = ctx.opts;
  const ws = await generateWorkspace(ctx, {
    customers: o.metricsCustomers,
    events: o.metricsEvents,
    name: 'metrics',
    properties: true,
  });
  const tenant = ws.tenantId;
  const defs = benchDefinitions(o.metricsCount);
  const sql = connectPg(ctx.urls.DATABASE_URL, 2);
  try {
    await sql`
      INSERT INTO event_catalog (tenant_id, event_name)
      SELECT ${tenant}, 'feature_' || i FROM generate_series(0, 14) AS i ON CONFLICT DO NOTHING`;
    const ids: string[] = [];
    for (const [i, d] of defs.entries()) {
      const [row] = await sql<Array<{ id: string; slug: string }>>`
        INSERT INTO metrics (tenant_id, slug, name, source_event, calculation, target_property, filter, window_def,
          grain)
        VALUES (${tenant}, ${`bench_${i}`}, ${`Bench ${i}`}, ${d.source_event}, ${d.calculation},
          ${d.target_property ?? null},
          ${JSON.stringify(d.filter)}::text::jsonb, ${JSON.stringify(d.window)}::text::jsonb, 'customer')
        RETURNING id::text, slug`;
      ids.push(row.id);
    }
    // Drivers straight in the model (the API caps a model at 20): each metric needs every customer.
    const drivers = ids.map((metric_id, i) => ({
      metric_id,
      slug: `bench_${i}`,
      unit: null,
      weight: 1,
      target: 10,
      direction: 'higher_is_better',
    }));
    await sql`
      INSERT INTO health_models (tenant_id, model) VALUES (${tenant}, ${JSON.stringify({ drivers })}::text::jsonb)
      ON CONFLICT (tenant_id) DO UPDATE SET model = EXCLUDED.model`;

    const run = await materializeRun(ctx, sql, tenant);
    say(`metrics: ${defs.length} metrics materialized for ${o.metricsCustomers} customers in ${run.seconds} s`);
    const { ceiling, perMetric } = await ceilingRuns(ctx, tenant, defs);
    say(`metrics: bare ClickHouse time of the same ${ceiling.queries} queries ${ceiling.seconds} s`);
    say(`metrics: one query per metric instead: ${perMetric.seconds} s`);
    const testQuery = await testQueryLatency(ctx, ws.apiKey, defs);
    say(`metrics: test query p99 ${testQuery.p99Ms} ms, ${testQuery.errors} errors`);
    const calculations: Record<string, number> = {};
    for (const d of defs) calculations[d.calculation] = (calculations[d.calculation] ?? 0) + 1;
    return {
      customers: o.metricsCustomers,
      events: o.metricsEvents,
      metrics: defs.length,
      calculations,
      generateS: ws.generateS,
      run,
      ceiling,
      perMetric,
      testQuery,
    };
  } finally {
    await sql.end();
  }
}

/** One scheduled materialization; health scoring and playbooks off, so only the materializer runs. */
async function materializeRun(
  ctx: BenchContext,
  sql: ReturnType<typeof connectPg>,
  tenant: string,
): Promise<MetricsResult['run']> {
  const { finished, ...run } = await scheduledRun(ctx, sql, {
    job: 'metrics',
    tenant,
    env: { HEALTH_ENABLED: 'false', PLAYBOOKS_TENANTS: NOBODY, METRICS_TENANTS: tenant },
    intervalVar: 'METRICS_MATERIALIZE_INTERVAL_MS',
    finishedLog: 'metrics run finished',
  });
  return { ...run, rows: finished?.rows as number | undefined };
}

/** The given queries straight against ClickHouse, one after another as the materializer runs them. */
async function bareRun(ctx: BenchContext, queries: string[]): Promise<MetricsResult['ceiling']> {
  const s = sampler(ctx, {});
  const t0 = performance.now();
  for (const q of queries) await ctx.ch.query(`${q} FORMAT TabSeparated`);
  const seconds = Math.round(performance.now() - t0) / 1000;
  const usage = s.stop();
  return { seconds, usage, clickhouseCpuS: cpuS(usage, 'clickhouse'), queries: queries.length };
}

/**
 * The ceiling: the materializer's own queries (its plan: one per source event for the metrics
 * grouped by lib/metrics/group.ts, one per metric otherwise); beside it, one query per metric.
 */
async function ceilingRuns(
  ctx: BenchContext,
  tenant: string,
  defs: MetricDefinition[],
): Promise<Pick<MetricsResult, 'ceiling' | 'perMetric'>> {
  const now = new Date();
  const metrics = defs.map((definition, i) => ({ id: String(i), definition, customers: 'all' as const }));
  const planned = plan(metrics, now).map((unit) =>
    unit.length === 1
      ? compileMetric(unit[0].definition, { tenantId: tenant, now, customerIds: 'all' }).sql
      : compileMetricGroup(
          unit.map((m) => m.definition),
          { tenantId: tenant, now },
        ).sql,
  );
  const ceiling = await bareRun(ctx, planned);
  const perMetric = await bareRun(
    ctx,
    defs.map((d) => compileMetric(d, { tenantId: tenant, now, customerIds: 'all' }).sql),
  );
  return { ceiling, perMetric };
}

async function testQueryLatency(
  ctx: BenchContext,
  apiKey: string,
  defs: MetricDefinition[],
): Promise<MetricsResult['testQuery']> {
  const o = ctx.opts;
  const api = await startUnlimitedCoreApi(ctx);
  try {
    const post = async (i: number) => {
      const t0 = performance.now();
      const res = await fetch(`${api.url}/v1/metrics/test`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ definition: defs[i % defs.length] }),
      });
      await res.arrayBuffer();
      return { status: res.status, us: (performance.now() - t0) * 1000 };
    };
    const probe = await post(0);
    if (probe.status !== 200) throw new BenchError(`metrics: POST /v1/metrics/test answered ${probe.status}`);
    for (let i = 1; i < 10; i++) await post(i);
    const h = new Histogram();
    const statusCounts: Record<string, number> = {};
    let next = 0;
    const caller = async () => {
      while (next < o.metricsTestRequests) {
        const r = await post(next++);
        h.record(r.us);
        statusCounts[r.status] = (statusCounts[r.status] ?? 0) + 1;
      }
    };
    await Promise.all(Array.from({ length: o.metricsTestCallers }, caller));
    const errors = h.total - (statusCounts['200'] ?? 0);
    return { ...h.summary(), callers: o.metricsTestCallers, errors, statusCounts };
  } finally {
    await api.stop();
  }
}
