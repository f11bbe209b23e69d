import type { Logger } from '../../lib/logger.js';
import type { Sql } from '../../lib/pg.js';
import { LeasedSchedule, type LeasedScheduleOptions } from '../lease.js';
import type { HealthMetrics } from '../metrics.js';
import type { HealthScorer } from './scorer.js';

export type SchedulerOptions = Omit<LeasedScheduleOptions, 'job'>;

/**
 * Recalculates every workspace every `intervalMs` behind a lease per workspace in job_leases
 * (job 'health'); ../lease.ts keeps the lease rules shared by every scheduled job.
 */
export class HealthScheduler extends LeasedSchedule {
  constructor(sql: Sql, scorer: HealthScorer, log: Logger, metrics: HealthMetrics, o: SchedulerOptions) {
    super(
      sql,
      {
        run: (tenantId, stopping) => scorer.scoreWorkspace(tenantId, stopping),
        finished: (outcome, ms) => metrics.run(outcome, ms),
      },
      log,
      { ...o, job: 'health' },
    );
  }
}
