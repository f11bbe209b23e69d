import { randomUUID } from 'node:crypto';
import { type Lease, Leases } from '../../lib/lease.js';
import type { Logger } from '../../lib/logger.js';
import type { Sql } from '../../lib/pg.js';
import { Ticker } from '../../lib/ticker.js';

/** What runs while this instance owns a partition of the keyed events. */
export interface Owned {
  /** Ownership ends normally (shutdown, or handed to another instance): write what is held, then stop. */
  stop(): Promise<void>;
  /** Ownership was lost: stop without inserting anything more. */
  abandon(): Promise<void>;
}

export interface OwnershipOptions {
  /** This process, as the leases' holder. */
  holder: string;
  /** Partitions of the keyed events (KEYED_PARTITIONS). */
  partitions: number;
  /**
   * What the leases are of: the EVENTS stream they guard (its creation time), so that processors on
   * another stream that share this PostgreSQL never hold them.
   */
  scope: string;
  /** Lease lifetime: after a holder dies, another instance takes over this long after its last renewal. */
  ttlMs: number;
  /**
   * Starts the owned work of partition `p` once its lease is held; `signal` aborts when the lease is
   * lost (or the process stops) before it has started.
   */
  start(p: number, signal: AbortSignal): Promise<Owned>;
}

const NO_WORKSPACE = '00000000-0000-0000-0000-000000000000';

interface Holding {
  lease: Lease;
  work: Promise<Owned | undefined>;
  abort: AbortController;
  /** Being handed over: its work drains, then the lease is freed. */
  releasing?: boolean;
}

/**
 * Each partition of the keyed surface-B events (SURFACE_B_DEDUP=stream) is landed by one processors
 * instance at a time, so that one process holds each workspace's deduplication keys, and the
 * instances share the partitions evenly. Every third of the lease lifetime an instance:
 * - records that it is alive (a row in job_leases, `processors:<scope>`) and counts the live ones;
 * - renews the leases it holds, in one statement;
 * - hands over the partitions it holds beyond its share (⌈partitions / instances⌉): the work
 *   drains, then the lease is freed;
 * - takes free partitions (expired leases) up to its share.
 *
 * A holder stops inserting before a lease can pass to another (lib/lease.ts `valid()`): it counts the
 * lifetime from when it sent its last successful renewal, on its own monotonic clock, and gives up a
 * third of it early (`abandon`: nothing held is inserted; JetStream hands it to the next owner). PostgreSQL's clock
 * decides when another may take it (`expires_at < now()`), never before the holder's own deadline.
 * The next owner's writer waits for inserts still running in ClickHouse before its first claim
 * (writer.ts); when the previous owner left messages unacknowledged, the start waits for them to
 * come again first (processors/jobs.ts), so the stream order holds across the takeover.
 */
export class KeyedOwnership {
  private readonly ticker: Ticker;
  private readonly held = new Map<number, Holding>();
  private readonly instanceId = randomUUID();
  private readonly leases: Leases;

  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
    private readonly o: OwnershipOptions,
  ) {
    this.leases = new Leases(sql, log, { holder: o.holder, ttlMs: o.ttlMs });
    this.ticker = new Ticker(
      Math.max(200, Math.floor(o.ttlMs / 3)),
      () => this.tick(),
      (err) => log.warn({ err: String(err) }, 'keyed partition leases: check failed'),
    );
  }

  start(): void {
    this.ticker.start(0);
  }

  private lease(p: number): string {
    return `keyed-writer:${this.o.scope}:${p}`;
  }

  private async tick(): Promise<void> {
    const ttl = this.o.ttlMs;
    let instances = 1;
    try {
      const [{ n }] = await this.sql<{ n: number }[]>`
        WITH me AS (
          INSERT INTO job_leases (job, tenant_id, holder, expires_at)
          VALUES (${`processors:${this.o.scope}`}, ${this.instanceId}, ${this.o.holder},
                  now() + (${ttl}::float8 * interval '1 ms'))
          ON CONFLICT (job, tenant_id) DO UPDATE SET expires_at = EXCLUDED.expires_at
        ), gone AS (
          DELETE FROM job_leases
          WHERE job = ${`processors:${this.o.scope}`} AND expires_at < now() - interval '1 hour'
        )
        SELECT count(*)::int + 1 AS n FROM job_leases
        WHERE job = ${`processors:${this.o.scope}`} AND tenant_id <> ${this.instanceId} AND expires_at > now()`;
      instances = n;
      await this.leases.renew([...this.held.values()].map((h) => h.lease));
    } catch (err) {
      this.log.warn({ err: String(err) }, 'keyed partition leases not renewed');
    }
    // A lease this instance can no longer count on (not renewed for two thirds of its lifetime) is lost.
    for (const [p, h] of this.held) if (!h.lease.valid()) await this.lose(p, h);
    const share = Math.ceil(this.o.partitions / Math.max(1, instances));
    const active = [...this.held].filter(([, h]) => !h.releasing);
    // Beyond the share: the highest partitions go, each drained before its lease is freed.
    for (const [p, h] of active.slice(share)) {
      h.releasing = true;
      this.log.info({ partition: p, share }, 'keyed partition handed over to another instance');
      void this.release(p, h);
    }
    if (active.length >= share) return;
    // Free partitions, in a random order so that instances starting together take different ones.
    const free = Array.from({ length: this.o.partitions }, (_, p) => p)
      .filter((p) => !this.held.has(p))
      .sort(() => Math.random() - 0.5);
    let want = share - active.length;
    for (const p of free) {
      if (want === 0) break;
      if (await this.take(p)) want--;
    }
  }

  /** Takes partition `p`'s lease if it is free, and starts its work (not awaited: a start may wait). */
  private async take(p: number): Promise<boolean> {
    const lease = await this.leases.claim(this.lease(p), NO_WORKSPACE);
    if (!lease) return false;
    this.log.info({ partition: p, holder: this.o.holder }, 'keyed partition taken: landing its events');
    const abort = new AbortController();
    const work = this.o.start(p, abort.signal).catch((err: unknown) => {
      if (!abort.signal.aborted) this.log.error({ err, partition: p }, 'keyed partition did not start; freeing it');
      return undefined;
    });
    const h: Holding = { lease, work, abort };
    this.held.set(p, h);
    // A start that failed gives the lease up at once, so that the next tick (or another instance) tries again.
    void work.then(async (w) => {
      if (w || abort.signal.aborted || this.held.get(p) !== h) return;
      this.held.delete(p);
      await lease.free().catch(() => {});
    });
    return true;
  }

  private async lose(p: number, h: Holding): Promise<void> {
    this.held.delete(p);
    this.log.warn({ partition: p }, 'keyed partition lease lost: stopping without inserting more');
    h.abort.abort();
    await (await h.work)?.abandon();
  }

  /** Drains the partition's work, then frees its lease for another instance at once. */
  private async release(p: number, h: Holding): Promise<void> {
    h.abort.abort();
    await (await h.work)?.stop();
    if (this.held.get(p) !== h) return;
    this.held.delete(p);
    await h.lease.free().catch(() => {});
  }

  /** Shutdown: each partition's work writes what it holds, then its lease is freed for another instance. */
  async stop(): Promise<void> {
    await this.ticker.stop();
    await Promise.all([...this.held].map(([p, h]) => this.release(p, h)));
    await this.sql`
      DELETE FROM job_leases WHERE job = ${`processors:${this.o.scope}`} AND tenant_id = ${this.instanceId}`.catch(
      () => {},
    );
  }
}
