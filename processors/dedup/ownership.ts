import type { Logger } from '../../lib/logger.js';
import type { Sql } from '../../lib/pg.js';
import { Ticker } from '../../lib/ticker.js';

/** What runs while this instance owns the keyed events. */
export interface Owned {
  /** Ownership ends normally (shutdown): write what is held, then stop. */
  stop(): Promise<void>;
  /** Ownership was lost: stop without inserting anything more. */
  abandon(): Promise<void>;
}

export interface OwnershipOptions {
  /** This process, as the lease's holder. */
  holder: string;
  /** Lease lifetime: after a holder dies, another instance takes over this long after its last renewal. */
  ttlMs: number;
  /**
   * Starts the owned work once the lease is held; `signal` aborts when the lease is lost (or the
   * process stops) before it has started.
   */
  start(signal: AbortSignal): Promise<Owned>;
}

const JOB = 'keyed-writer';
const NO_WORKSPACE = '00000000-0000-0000-0000-000000000000';

/**
 * One processors instance at a time lands the keyed surface-B events (SURFACE_B_DEDUP=stream), so
 * that one process holds each workspace's deduplication keys. Every instance tries for the lease in
 * job_leases every third of its lifetime; the holder renews it there.
 *
 * The holder stops inserting before the lease can pass to another: it counts the lifetime from
 * when it sent its last successful renewal, on its own monotonic clock, and gives up a third of it
 * early (`abandon`: nothing held is inserted; JetStream hands it to the next owner). PostgreSQL's
 * clock decides when another may take it (`expires_at < now()`), never before the holder's own
 * deadline. The next owner's writer waits for inserts still running in ClickHouse before its first
 * claim (writer.ts); when the previous owner left messages unacknowledged, the start waits for them
 * to come again first (processors/jobs.ts), so the stream order holds across the takeover.
 */
export class KeyedOwnership {
  private readonly ticker: Ticker;
  /** The owned work while the lease is held: starting, then started (undefined if aborted). */
  private owned?: { work: Promise<Owned | undefined>; abort: AbortController };
  /** performance.now() past which this instance no longer counts on the lease. */
  private validUntil = 0;

  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
    private readonly o: OwnershipOptions,
  ) {
    this.ticker = new Ticker(
      Math.max(200, Math.floor(o.ttlMs / 3)),
      () => this.tick(),
      (err) => log.warn({ err: String(err) }, 'keyed writer lease check failed'),
    );
  }

  start(): void {
    this.ticker.start(0);
  }

  private async tick(): Promise<void> {
    const sent = performance.now();
    let held = false;
    try {
      held = await this.take();
    } catch (err) {
      this.log.warn({ err: String(err) }, 'keyed writer lease not renewed');
    }
    if (held) {
      this.validUntil = sent + (this.o.ttlMs * 2) / 3;
      if (!this.owned) {
        this.log.info({ holder: this.o.holder }, 'keyed writer lease taken: landing keyed events');
        // Not awaited: the start may wait (writer.ts), and the lease is renewed meanwhile.
        const abort = new AbortController();
        const work = this.o.start(abort.signal).catch((err: unknown) => {
          if (!abort.signal.aborted) this.log.error({ err }, 'keyed writer did not start; freeing the lease');
          return undefined;
        });
        this.owned = { work, abort };
        // A start that failed gives the lease up at once, so the next tick (or another instance) tries again.
        void work.then((w) => {
          if (w || abort.signal.aborted || this.owned?.work !== work) return;
          this.owned = undefined;
          void this.free();
        });
      }
      return;
    }
    if (this.owned && performance.now() >= this.validUntil) {
      const owned = this.owned;
      this.owned = undefined;
      this.log.warn({ holder: this.o.holder }, 'keyed writer lease lost: stopping without inserting more');
      owned.abort.abort();
      await (await owned.work)?.abandon();
    }
  }

  /** Takes the lease if free, or renews it if ours; true when this instance holds it. */
  private async take(): Promise<boolean> {
    const rows = await this.sql`
      INSERT INTO job_leases AS l (job, tenant_id, holder, expires_at, last_started_at)
      VALUES (${JOB}, ${NO_WORKSPACE}, ${this.o.holder}, now() + (${this.o.ttlMs}::float8 * interval '1 ms'), now())
      ON CONFLICT (job, tenant_id) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
        WHERE l.holder = EXCLUDED.holder OR l.expires_at < now()
      RETURNING 1`;
    return rows.length === 1;
  }

  /** Shutdown: the owned work writes what it holds, then the lease is freed for another instance at once. */
  async stop(): Promise<void> {
    await this.ticker.stop();
    const owned = this.owned;
    this.owned = undefined;
    if (!owned) return;
    owned.abort.abort();
    await (await owned.work)?.stop();
    await this.free();
  }

  private async free(): Promise<void> {
    await this.sql`
      UPDATE job_leases SET holder = NULL, expires_at = '-infinity'
      WHERE job = ${JOB} AND tenant_id = ${NO_WORKSPACE} AND holder = ${this.o.holder}`.catch(() => {});
  }
}
