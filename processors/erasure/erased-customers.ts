import type { NatsConnection, Subscription } from 'nats';
import type { Logger } from '../../lib/logger.js';
import { subjects } from '../../lib/nats.js';
import type { Sql } from '../../lib/pg.js';
import { type UuidSet, uuidSet } from '../../lib/row-binary.js';

/** The erased customers of one workspace, as the writer looks rows up. */
export interface ErasedIds {
  /** Ids in text form (rows of the JSONEachRow format). */
  text: ReadonlySet<string>;
  /** The same as RowBinary holds them. */
  wire: UuidSet;
}

/** What the writer reads of the erased customers (docs/erasure.md). */
export interface ErasedSet {
  /** No workspace has an erasure: the writer does nothing per message. */
  readonly empty: boolean;
  /** Goes up by one at every refresh that learned of erasures: what a batch was checked against. */
  readonly generation: number;
  /** The erased customers of a workspace; undefined for a workspace without erasures (most). */
  of(tenantId: string | undefined): ErasedIds | undefined;
}

export interface ErasedCustomersOptions {
  /** Erasures are looked for this often, besides a customer deletion announced on NATS. */
  refreshMs: number;
  /** Erasures completed longer ago than this are forgotten (the events stream's max age and a day). */
  watchMs: number;
  /**
   * Workspaces with an erasure this process did not know of until now: rows of its customer may
   * have been stored before (docs/erasure.md, late rows).
   */
  onLearned: (tenants: Iterable<string>) => void;
}

/** The whole list is read again this often (it drops erasures past the watch and deleted workspaces). */
const FULL_RELOAD_MS = 300_000;
/** How long the generation at which a workspace's erasure was learned is kept: longer than any insert. */
const LEARNED_KEEP_MS = 600_000;

/**
 * Every customer with an erasure record (queued, running or completed within watchMs), per
 * workspace, in memory, for the writer to drop their rows before an insert: a row of an erased
 * customer that is still in the stream, redelivered, or published by an ingest tier whose cache
 * still knew the customer, never becomes readable.
 * - loaded before the writers start; then, every refreshMs, only what changed since the last look
 *   (open erasures and those completed since), and the whole list every few minutes. A customer
 *   deleted through the API is announced on `inv.customers.<tenant>`: the list is refreshed at once;
 * - a row checked before its customer's erasure was known here may have been stored after the
 *   erasure ran. The generation tells: it goes up with every refresh that learns of erasures, a
 *   batch is checked against one generation, and `lateFor` says whether a workspace's erasure
 *   was learned after it. Those rows, and the rows stored before the erasure was learned
 *   (onLearned), are the eraser's sweep's to remove.
 */
export class ErasedCustomers implements ErasedSet {
  private byTenant = new Map<string, { ids: Set<string>; erased: ErasedIds }>();
  private learnedAt = new Map<string, { generation: number; at: number }>();
  generation = 0;
  /** The database's clock at the last look: the next one reads what changed from there. */
  private since?: Date;
  private lastFull = 0;
  private timer?: NodeJS.Timeout;
  private sub?: Subscription;
  private running?: Promise<void>;
  private again = false;
  private stopped = false;
  /** The first load was done before any row was checked: what it learns needs no sweep. */
  private primed = false;

  constructor(
    private readonly sql: Sql,
    private readonly nc: NatsConnection,
    private readonly log: Logger,
    private readonly o: ErasedCustomersOptions,
  ) {}

  get empty(): boolean {
    return this.byTenant.size === 0;
  }

  of(tenantId: string | undefined): ErasedIds | undefined {
    return tenantId === undefined ? undefined : this.byTenant.get(tenantId)?.erased;
  }

  /** Whether an erasure of the workspace was learned after a batch checked at `generation`. */
  lateFor(tenantId: string | undefined, generation: number): boolean {
    if (tenantId === undefined || this.learnedAt.size === 0) return false;
    const l = this.learnedAt.get(tenantId);
    return l !== undefined && l.generation > generation;
  }

  /** Whether any workspace's erasure was learned lately (lateFor may say true). */
  get learning(): boolean {
    return this.learnedAt.size > 0;
  }

  /** Loads the list (a failure is logged: the writers then start knowing nothing, and the next refresh learns). */
  async start(): Promise<void> {
    await this.refresh();
    this.primed = true;
    this.sub = this.nc.subscribe(subjects.customersChanged('*'), {
      callback: (_err, m) => {
        if (m.data.length && m.string().includes('"deleted"')) void this.refresh();
      },
    });
    this.timer = setInterval(() => void this.refresh(), this.o.refreshMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.sub?.unsubscribe();
    await this.running;
  }

  /** One look at a time; a look asked for while one runs is made right after it. */
  refresh(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        try {
          await this.load();
        } catch (err) {
          this.log.warn({ err: String(err) }, 'erased customers could not be read; the writer keeps the last list');
        }
      } while (this.again && !this.stopped);
    })().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async load(): Promise<void> {
    const full = this.since === undefined || Date.now() - this.lastFull >= FULL_RELOAD_MS;
    const since = full ? null : this.since!;
    const [r] = await this.sql<[{ at: Date; ids: Array<[string, string]> }]>`
      SELECT now() AS at, coalesce((
        SELECT json_agg(json_build_array(tenant_id, customer_id)) FROM erasures
        WHERE status <> 'completed' OR (status = 'completed' AND completed_at > coalesce(${since}::timestamptz,
          now() - (${this.o.watchMs}::float8 * interval '1 ms')))), '[]') AS ids`;
    const next = full ? new Map<string, Set<string>>() : undefined;
    const learned = new Map<string, string[]>();
    for (const [tenant, customer] of r.ids) {
      if (next) {
        let s = next.get(tenant);
        if (!s) next.set(tenant, (s = new Set()));
        s.add(customer);
      }
      if (!this.byTenant.get(tenant)?.ids.has(customer)) {
        let l = learned.get(tenant);
        if (!l) learned.set(tenant, (l = []));
        l.push(customer);
      }
    }
    if (next) {
      this.byTenant = new Map([...next].map(([tenant, ids]) => [tenant, this.entry(ids)]));
      this.lastFull = Date.now();
      for (const [t, l] of this.learnedAt) if (Date.now() - l.at > LEARNED_KEEP_MS) this.learnedAt.delete(t);
    } else {
      for (const [tenant, customers] of learned) {
        const ids = new Set([...(this.byTenant.get(tenant)?.ids ?? []), ...customers]);
        this.byTenant.set(tenant, this.entry(ids));
      }
    }
    this.since = r.at;
    if (!learned.size) return;
    this.generation++;
    const at = Date.now();
    for (const tenant of learned.keys()) this.learnedAt.set(tenant, { generation: this.generation, at });
    if (this.primed) this.o.onLearned(learned.keys());
    this.log.debug({ tenants: learned.size, generation: this.generation }, 'erased customers learned');
  }

  private entry(ids: Set<string>): { ids: Set<string>; erased: ErasedIds } {
    return { ids, erased: { text: ids, wire: uuidSet(ids) } };
  }
}
