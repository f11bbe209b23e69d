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
  constructor(
    sql: Sql,
    scorer: HealthScorer,
    log: Logger,
    metrics: HealthMetrics,
    o: SchedulerOptions,
    /** Called after each completed run (the playbooks of the workspace are evaluated then). */
    afterRun?: (tenantId: string) => void,
  ) {
    super(
      sql,
      {
        run: async (tenantId, stopping) => {
          const r = await scorer.scoreWorkspace(tenantId, stopping);
          afterRun?.(tenantId);
          return r;
        },
        finished: (outcome, ms) => metrics.run(outcome, ms),
      },
      log,
      { ...o, job: 'health' },
    );
  }
}
