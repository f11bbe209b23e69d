import type { Logger } from './logger.js';
import { inTenant, type Sql } from './pg.js';

/**
 * Leases in PostgreSQL's job_leases, one row per (job, workspace): what lets many processes run the
 * same loops while each piece of work has one holder at a time. Every kind of lease in the service
 * (scheduled per-workspace runs, core-api's housekeeping, the keyed writers' partitions) is one of
 * these; each says only what it leases, for how long and when it is due.
 *
 * - claim: one conditional upsert that succeeds only while the row's lease has run out (`expires_at
 *   < now()`) and, when the kind has a schedule, its last run is older than the interval. Two
 *   claimers at once: PostgreSQL's row lock lets one upsert win, the other re-reads the row and
 *   claims nothing.
 * - renew while running: every third of the lifetime; a renewal that matches no row (another holder
 *   took it) says the lease is lost.
 * - free: holder cleared and the lease expired at once (or after a back-off), with the run's
 *   finish time for the schedule.
 * - steal after expiry: nothing to do but claim; expiry is decided by PostgreSQL's clock alone, so
 *   the processes' clocks need not agree.
 * - fencing: the holder counts on the lease only until a third of the lifetime before PostgreSQL
 *   could give it away, measured on its own monotonic clock from when it sent the claim or the last
 *   renewal that succeeded (`valid()`); work that a stale holder must not finish checks it before
 *   it writes. A renewal's answer that comes late shortens that window, never lengthens it: the
 *   clock skew between holder and database within the renewal margin costs nothing.
 */

/** When a kind's work is due again: its last run started, or finished, longer ago than `afterMs`. */
export interface Due {
  afterMs: number;
  since: 'started' | 'finished';
}

export class Lease {
  private validUntil = 0;

  constructor(
    private readonly leases: Leases,
    readonly job: string,
    readonly tenantId: string,
    sentAt: number,
    /** When it was claimed, by PostgreSQL's clock (ms since epoch). */
    readonly claimedAt: number,
  ) {
    this.extended(sentAt);
  }

  /** Whether this holder may still count on the lease (fencing: checked before a write that must be the holder's). */
  valid(): boolean {
    return this.leases.now() < this.validUntil;
  }

  /** Called by the claim and by renewals that succeeded: counted on for two thirds of the lifetime from `sentAt`. */
  extended(sentAt: number): void {
    this.validUntil = sentAt + (this.leases.o.ttlMs * 2) / 3;
  }

  /** Renews the lease; false when another holder has it (lost). */
  async renew(): Promise<boolean> {
    return (await this.leases.renew([this])).has(this);
  }

  /**
   * Renews every third of the lifetime until the returned function is called; `lost` is told once if
   * a renewal finds the lease held by another.
   */
  keepRenewing(lost: () => void): () => void {
    let told = false;
    const timer = setInterval(
      () =>
        void this.renew().then(
          (ok) => {
            if (!ok && !told) {
              told = true;
              lost();
            }
          },
          (err: unknown) => this.leases.log.warn({ err: String(err), job: this.job }, 'lease renewal failed'),
        ),
      Math.max(200, Math.floor(this.leases.o.ttlMs / 3)),
    );
    return () => clearInterval(timer);
  }

  /**
   * Frees the lease: at once, or after `retryAfterMs` (a failed run waits a pause instead of being
   * taken again in a hot loop); `finished` records the run's end for the schedule.
   */
  async free(o: { finished?: boolean; retryAfterMs?: number } = {}): Promise<void> {
    this.validUntil = 0;
    const { sql } = this.leases;
    const expires = o.retryAfterMs ? sql`now() + (${o.retryAfterMs}::float8 * interval '1 ms')` : sql`'-infinity'`;
    await sql`
      UPDATE job_leases SET holder = NULL, expires_at = ${expires}
        ${o.finished ? sql`, last_finished_at = now()` : sql``}
      WHERE job = ${this.job} AND ${inTenant(this.tenantId)} AND holder = ${this.leases.o.holder}`;
  }
}

/** The leases one process holds, under one holder name and one lifetime. */
export class Leases {
  constructor(
    readonly sql: Sql,
    readonly log: Logger,
    readonly o: {
      holder: string;
      ttlMs: number;
      /**
       * The holder's monotonic clock (performance.now). One that runs slower than PostgreSQL's by
       * less than the margin (a third of the lifetime) still lets go before the lease expires.
       */
      clock?: () => number;
    },
  ) {}

  now(): number {
    return this.o.clock ? this.o.clock() : performance.now();
  }

  /** Claims (job, workspace) when its lease has run out and, with `due`, its work is due again. */
  async claim(job: string, tenantId: string, due?: Due): Promise<Lease | undefined> {
    const sent = this.now();
    const { sql } = this;
    const [row] = await sql<Array<{ at: number }>>`
      INSERT INTO job_leases AS l (job, tenant_id, holder, expires_at, last_started_at)
      VALUES (${job}, ${tenantId}, ${this.o.holder}, now() + (${this.o.ttlMs}::float8 * interval '1 ms'), now())
      ON CONFLICT (job, tenant_id) DO UPDATE
        SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at, last_started_at = now()
        WHERE l.expires_at < now() ${this.dueSql(due)}
      RETURNING extract(epoch FROM last_started_at)::float8 * 1000 AS at`;
    return row ? new Lease(this, job, tenantId, sent, row.at) : undefined;
  }

  /** claim() for several jobs of one workspace in one statement: the leases it got. */
  async claimAll(jobs: readonly string[], tenantId: string, due?: Due): Promise<Lease[]> {
    const sent = this.now();
    const { sql } = this;
    await sql`
      INSERT INTO job_leases (job, tenant_id) SELECT unnest(${jobs as string[]}::text[]), ${tenantId}
      ON CONFLICT (job, tenant_id) DO NOTHING`;
    const rows = await sql<Array<{ job: string; at: number }>>`
      UPDATE job_leases AS l
        SET holder = ${this.o.holder}, expires_at = now() + (${this.o.ttlMs}::float8 * interval '1 ms'),
            last_started_at = now()
      WHERE job = ANY(${jobs as string[]}::text[]) AND ${inTenant(tenantId)} AND expires_at < now() ${this.dueSql(due)}
      RETURNING job, extract(epoch FROM last_started_at)::float8 * 1000 AS at`;
    return rows.map((r) => new Lease(this, r.job, tenantId, sent, r.at));
  }

  /** Renews `held` in one statement: the ones still this holder's (each then valid from this renewal). */
  async renew(held: readonly Lease[]): Promise<Set<Lease>> {
    if (held.length === 0) return new Set();
    const sent = this.now();
    const rows = await this.sql<Array<{ job: string; tenant_id: string }>>`
      UPDATE job_leases SET expires_at = now() + (${this.o.ttlMs}::float8 * interval '1 ms')
      WHERE (job, tenant_id) IN (
        SELECT * FROM unnest(${held.map((l) => l.job)}::text[], ${held.map((l) => l.tenantId)}::uuid[]))
        AND holder = ${this.o.holder}
      RETURNING job, tenant_id::text`;
    const kept = new Set(rows.map((r) => `${r.job} ${r.tenant_id}`));
    const out = new Set(held.filter((l) => kept.has(`${l.job} ${l.tenantId}`)));
    for (const l of out) l.extended(sent);
    return out;
  }

  private dueSql(due: Due | undefined) {
    const { sql } = this;
    if (!due) return sql``;
    const last = due.since === 'started' ? sql`l.last_started_at` : sql`l.last_finished_at`;
    return sql`AND (${last} IS NULL OR ${last} < now() - (${due.afterMs}::float8 * interval '1 ms'))`;
  }
}
