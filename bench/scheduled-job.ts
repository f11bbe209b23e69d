import type { connectPg } from '../lib/pg.js';
import { sampler, type BenchContext } from './context.js';
import type { Usage } from './proc-stats.js';
import { BenchError, sleep, startTier, type Tier } from './tiers.js';

/**
 * What the scenarios of scheduled per-workspace jobs (health, metrics, playbooks) share: the
 * processors environment, one scheduled run of a job for one workspace timed by its lease row,
 * and a core API without rate limits for the latency phases.
 */

/** CPU seconds of a process group over a sampled interval. */
export const cpuS = (u: Usage, group: string): number => Math.round((u.groups[group]?.cpuPct ?? 0) * u.seconds) / 100;

/** Any workspace id no scenario uses: a job scoped to it runs for nobody. */
export const NOBODY = '00000000-0000-0000-0000-000000000000';

export function processorsEnv(ctx: BenchContext, extra: Record<string, string>): Record<string, string> {
  return {
    NATS_URL: ctx.urls.NATS_URL,
    CLICKHOUSE_URL: ctx.urls.CLICKHOUSE_URL,
    DATABASE_URL: ctx.urls.DATABASE_URL,
    STACK_PROFILE: ctx.profile.name,
    PROCESSORS_THREADS: '2',
    WEBHOOK_ALLOW_HTTP: 'true',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    ...extra,
  };
}

export interface ScheduledRun {
  seconds: number;
  usage: Usage;
  processorsCpuS: number;
  clickhouseCpuS: number;
  /** The JSON log line processors wrote when the run finished (it carries the run's own figures). */
  finished?: Record<string, unknown>;
}

/**
 * One scheduled run of `job` for `tenant` by a processors instance started for it. The lease row
 * is set "just finished" before processors starts (no instance runs it), then, once processors is
 * ready and sampled, moved back past the 20 s interval `intervalVar` sets for this instance but
 * not past the hour of any other instance: this one runs it at its next tick. The duration is the
 * lease row's own (last_started_at → last_finished_at); last_started_at is cleared first, so a
 * second run is never timed from the first one's start.
 */
export async function scheduledRun(
  ctx: BenchContext,
  sql: ReturnType<typeof connectPg>,
  o: { job: string; tenant: string; env: Record<string, string>; intervalVar: string; finishedLog: string },
): Promise<ScheduledRun> {
  await sql`
    INSERT INTO job_leases (job, tenant_id, last_finished_at) VALUES (${o.job}, ${o.tenant}, now() + interval '1 day')
    ON CONFLICT (job, tenant_id) DO UPDATE SET last_finished_at = EXCLUDED.last_finished_at, last_started_at = NULL`;
  const tier = await startTier(
    'processors',
    'PROCESSORS_PORT',
    processorsEnv(ctx, { ...o.env, [o.intervalVar]: '20000', LOG_LEVEL: 'info' }),
  );
  const s = sampler(ctx, { processors: () => [tier.pid] });
  try {
    await sql`UPDATE job_leases SET last_finished_at = now() - interval '30 seconds'
      WHERE job = ${o.job} AND tenant_id = ${o.tenant}`;
    const deadline = Date.now() + 30 * 60_000;
    for (;;) {
      const [l] = await sql<Array<{ started: Date | null; finished: Date | null }>>`
        SELECT last_started_at AS started, last_finished_at AS finished FROM job_leases
        WHERE job = ${o.job} AND tenant_id = ${o.tenant}`;
      if (l.started && l.finished && l.finished > l.started) {
        const usage = s.stop();
        await sleep(200);
        const line = tier
          .output()
          .split('\n')
          .find((x) => x.includes(o.finishedLog));
        return {
          seconds: (l.finished.getTime() - l.started.getTime()) / 1000,
          usage,
          processorsCpuS: cpuS(usage, 'processors'),
          clickhouseCpuS: cpuS(usage, 'clickhouse'),
          finished: line ? (JSON.parse(line) as Record<string, unknown>) : undefined,
        };
      }
      if (Date.now() > deadline || tier.proc.exitCode !== null)
        throw new BenchError(`${o.job}: the scheduled run did not finish:\n${tier.output().trim().slice(-1500)}`);
      await sleep(100);
    }
  } finally {
    s.stop();
    await tier.stop();
  }
}

/** A core API whose rate limits never throttle the benchmark's callers. */
export function startUnlimitedCoreApi(ctx: BenchContext): Promise<Tier> {
  const limits = JSON.stringify({
    enterprise: { reads_per_min: 10_000_000, writes_per_min: 10_000_000, bulk_imports_per_hour: 1000 },
  });
  return startTier('core-api', 'API_PORT', {
    NATS_URL: ctx.urls.NATS_URL,
    DATABASE_URL: ctx.urls.DATABASE_URL,
    CLICKHOUSE_URL: ctx.urls.CLICKHOUSE_URL,
    STACK_PROFILE: ctx.profile.name,
    API_WRITES_PER_MIN: '10000000',
    API_READS_PER_MIN: '10000000',
    API_PLAN_LIMITS: limits,
  });
}
