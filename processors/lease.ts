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
 * - before a run it takes the workspace's lease in job_leases with one conditional upsert that
 *   succeeds only while the lease is free and the workspace still due: two instances never run the
 *   same (job, workspace) at once, and a workspace just finished by another is not run again;
 * - the lease is renewed while the run lasts and released at its end with last_finished_at; a
 *   killed holder's lease runs out after `leaseTtlMs` and another instance takes the workspace;
 * - a failed run frees the lease with a short back-off instead of marking the workspace done.
 */
export class LeasedSchedule {
  private readonly ticker: Ticker;

  constructor(
    private readonly sql: Sql,
    private readonly work: LeasedJob,
    private readonly log: Logger,
    private readonly o: LeasedScheduleOptions,
  ) {
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
      if (!(await this.acquire(tenantId))) continue;
      await this.runLeased(tenantId);
    }
  }

  /** Takes the lease if it is free and the workspace is still due. */
  async acquire(tenantId: string): Promise<boolean> {
    const { job, holder, leaseTtlMs, intervalMs } = this.o;
    const rows = await this.sql`
      INSERT INTO job_leases AS l (job, tenant_id, holder, expires_at, last_started_at)
      VALUES (${job}, ${tenantId}, ${holder}, now() + (${leaseTtlMs}::float8 * interval '1 ms'), now())
      ON CONFLICT (job, tenant_id) DO UPDATE
        SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at, last_started_at = now()
        WHERE l.expires_at < now()
          AND (l.last_finished_at IS NULL
               OR l.last_finished_at < now() - (${intervalMs}::float8 * interval '1 ms'))
      RETURNING 1`;
    return rows.length === 1;
  }

  private async runLeased(tenantId: string): Promise<void> {
    const { job, holder, leaseTtlMs } = this.o;
    const renew = setInterval(
      () =>
        void this.sql`
          UPDATE job_leases SET expires_at = now() + (${leaseTtlMs}::float8 * interval '1 ms')
          WHERE job = ${job} AND tenant_id = ${tenantId} AND holder = ${holder}`.then(
          (r) => {
            if (r.count === 0) this.log.warn({ tenantId, job }, `${job} lease lost during a run`);
          },
          (err: unknown) => this.log.warn({ err: String(err), tenantId, job }, `${job} lease renewal failed`),
        ),
      Math.max(500, Math.floor(leaseTtlMs / 3)),
    );
    const t0 = performance.now();
    try {
      const r = await this.work.run(tenantId, () => this.stopping);
      clearInterval(renew);
      await this.sql`
        UPDATE job_leases SET holder = NULL, expires_at = '-infinity', last_finished_at = now()
        WHERE job = ${job} AND tenant_id = ${tenantId} AND holder = ${holder}`;
      this.work.finished?.('ok', performance.now() - t0);
      this.log.info({ tenantId, job, ...r }, `${job} run finished`);
    } catch (err) {
      clearInterval(renew);
      const aborted = this.stopping;
      this.work.finished?.(aborted ? 'aborted' : 'failed', performance.now() - t0);
      if (aborted) this.log.info({ tenantId, job }, `${job} run stopped by shutdown; another instance will redo it`);
      else this.log.error({ err, tenantId, job }, `${job} run failed`);
      // Stopped: free at once for another instance. Failed: retry after a pause, not in a hot loop.
      const backoffMs = aborted ? 0 : Math.min(this.o.intervalMs, 60_000);
      await this.sql`
        UPDATE job_leases SET holder = NULL, expires_at = now() + (${backoffMs}::float8 * interval '1 ms')
        WHERE job = ${job} AND tenant_id = ${tenantId} AND holder = ${holder}`.catch(() => {});
    }
  }

  stop(): Promise<void> {
    return this.ticker.stop();
  }
}
