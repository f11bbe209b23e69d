import { compileMetric } from '../lib/metrics/compile.js';
import { connectPg } from '../lib/pg.js';
import type { MetricDefinition } from '../schemas/core/metrics.js';
import { sampler, type BenchContext } from './context.js';
import { Histogram, type LatencySummary } from './histogram.js';
import type { Usage } from './proc-stats.js';
import { BenchError, say, sleep, startTier } from './tiers.js';
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
  ceiling: { seconds: number; usage: Usage; clickhouseCpuS: number };
  /** POST /v1/metrics/test (sampled customers), `callers` concurrent callers. */
  testQuery: LatencySummary & { callers: number; errors: number; statusCounts: Record<string, number> };
}

const cpuS = (u: Usage, group: string) => Math.round((u.groups[group]?.cpuPct ?? 0) * u.seconds) / 100;
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

    const run = await scheduledRun(ctx, sql, tenant);
    say(`metrics: ${defs.length} metrics materialized for ${o.metricsCustomers} customers in ${run.seconds} s`);
    const ceiling = await ceilingRun(ctx, tenant, defs);
    say(`metrics: bare ClickHouse time of the same queries ${ceiling.seconds} s`);
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
      testQuery,
    };
  } finally {
    await sql.end();
  }
}

function processorsEnv(ctx: BenchContext, extra: Record<string, string>): Record<string, string> {
  return {
    NATS_URL: ctx.urls.NATS_URL,
    CLICKHOUSE_URL: ctx.urls.CLICKHOUSE_URL,
    DATABASE_URL: ctx.urls.DATABASE_URL,
    STACK_PROFILE: ctx.profile.name,
    PROCESSORS_THREADS: '2',
    HEALTH_ENABLED: 'false',
    ...extra,
  };
}

/** As the health scenario does: the lease row "just finished", then moved back past this instance's interval. */
async function scheduledRun(
  ctx: BenchContext,
  sql: ReturnType<typeof connectPg>,
  tenant: string,
): Promise<MetricsResult['run']> {
  await sql`
    INSERT INTO job_leases (job, tenant_id, last_finished_at) VALUES ('metrics', ${tenant}, now() + interval '1 day')`;
  const tier = await startTier(
    'processors',
    'PROCESSORS_PORT',
    processorsEnv(ctx, { METRICS_TENANTS: tenant, METRICS_MATERIALIZE_INTERVAL_MS: '20000', LOG_LEVEL: 'info' }),
  );
  const s = sampler(ctx, { processors: () => [tier.pid] });
  try {
    await sql`UPDATE job_leases SET last_finished_at = now() - interval '30 seconds'
      WHERE job = 'metrics' AND tenant_id = ${tenant}`;
    const deadline = Date.now() + 30 * 60_000;
    for (;;) {
      const [l] = await sql<Array<{ started: Date | null; finished: Date | null }>>`
        SELECT last_started_at AS started, last_finished_at AS finished FROM job_leases
        WHERE job = 'metrics' AND tenant_id = ${tenant}`;
      if (l.started && l.finished && l.finished > l.started) {
        const usage = s.stop();
        await sleep(200);
        const line = tier
          .output()
          .split('\n')
          .find((x) => x.includes('metrics run finished'));
        return {
          seconds: (l.finished.getTime() - l.started.getTime()) / 1000,
          rows: line ? (JSON.parse(line) as { rows?: number }).rows : undefined,
          usage,
          processorsCpuS: cpuS(usage, 'processors'),
          clickhouseCpuS: cpuS(usage, 'clickhouse'),
        };
      }
      if (Date.now() > deadline || tier.proc.exitCode !== null)
        throw new BenchError(`metrics: the materialization did not finish:\n${tier.output().trim().slice(-1500)}`);
      await sleep(100);
    }
  } finally {
    s.stop();
    await tier.stop();
  }
}

async function ceilingRun(
  ctx: BenchContext,
  tenant: string,
  defs: MetricDefinition[],
): Promise<MetricsResult['ceiling']> {
  const now = new Date();
  const queries = defs.map((d) => compileMetric(d, { tenantId: tenant, now, customerIds: 'all' }).sql);
  const s = sampler(ctx, {});
  const t0 = performance.now();
  for (const q of queries) await ctx.ch.query(`${q} FORMAT TabSeparated`);
  const seconds = Math.round(performance.now() - t0) / 1000;
  const usage = s.stop();
  return { seconds, usage, clickhouseCpuS: cpuS(usage, 'clickhouse') };
}

async function testQueryLatency(
  ctx: BenchContext,
  apiKey: string,
  defs: MetricDefinition[],
): Promise<MetricsResult['testQuery']> {
  const o = ctx.opts;
  const limits = JSON.stringify({
    enterprise: { reads_per_min: 10_000_000, writes_per_min: 10_000_000, bulk_imports_per_hour: 1000 },
  });
  const api = await startTier('core-api', 'API_PORT', {
    NATS_URL: ctx.urls.NATS_URL,
    DATABASE_URL: ctx.urls.DATABASE_URL,
    CLICKHOUSE_URL: ctx.urls.CLICKHOUSE_URL,
    STACK_PROFILE: ctx.profile.name,
    API_WRITES_PER_MIN: '10000000',
    API_READS_PER_MIN: '10000000',
    API_PLAN_LIMITS: limits,
  });
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
