import { type Lease, Leases } from '../../lib/lease.js';
import type { Logger } from '../../lib/logger.js';
import type { Sql } from '../../lib/pg.js';
import { Ticker } from '../../lib/ticker.js';
import type { HousekeepingJob } from './jobs.js';

/** Global jobs hold the lease row of no workspace. */
export const GLOBAL_TENANT = '00000000-0000-0000-0000-000000000000';

export interface HousekeepingOptions {
  /** A job runs again once its last run started longer ago than this. */
  intervalMs: number;
  /** This process, as the lease's holder. */
  holder: string;
  /**
   * A holder that dies between claiming and freeing blocks its job this long (default 30 s); a live
   * holder renews its leases every third of it while it runs.
   */
  leaseTtlMs?: number;
}

/**
 * Runs the global housekeeping jobs every `intervalMs` with any number of core-api processes, each
 * job by one process at a time and at most once per interval:
 * - each job has a row in job_leases (its name, the nil workspace);
 * - every tick (a quarter of the interval, at most 30 s, jittered) a process claims the jobs that
 *   are due in one statement (lib/lease.ts claimAll): the lease is free and the last run started
 *   more than an interval ago. PostgreSQL's row locks let one claim win per row; the loser re-reads
 *   the row, sees the new last_started_at and claims nothing;
 * - the claimer runs them one after another and frees each lease; a run that fails is logged and
 *   waits for the next interval like a successful one (the jobs are idempotent DELETEs). While it
 *   runs, the leases it still holds are renewed, so they can be short: a process killed between
 *   claiming and freeing (a deploy's SIGKILL) blocks its jobs for one lease, not a quarter of an hour.
 * Each process decides "due" by its own interval, so processes configured differently coexist.
 */
export class Housekeeping {
  private readonly ticker: Ticker;
  private readonly leases: Leases;
  /** Aborted by stop(): a long job gives up between batches instead of holding the shutdown. */
  private readonly stopping = new AbortController();

  constructor(
    private readonly sql: Sql,
    private readonly jobs: readonly HousekeepingJob[],
    private readonly log: Logger,
    private readonly o: HousekeepingOptions,
  ) {
    this.leases = new Leases(sql, log, { holder: o.holder, ttlMs: o.leaseTtlMs ?? 30_000 });
    this.ticker = new Ticker(
      o.intervalMs,
      () => this.tick(),
      (err) => log.warn({ err }, 'housekeeping tick failed'),
    );
  }

  start(): void {
    this.ticker.start(Math.random() * 1000);
  }

  /** The due jobs this process now holds, by name. */
  async claim(): Promise<Map<string, Lease>> {
    const names = this.jobs.map((j) => j.name);
    const held = await this.leases.claimAll(names, GLOBAL_TENANT, { afterMs: this.o.intervalMs, since: 'started' });
    return new Map(held.map((l) => [l.job, l]));
  }

  private async tick(): Promise<void> {
    const claimed = await this.claim();
    // Every lease renewed until its own job is done: the later ones wait their turn under theirs.
    const renewing = new Map(
      [...claimed.values()].map((l) => [
        l.job,
        l.keepRenewing(() => this.log.warn({ job: l.job }, 'housekeeping lease lost while held')),
      ]),
    );
    try {
      for (const job of this.jobs) {
        const lease = claimed.get(job.name);
        if (!lease) continue;
        const t0 = performance.now();
        try {
          const deleted = await job.run(this.sql, this.stopping.signal);
          const ms = Math.round(performance.now() - t0);
          this.log.info({ job: job.name, deleted, ms, claimedAt: lease.claimedAt }, 'housekeeping job finished');
        } catch (err) {
          this.log.warn({ err, job: job.name }, 'housekeeping job failed');
        } finally {
          renewing.get(job.name)?.();
          await lease
            .free({ finished: true })
            .catch((err: unknown) => this.log.warn({ err, job: job.name }, 'housekeeping lease release failed'));
        }
      }
    } finally {
      for (const stop of renewing.values()) stop();
    }
  }

  stop(): Promise<void> {
    this.stopping.abort();
    return this.ticker.stop();
  }
}
