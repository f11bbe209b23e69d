import { type Lease, Leases } from '../lib/lease.js';
import type { Logger } from '../lib/logger.js';
import type { Sql } from '../lib/pg.js';
import { Ticker } from '../lib/ticker.js';

export interface LeasedScheduleOptions {
  /** The job's name in job_leases ('health', 'metrics', …). */
  job: string;
  /** A workspace runs again when its last run finished longer ago than this. */
  intervalMs: number;
  /** Lease lifetime; renewed every third of it while a run lasts. */
  leaseTtlMs: number;
  /** This process, as the lease's holder. */
  holder: string;
  /** Only these workspaces (empty: all). */
  tenants: string[];
}

export type RunOutcome = 'ok' | 'failed' | 'aborted';

export interface LeasedJob {
  /** One workspace's run; `stopping` turns true at shutdown so a long run can give up early. */
  run(tenantId: string, stopping: () => boolean): Promise<object>;
  /** Called after each run with its outcome and duration. */
  finished?(outcome: RunOutcome, ms: number): void;
}

/**
 * Runs a per-workspace job every `intervalMs`, with any number of processors instances:
 * - every tick (about a quarter of the interval, at most 30 s) an instance lists the workspaces that
 *   are due (last run finished longer than an interval ago, no live lease), in a random order so
 *   that instances start on different ones, and works through them one at a time;
 * - before a run it takes the workspace's lease (lib/lease.ts), due when its last run finished longer
 *   than an interval ago: two instances never run the same (job, workspace) at once, and a workspace
 *   just finished by another is not run again;
 * - the lease is renewed while the run lasts and freed at its end with last_finished_at; a killed
 *   holder's lease runs out after `leaseTtlMs` and another instance takes the workspace;
 * - a failed run frees the lease with a short back-off instead of marking the workspace done.
 */
export class LeasedSchedule {
  private readonly ticker: Ticker;
  private readonly leases: Leases;

  constructor(
    private readonly sql: Sql,
    private readonly work: LeasedJob,
    private readonly log: Logger,
    private readonly o: LeasedScheduleOptions,
  ) {
    this.leases = new Leases(sql, log, { holder: o.holder, ttlMs: o.leaseTtlMs });
    this.ticker = new Ticker(
      o.intervalMs,
      () => this.tick(),
      (err) => log.warn({ err: String(err), job: o.job }, `${o.job} schedule tick failed`),
    );
  }

  private get stopping(): boolean {
    return this.ticker.stopping;
  }

  start(): void {
    this.ticker.start(0);
  }

  /** Due workspaces, in random order so that instances ticking together start on different ones. */
  async due(): Promise<string[]> {
    const only = this.o.tenants;
    const rows = await this.sql<Array<{ id: string }>>`
      SELECT t.id::text AS id FROM tenants t
      LEFT JOIN job_leases l ON l.job = ${this.o.job} AND l.tenant_id = t.id
      WHERE (l.tenant_id IS NULL OR (l.expires_at < now() AND (l.last_finished_at IS NULL
             OR l.last_finished_at < now() - (${this.o.intervalMs}::float8 * interval '1 ms'))))
        ${only.length ? this.sql`AND t.id = ANY(${only}::uuid[])` : this.sql``}
      ORDER BY random()
      LIMIT 1000`;
    return rows.map((r) => r.id);
  }

  private async tick(): Promise<void> {
    for (const tenantId of await this.due()) {
      if (this.stopping) return;
      const lease = await this.acquire(tenantId);
      if (lease) await this.runLeased(lease);
    }
  }

  /** Takes the lease if it is free and the workspace is still due. */
  async acquire(tenantId: string): Promise<Lease | undefined> {
    return this.leases.claim(this.o.job, tenantId, { afterMs: this.o.intervalMs, since: 'finished' });
  }

  private async runLeased(lease: Lease): Promise<void> {
    const { job } = this.o;
    const { tenantId } = lease;
    const stopRenewing = lease.keepRenewing(() => this.log.warn({ tenantId, job }, `${job} lease lost during a run`));
    const t0 = performance.now();
    try {
      const r = await this.work.run(tenantId, () => this.stopping);
      stopRenewing();
      await lease.free({ finished: true });
      this.work.finished?.('ok', performance.now() - t0);
      this.log.info({ tenantId, job, ...r }, `${job} run finished`);
    } catch (err) {
      stopRenewing();
      const aborted = this.stopping;
      this.work.finished?.(aborted ? 'aborted' : 'failed', performance.now() - t0);
      if (aborted) this.log.info({ tenantId, job }, `${job} run stopped by shutdown; another instance will redo it`);
      else this.log.error({ err, tenantId, job }, `${job} run failed`);
      // Stopped: free at once for another instance. Failed: retry after a pause, not in a hot loop.
      await lease.free({ retryAfterMs: aborted ? 0 : Math.min(this.o.intervalMs, 60_000) }).catch(() => {});
    }
  }

  stop(): Promise<void> {
    return this.ticker.stop();
  }
}
