import type { Logger } from '../../lib/logger.js';
import { tenantOfSubject } from '../../lib/nats.js';
import { inTenant, inTenants, type Sql } from '../../lib/pg.js';
import { Ticker } from '../../lib/ticker.js';
import type { ClickHouse } from '../clickhouse.js';
import type { RowsMessage } from '../writer/held.js';
import { ClickHouseErasure, IDS_PER_STATEMENT, type TableCounts } from './clickhouse.js';
import type { ErasedCustomers } from './erased-customers.js';
import { erasePostgres } from './postgres.js';

export interface EraserOptions {
  /** This process, as the erasures' lease holder. */
  holder: string;
  /** Pause between looks for queued erasures. */
  pollMs: number;
  /** Lease lifetime; renewed every third of it while a run lasts. */
  leaseTtlMs: number;
  /** Only these workspaces (empty: all). */
  tenants: string[];
  /** How long after completion rows of an erased customer are still watched for (the stream's max age). */
  watchMs: number;
  /** A workspace where late rows may have landed is looked at again at most this often. */
  sweepMs: number;
  /** Every workspace under watch is looked at this often, reported or not (rows that came another way). */
  fullSweepMs: number;
}

interface Claimed {
  id: string;
  tenant_id: string;
  clickhouse_pending: Record<string, number>;
}

/** Passes over the tables before a run gives up for now (rows of the customers keep arriving). */
const MAX_PASSES = 5;

/**
 * Carries out queued erasures (docs/erasure.md), with any number of processors instances:
 * - each poll claims the open erasures of one workspace (up to 1000) with one UPDATE … FOR UPDATE
 *   SKIP LOCKED over the rows whose lease is free: one instance per erasure, a killed holder's
 *   erasures taken over when its lease runs out. Work is per workspace: one mutation per table for
 *   all its claimed customers, never one per customer (a mutation rewrites whole parts);
 * - ClickHouse first, in passes: wait for the workspace's unfinished mutations, count each
 *   customer's rows per table, record the counts as pending, issue a mutation per table that has
 *   rows; the next pass finds them done and moves pending to removed. A pass that finds no row
 *   ends it. Every step is safe to repeat, so a run killed anywhere resumes from its records;
 * - then PostgreSQL and the completion in one transaction (postgres.ts);
 * - the writer drops the rows of erased customers (erased-customers.ts), but a row it checked
 *   before this process knew of the erasure can still land after the erasure ran. Such workspaces
 *   are reported: by the list when it learns of their erasures (`report`: rows stored before), and
 *   by the writer when it stores rows checked against an older list (`stored`: a map lookup per
 *   message, and only while an erasure was learned in the last minutes). A reported workspace is
 *   counted again, and erasures found with rows go back to running, so the same machinery removes
 *   them and adds them to the counts. Every workspace under watch is also counted every
 *   `fullSweepMs` (rows another process stored before it knew);
 * - a report is let go only by a sweep that counted every erasure of its workspace as completed:
 *   while one is still open (run by another instance, past its last count, or waiting out a
 *   backoff) the rows reported may have landed after that run's last count, so the workspace stays
 *   reported and is counted again once the erasure completed; a sweep that fails keeps it too.
 */
export class Eraser {
  private readonly ticker: Ticker;
  private readonly chx: ClickHouseErasure;
  /** Workspaces with an erasure open or completed within watchMs. */
  private watched = new Set<string>();
  /** Workspaces where rows of an erased customer may have landed since their last sweep. */
  private reported = new Set<string>();
  private lastSweep = new Map<string, number>();
  private lastFullSweep = 0;

  constructor(
    private readonly sql: Sql,
    ch: ClickHouse,
    private readonly log: Logger,
    private readonly erased: Pick<ErasedCustomers, 'lateFor' | 'learning'>,
    private readonly o: EraserOptions,
  ) {
    this.chx = new ClickHouseErasure(ch, log);
    this.ticker = new Ticker(
      o.pollMs * 4,
      () => this.tick(),
      (err) => log.warn({ err: String(err) }, 'erasure poll failed'),
    );
  }

  start(): void {
    this.ticker.start(0);
  }

  stop(): Promise<void> {
    return this.ticker.stop();
  }

  /**
   * The writer's hook: messages whose rows are stored, checked against the erased customers of
   * `generation`. Nothing while no erasure was learned lately; else a map lookup per message.
   */
  stored(messages: readonly RowsMessage[], generation: number): void {
    if (!this.erased.learning) return;
    for (const m of messages) {
      const tenant = tenantOfSubject(m.subject);
      if (this.erased.lateFor(tenant, generation) && this.mine(tenant!)) this.reported.add(tenant!);
    }
  }

  /** Workspaces where rows of an erased customer may have landed: counted once their erasures completed. */
  report(tenants: Iterable<string>): void {
    for (const t of tenants) if (this.mine(t)) this.reported.add(t);
  }

  private mine(tenantId: string): boolean {
    return this.o.tenants.length === 0 || this.o.tenants.includes(tenantId);
  }

  private async tick(): Promise<void> {
    await this.refreshWatch();
    // A sweep that fails (its workspaces stay reported) never holds up the queued erasures.
    await this.sweep().catch((err: unknown) => this.log.warn({ err: String(err) }, 'erasure sweep failed'));
    while (!this.ticker.stopping) {
      const claimed = await this.claim();
      if (!claimed.length) return;
      await this.runClaimed(claimed);
    }
  }

  private async refreshWatch(): Promise<void> {
    const rows = await this.sql<Array<{ tenant_id: string }>>`
      SELECT DISTINCT tenant_id::text FROM erasures
      WHERE (status <> 'completed' OR completed_at > now() - (${this.o.watchMs}::float8 * interval '1 ms'))
        AND ${inTenants(this.o.tenants)}`;
    this.watched = new Set(rows.map((r) => r.tenant_id));
  }

  /** Workspaces reported (at most every sweepMs each), and all watched ones every fullSweepMs. */
  private async sweep(): Promise<void> {
    const now = Date.now();
    const due = new Set<string>();
    for (const t of this.reported) if (now - (this.lastSweep.get(t) ?? 0) >= this.o.sweepMs) due.add(t);
    if (now - this.lastFullSweep >= this.o.fullSweepMs) {
      this.lastFullSweep = now;
      for (const t of this.watched) due.add(t);
    }
    if (!due.size) return;
    const tables = await this.chx.tables();
    for (const tenantId of due) {
      if (this.ticker.stopping) return;
      // A row reported from here on may be missed by this count: stored() reports it again for the next sweep.
      const reported = this.reported.delete(tenantId);
      this.lastSweep.set(tenantId, now);
      let settled = false;
      try {
        settled = await this.sweepWorkspace(tables, tenantId);
      } finally {
        if (reported && !settled) this.reported.add(tenantId);
      }
    }
    for (const [t, at] of this.lastSweep) if (now - at > this.o.sweepMs) this.lastSweep.delete(t);
  }

  /**
   * Counts the rows of the workspace's recently completed erasures; those found with rows go back to
   * running. False while an erasure of the workspace is still open: rows reported now may have landed
   * after its run's last count, and only a count after its completion can tell.
   */
  private async sweepWorkspace(tables: string[], tenantId: string): Promise<boolean> {
    const rows = await this.sql<Array<{ id: string; completed: boolean }>>`
      SELECT customer_id::text AS id, status = 'completed' AS completed FROM erasures WHERE ${inTenant(tenantId)}
        AND (status <> 'completed' OR completed_at > now() - (${this.o.watchMs}::float8 * interval '1 ms'))`;
    const ids = rows.filter((r) => r.completed).map((r) => r.id);
    const settled = ids.length === rows.length;
    if (!ids.length) return settled;
    const late = new Set<string>();
    for (const m of (await this.chx.count(tables, tenantId, ids)).values()) for (const id of m.keys()) late.add(id);
    if (!late.size) return settled;
    await this.sql`
      UPDATE erasures SET status = 'running'
      WHERE ${inTenant(tenantId)} AND customer_id = ANY(${[...late]}::uuid[]) AND status = 'completed'`;
    this.log.warn(
      { tenantId, customers: late.size },
      'rows of erased customers arrived after their erasure; erasing again',
    );
    return settled;
  }

  /** The open erasures of one workspace whose lease is free, now held by this process. */
  private async claim(): Promise<Claimed[]> {
    const { holder, leaseTtlMs } = this.o;
    return this.sql<Claimed[]>`
      UPDATE erasures e SET status = 'running', holder = ${holder}, attempts = e.attempts + 1,
        lease_expires_at = now() + (${leaseTtlMs}::float8 * interval '1 ms'), started_at = coalesce(e.started_at, now())
      WHERE e.customer_id IN (
        SELECT customer_id FROM erasures
        WHERE status <> 'completed' AND lease_expires_at < now() AND tenant_id = (
          SELECT tenant_id FROM erasures
          WHERE status <> 'completed' AND lease_expires_at < now() AND ${inTenants(this.o.tenants)}
          ORDER BY requested_at LIMIT 1)
        ORDER BY requested_at LIMIT ${IDS_PER_STATEMENT} FOR UPDATE SKIP LOCKED)
      RETURNING e.customer_id::text AS id, e.tenant_id::text, e.clickhouse_pending`;
  }

  private async runClaimed(claimed: Claimed[]): Promise<void> {
    const { holder, leaseTtlMs } = this.o;
    const tenantId = claimed[0].tenant_id;
    const ids = claimed.map((c) => c.id);
    const renew = setInterval(
      () =>
        void this.sql`
          UPDATE erasures SET lease_expires_at = now() + (${leaseTtlMs}::float8 * interval '1 ms')
          WHERE customer_id = ANY(${ids}::uuid[]) AND holder = ${holder} AND status = 'running'`.catch((err: unknown) =>
          this.log.warn({ err: String(err), tenantId }, 'erasure lease renewal failed'),
        ),
      Math.max(500, Math.floor(leaseTtlMs / 3)),
    );
    const t0 = performance.now();
    try {
      const pending = new Map(claimed.map((c) => [c.id, c.clickhouse_pending]));
      await this.eraseClickHouse(tenantId, ids, pending);
      const done = await this.sql.begin(async (tx) => {
        const t = tx as unknown as Sql;
        const removed = await erasePostgres(t, tenantId, ids);
        const rows = JSON.stringify([...removed].map(([id, r]) => ({ id, r })));
        return (
          await t`
            UPDATE erasures e SET status = 'completed', completed_at = now(), holder = NULL,
              lease_expires_at = '-infinity', clickhouse_pending = '{}',
              postgres_rows = (SELECT coalesce(jsonb_object_agg(k, coalesce((e.postgres_rows->>k)::bigint, 0)
                                 + coalesce((u.r->>k)::bigint, 0)), '{}')
                               FROM (SELECT jsonb_object_keys(e.postgres_rows || u.r) AS k) keys)
            FROM jsonb_to_recordset(${rows}::text::jsonb) AS u(id uuid, r jsonb)
            WHERE e.customer_id = u.id AND e.holder = ${holder} AND e.status = 'running'`
        ).count;
      });
      this.log.info(
        { tenantId, customers: ids.length, completed: done, ms: Math.round(performance.now() - t0) },
        'erasure completed',
      );
    } catch (err) {
      const stopped = this.ticker.stopping;
      if (stopped) this.log.info({ tenantId }, 'erasure stopped by shutdown; it resumes from its records');
      else this.log.error({ err, tenantId }, 'erasure failed; it resumes from its records');
      const backoffMs = stopped ? 0 : Math.min(60_000, this.o.pollMs * 10);
      await this.sql`
        UPDATE erasures SET holder = NULL, lease_expires_at = now() + (${backoffMs}::float8 * interval '1 ms')
        WHERE customer_id = ANY(${ids}::uuid[]) AND holder = ${holder} AND status = 'running'`.catch(() => {});
    } finally {
      clearInterval(renew);
    }
  }

  /**
   * Passes until no row of the customers is left in any table. Within a pass the counts taken after
   * the workspace's mutations settled say what the previous pass's mutations removed: what was
   * pending less what is still there (rows that arrived since are pending again).
   */
  private async eraseClickHouse(
    tenantId: string,
    ids: string[],
    pending: Map<string, Record<string, number>>,
  ): Promise<void> {
    const tables = await this.chx.tables();
    const stopping = () => this.ticker.stopping;
    // Which (table, customer) a mutation was issued for: all pending rows of those are removed once
    // it is done; rows counted after are arrivals since. A killed run's are read from ClickHouse.
    const resumed = [...pending.values()].some((p) => Object.keys(p).length > 0);
    const commands = resumed ? await this.chx.issued(tables, tenantId) : new Map<string, string>();
    const issued = (table: string, id: string) => commands.get(table)?.includes(id) === true;
    for (let pass = 0; ; pass++) {
      await this.chx.settle(tables, tenantId, stopping);
      const now = await this.chx.count(tables, tenantId, ids);
      await this.record(ids, pending, now, issued);
      if (now.size === 0) return;
      if (pass >= MAX_PASSES) throw new Error(`rows keep arriving after ${MAX_PASSES} passes`);
      if (stopping()) throw new Error('stopping');
      for (const [table, m] of now) {
        await this.chx.mutate(table, tenantId, [...m.keys()], stopping);
        commands.set(table, `${commands.get(table) ?? ''}\n${[...m.keys()].join(' ')}`);
      }
    }
  }

  /**
   * Moves what the mutations removed to clickhouse_rows and keeps the rows still there as pending:
   * all that was pending where a mutation was issued (what is there now arrived after it), else
   * what is no longer there (a killed run recorded its counts but never issued the mutation).
   */
  private async record(
    ids: string[],
    pending: Map<string, Record<string, number>>,
    now: TableCounts,
    issued: (table: string, id: string) => boolean,
  ): Promise<void> {
    const rows: Array<{ id: string; gone: Record<string, number>; still: Record<string, number> }> = [];
    for (const id of ids) {
      const before = pending.get(id) ?? {};
      const gone: Record<string, number> = {};
      const still: Record<string, number> = {};
      for (const [table, n] of Object.entries(before)) {
        const d = issued(table, id) ? n : n - (now.get(table)?.get(id) ?? 0);
        if (d > 0) gone[table] = d;
      }
      for (const [table, m] of now) {
        const n = m.get(id);
        if (n) still[table] = n;
      }
      pending.set(id, still);
      rows.push({ id, gone, still });
    }
    await this.sql`
      UPDATE erasures e SET clickhouse_pending = u.still,
        clickhouse_rows = (SELECT coalesce(jsonb_object_agg(k, coalesce((e.clickhouse_rows->>k)::bigint, 0)
                             + coalesce((u.gone->>k)::bigint, 0)), '{}')
                           FROM (SELECT jsonb_object_keys(e.clickhouse_rows || u.gone) AS k) keys)
      FROM jsonb_to_recordset(${JSON.stringify(rows)}::text::jsonb) AS u(id uuid, gone jsonb, still jsonb)
      WHERE e.customer_id = u.id AND e.holder = ${this.o.holder}`;
  }
}
