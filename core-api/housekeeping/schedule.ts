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
 *   are due with one UPDATE … WHERE expires_at < now() RETURNING: the lease is free and the last
 *   run started more than an interval ago. PostgreSQL's row locks let one UPDATE win per row; the
 *   loser re-reads the row, sees the new last_started_at and claims nothing;
 * - the claimer runs them one after another and frees each lease; a run that fails is logged and
 *   waits for the next interval like a successful one (the jobs are idempotent DELETEs). While it
 *   runs, the leases it still holds are renewed, so they can be short: a process killed between
 *   claiming and freeing (a deploy's SIGKILL) blocks its jobs for one lease, not a quarter of an hour.
 * Each process decides "due" by its own interval, so processes configured differently coexist.
 */
export class Housekeeping {
  private readonly ticker: Ticker;
  private readonly leaseTtlMs: number;
  /** Aborted by stop(): a long job gives up between batches instead of holding the shutdown. */
  private readonly stopping = new AbortController();

  constructor(
    private readonly sql: Sql,
    private readonly jobs: readonly HousekeepingJob[],
    private readonly log: Logger,
    private readonly o: HousekeepingOptions,
  ) {
    this.leaseTtlMs = o.leaseTtlMs ?? 30_000;
    this.ticker = new Ticker(
      o.intervalMs,
      () => this.tick(),
      (err) => log.warn({ err }, 'housekeeping tick failed'),
    );
  }

  start(): void {
    this.ticker.start(Math.random() * 1000);
  }

  /** The due jobs this process now holds, with the time each was claimed (ms since epoch). */
  async claim(): Promise<Map<string, number>> {
    const names = this.jobs.map((j) => j.name);
    const { holder, intervalMs } = this.o;
    await this.sql`
      INSERT INTO job_leases (job, tenant_id) SELECT unnest(${names}::text[]), ${GLOBAL_TENANT}
      ON CONFLICT (job, tenant_id) DO NOTHING`;
    const rows = await this.sql<Array<{ job: string; at: number }>>`
      UPDATE job_leases
        SET holder = ${holder}, expires_at = now() + (${this.leaseTtlMs}::float8 * interval '1 ms'),
            last_started_at = now()
      WHERE job = ANY(${names}::text[]) AND tenant_id = ${GLOBAL_TENANT} AND expires_at < now()
        AND (last_started_at IS NULL OR last_started_at < now() - (${intervalMs}::float8 * interval '1 ms'))
      RETURNING job, extract(epoch FROM last_started_at)::float8 * 1000 AS at`;
    return new Map(rows.map((r) => [r.job, r.at]));
  }

  private async tick(): Promise<void> {
    const claimed = await this.claim();
    if (claimed.size === 0) return;
    const held = new Set(claimed.keys());
    const renew = setInterval(
      () =>
        void this.sql`
          UPDATE job_leases SET expires_at = now() + (${this.leaseTtlMs}::float8 * interval '1 ms')
          WHERE job = ANY(${[...held]}::text[]) AND tenant_id = ${GLOBAL_TENANT} AND holder = ${this.o.holder}`.catch(
          (err: unknown) => this.log.warn({ err }, 'housekeeping lease renewal failed'),
        ),
      Math.max(1000, Math.floor(this.leaseTtlMs / 3)),
    );
    try {
      await this.runClaimed(claimed, held);
    } finally {
      clearInterval(renew);
    }
  }

  private async runClaimed(claimed: Map<string, number>, held: Set<string>): Promise<void> {
    for (const job of this.jobs) {
      if (!claimed.has(job.name)) continue;
      const t0 = performance.now();
      try {
        const deleted = await job.run(this.sql, this.stopping.signal);
        const ms = Math.round(performance.now() - t0);
        this.log.info({ job: job.name, deleted, ms, claimedAt: claimed.get(job.name) }, 'housekeeping job finished');
      } catch (err) {
        this.log.warn({ err, job: job.name }, 'housekeeping job failed');
      } finally {
        held.delete(job.name);
        await this.sql`
          UPDATE job_leases SET holder = NULL, expires_at = '-infinity', last_finished_at = now()
          WHERE job = ${job.name} AND tenant_id = ${GLOBAL_TENANT} AND holder = ${this.o.holder}`.catch(
          (err: unknown) => this.log.warn({ err, job: job.name }, 'housekeeping lease release failed'),
        );
      }
    }
  }

  stop(): Promise<void> {
    this.stopping.abort();
    return this.ticker.stop();
  }
}
