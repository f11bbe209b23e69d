import type { Gauge, Registry } from 'prom-client';
import type { Logger } from '../../lib/logger.js';
import { Sampler } from '../../lib/sampler.js';
import { inTenant, type Sql } from '../../lib/pg.js';
import { gauge } from '../../lib/prometheus.js';
import { GLOBAL_TENANT } from './schedule.js';

/**
 * How long ago each housekeeping job last finished (job_leases, the nil workspace), beside the
 * configured interval: a rule compares the two (docs/operations.md, HousekeepingOverdue). One
 * statement every `everyMs`, by one process of the tier.
 */
export class HousekeepingGauges {
  private readonly loop: Sampler;
  private readonly age: Gauge;

  constructor(
    private readonly sql: Sql,
    registry: Registry,
    log: Logger,
    private readonly o: { jobs: readonly string[]; intervalMs: number; everyMs: number },
  ) {
    this.age = gauge(registry, 'housekeeping_last_run_age_seconds', ['task'], {
      help: 'Per housekeeping task, the time since its last run finished (since it started when none finished)',
      aggregator: 'max',
    });
    gauge(registry, 'housekeeping_interval_seconds', [], {
      help: 'The configured interval between housekeeping runs (HOUSEKEEPING_INTERVAL_MS)',
      aggregator: 'max',
    }).set(o.intervalMs / 1000);
    this.loop = new Sampler(() => this.sample(), registry, log, {
      name: 'housekeeping_gauges',
      what: 'the housekeeping ages',
      everyMs: o.everyMs,
    });
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
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
