import { Counter, Gauge, type Registry } from 'prom-client';
import type { Logger } from '../../lib/logger.js';
import { inTenant, type Sql } from '../../lib/pg.js';
import { GLOBAL_TENANT } from './schedule.js';

/**
 * How long ago each housekeeping job last finished (job_leases, the nil workspace), beside the
 * configured interval: a rule compares the two (docs/operations.md, HousekeepingOverdue). One
 * statement every `everyMs`, by one process of the tier.
 */
export class HousekeepingGauges {
  private timer?: NodeJS.Timeout;
  private readonly age: Gauge;
  private readonly failures: Counter;

  constructor(
    private readonly sql: Sql,
    registry: Registry,
    private readonly log: Logger,
    private readonly o: { jobs: readonly string[]; intervalMs: number; everyMs: number },
  ) {
    this.age = new Gauge({
      name: 'housekeeping_last_run_age_seconds',
      help: 'Per housekeeping task, the time since its last run finished (since it started when none finished)',
      labelNames: ['task'],
      registers: [registry],
      aggregator: 'max',
    });
    new Gauge({
      name: 'housekeeping_interval_seconds',
      help: 'The configured interval between housekeeping runs (HOUSEKEEPING_INTERVAL_MS)',
      registers: [registry],
      aggregator: 'max',
    }).set(o.intervalMs / 1000);
    this.failures = new Counter({
      name: 'housekeeping_gauges_sample_failures_total',
      help: 'Samples of the housekeeping ages that failed; the gauge keeps its last values',
      registers: [registry],
    });
  }

  start(): void {
    const tick = () =>
      this.sample().catch((err: unknown) => {
        this.failures.inc();
        this.log.debug({ err: String(err) }, 'housekeeping ages not sampled');
      });
    void tick();
    this.timer = setInterval(tick, this.o.everyMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  async sample(): Promise<void> {
    const rows = await this.sql<Array<{ job: string; age: number }>>`
      SELECT job, extract(epoch FROM now() - coalesce(last_finished_at, last_started_at))::float8 AS age
      FROM job_leases
      WHERE job = ANY(${this.o.jobs as string[]}::text[]) AND ${inTenant(GLOBAL_TENANT)}
        AND coalesce(last_finished_at, last_started_at) IS NOT NULL`;
    this.age.reset();
    for (const r of rows) this.age.set({ task: r.job }, Number(r.age));
  }
}
