import { inTenant, type Sql } from '../lib/pg.js';
import { encodeUuid } from '../lib/row-binary.js';
import { TextSlots, UuidSlots } from './slot-tables.js';

interface TenantCache {
  /** Customer UUIDs known to exist (not soft-deleted), each with its slot in `wire` (ingest/slot-tables.ts). */
  ids: UuidSlots;
  /** The UUID text of each slot: as many as slots are taken. */
  idOfSlot: string[];
  /**
   * source → external id → the customer's slot. Two levels rather than one composite key: a look-up
   * per event then reads the strings the request already holds instead of building a new one.
   */
  ext: Map<string, TextSlots>;
  /**
   * The known customers' UUIDs as RowBinary writes them, 16 bytes a slot, encoded once when they
   * are learnt and copied into every row (encoding the text per event was 6 % of the ingest
   * tier's per-event work). Slots are only added; growing makes a new array, so a view keeps
   * reading the one it was given.
   */
  wire: Uint8Array;
  /** UUIDs looked up and not found, with the time the answer expires. */
  missing: Map<string, number>;
  /** source → external ids looked up and not found, with the time the answer expires. */
  missingExt: Map<string, Map<string, number>>;
  /** Entries of ext and missingExt together. */
  extEntries: number;
  /** When its answers were read: a refreshed cache counts from its refresh's query. */
  createdAt: number;
  /**
   * When a refresh is due: between 3/4 of the age and the age, drawn per cache, so the caches a
   * process filled at once (at its start, say) do not all refresh in the same second.
   */
  refreshAt: number;
  /** Set once a refresh of this cache is queued; it replaces the cache when it lands. */
  refreshing?: boolean;
}

/** A tenant's products, loaded whole (they are few): code → id, and the ids. */
interface Products {
  byCode: Map<string, string>;
  ids: Set<string>;
  loadedAt: number;
}

interface CustomerRow {
  id: string;
  external_source: string;
  external_id: string | null;
}

/**
 * The answers one request works from: the cache as it was when the request's look-ups were made.
 * A customer is a slot: its UUID's 16 wire bytes at `wire[16 * slot]` (`writeEventRow`).
 */
export interface CustomerView {
  wire: Uint8Array;
  /** The slot of the customer id given to `prepare` at the same index; -1 where none exists in the workspace. */
  ids: Int32Array;
  /** The slot of the customer of each external reference given to `prepare`, in its order; -1 for none. */
  external: Int32Array;
}

export interface ResolverOptions {
  /** How long "no such customer" is remembered; invalidations clear it sooner. */
  negativeTtlMs: number;
  /** Entries per tenant before its cache is dropped and refilled. */
  maxEntriesPerTenant: number;
  /**
   * A tenant's customers are refreshed after this long even without invalidations (a missed
   * message heals), and dropped at twice this age if their refresh has not landed; its products
   * are reloaded at this age.
   */
  maxAgeMs?: number;
}

const emptyCache = (now: number, maxAgeMs = Infinity): TenantCache => ({
  ids: new UuidSlots(),
  idOfSlot: [],
  ext: new Map(),
  wire: new Uint8Array(16 * 64),
  missing: new Map(),
  missingExt: new Map(),
  extEntries: 0,
  createdAt: now,
  refreshAt: now + maxAgeMs * (0.75 + 0.25 * Math.random()),
});

/** Remembers a customer PostgreSQL returned: by id, and by its external reference if it has one. */
function remember(c: TenantCache, r: CustomerRow): void {
  let slot = c.ids.get(r.id);
  if (slot < 0) {
    slot = c.idOfSlot.length;
    if (16 * (slot + 1) > c.wire.length) {
      const grown = new Uint8Array(2 * c.wire.length);
      grown.set(c.wire);
      c.wire = grown;
    }
    encodeUuid(r.id, c.wire, 16 * slot);
    c.ids.set(r.id, slot);
    c.idOfSlot.push(r.id);
  }
  c.missing.delete(r.id);
  if (r.external_id !== null) {
    let bySource = c.ext.get(r.external_source);
    if (!bySource) c.ext.set(r.external_source, (bySource = new TextSlots()));
    if (bySource.set(r.external_id, slot)) c.extEntries++;
    if (c.missingExt.get(r.external_source)?.delete(r.external_id)) c.extEntries--;
  }
}

function setIn<V>(m: Map<string, Map<string, V>>, a: string, b: string, v: V): boolean {
  let inner = m.get(a);
  if (!inner) m.set(a, (inner = new Map()));
  const added = !inner.has(b);
  inner.set(b, v);
  return added;
}

/**
 * Customer and product look-ups for the ingest tier: answers from memory, and fetches every miss
 * of a request in one query. core-api announces customer changes on `inv.customers.<tenant>`;
 * the tenant's cache is dropped on each, so a change is seen by the next request. A request keeps
 * the cache object it filled: an invalidation arriving while its query runs replaces the tenant's
 * cache but cannot empty the answers the request is about to read.
 */
export class Resolver {
  private tenants = new Map<string, TenantCache>();
  private products = new Map<string, Products>();
  /** The products load under way per tenant: one at a time, however many requests want it. */
  private productLoads = new Map<string, Promise<void>>();
  /** Refreshes run one after another: a process's look-ups never all wait behind them. */
  private refreshes: Promise<void> = Promise.resolve();

  constructor(
    private readonly sql: Sql,
    private readonly opts: ResolverOptions,
  ) {}

  private cache(tenantId: string): TenantCache {
    let c = this.tenants.get(tenantId);
    const now = Date.now();
    const maxAge = this.opts.maxAgeMs ?? Infinity;
    if (
      !c ||
      c.ids.size + c.extEntries + c.missing.size > this.opts.maxEntriesPerTenant ||
      now - c.createdAt > 2 * maxAge
    ) {
      c = emptyCache(now, maxAge);
      this.tenants.set(tenantId, c);
    } else if (now > c.refreshAt && !c.refreshing) {
      c.refreshing = true;
      this.refreshes = this.refreshes.then(() => this.refresh(tenantId));
    }
    return c;
  }

  /**
   * Reads again, in one query, every customer the tenant's cache knows, and puts the answers in
   * its place unless an invalidation replaced it meanwhile (the newer cache stays). Requests go
   * on reading the old cache until then. Dropping the cache at its age instead sent every request
   * of the workspace to PostgreSQL at once, for every customer it named, until the cache had
   * filled again: on the benchmark, a second of request p99 in the hundreds of milliseconds once
   * a minute. The queue holds tenant ids, not caches: a cache replaced while its refresh waits
   * (dropped, invalidated) is neither kept alive by it nor refreshed.
   */
  private async refresh(tenantId: string): Promise<void> {
    const old = this.tenants.get(tenantId);
    if (!old?.refreshing) return;
    const startedAt = Date.now();
    let rows: CustomerRow[];
    try {
      // By id alone: every customer known by an external reference is known by id too, and its row
      // carries the reference as it is now (one re-keyed since drops out of the new cache).
      rows = await this.lookUp(tenantId, old.idOfSlot, [], []);
    } catch {
      // PostgreSQL is away: the old answers serve until twice the age, then requests ask it again.
      return;
    }
    if (this.tenants.get(tenantId) !== old) return;
    const c = emptyCache(startedAt, this.opts.maxAgeMs);
    for (const r of rows) remember(c, r);
    this.tenants.set(tenantId, c);
  }

  /** The workspace's live customers among ids `ids` and external references (`srcs[i]`, `exts[i]`). */
  private lookUp(tenantId: string, ids: string[], srcs: string[], exts: string[]): Promise<CustomerRow[]> {
    // One index look-up per reference, whatever the statistics say. A workspace that grew since
    // the last ANALYZE (every new one, a freshly seeded or imported one) is estimated at one row;
    // planned from that, a join read all of its customers for every look-up, and an index on
    // tenant_id alone looked as good as the right one, read until the reference was found: 111 to
    // 300 ms for 100 references in a workspace of 5,000 to 20,000, and PostgreSQL the bound of
    // surface A on a fresh stack. So each reference is a LATERAL subquery with LIMIT 1 (the
    // workspace checked outside it, where no index on tenant_id can be chosen for it): by id, the
    // primary key; by external reference, the first entry at or after the key in the order of
    // customers_external, which only that index gives without a sort (a seek; equal means found).
    return this.sql<CustomerRow[]>`
      SELECT c.id::text, c.external_source, c.external_id FROM unnest(${ids}::uuid[]) AS r(id)
      CROSS JOIN LATERAL (
        SELECT id, tenant_id, external_source, external_id, deleted_at FROM customers WHERE id = r.id LIMIT 1) c
      WHERE ${inTenant(tenantId, 'c')} AND c.deleted_at IS NULL
      UNION ALL
      SELECT c.id::text, c.external_source, c.external_id FROM unnest(${srcs}::text[], ${exts}::text[]) AS r(src, ext)
      CROSS JOIN LATERAL (
        SELECT id, tenant_id, external_source, external_id, deleted_at FROM customers
        WHERE (tenant_id, external_source, external_id) >= (${tenantId}::uuid, r.src, r.ext) AND external_id IS NOT NULL
        ORDER BY tenant_id, external_source, external_id LIMIT 1) c
      WHERE ${inTenant(tenantId, 'c')} AND c.external_source = r.src AND c.external_id = r.ext
        AND c.deleted_at IS NULL`;
  }

  invalidateCustomers(tenantId: string): void {
    const c = this.tenants.get(tenantId);
    if (c) this.tenants.set(tenantId, emptyCache(Date.now(), this.opts.maxAgeMs));
  }

  /** After a NATS reconnect: invalidations may have been missed while cut off. */
  invalidateAll(): void {
    this.tenants.clear();
    this.products.clear();
    this.productLoads.clear();
  }

  /** A load under way is forgotten too: it may have read the products before the change. */
  invalidateProducts(tenantId: string): void {
    this.products.delete(tenantId);
    this.productLoads.delete(tenantId);
  }

  /**
   * Answers every given reference (customer ids `ids[i]`, lower-case; '' for one that cannot
   * exist; and external ids `exts[i]` of source `srcs[i]`), with at most one query for those not
   * in memory. Each reference is looked up once here and its answer kept in the view, by index:
   * the per-event look-ups are most of this class's cost.
   */
  async prepare(tenantId: string, ids: string[], srcs: string[] = [], exts: string[] = []): Promise<CustomerView> {
    const c = this.cache(tenantId);
    const now = Date.now();
    const wantSrc: string[] = [];
    const wantExt: string[] = [];
    const fresh = (until: number | undefined) => until !== undefined && until > now;
    const known = new Int32Array(ids.length).fill(-1);
    // A Set, not includes(): a 1000-event batch of distinct customers would compare half a million strings.
    const unknown = new Set<string>();
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (id === '') continue;
      const slot = c.ids.get(id);
      if (slot >= 0) known[i] = slot;
      else if (!fresh(c.missing.get(id))) unknown.add(id);
    }
    const wantIds = [...unknown];
    const external = new Int32Array(exts.length).fill(-1);
    // Indexes into exts of the references asked of PostgreSQL.
    const asked: number[] = [];
    for (let i = 0; i < exts.length; i++) {
      const slot = c.ext.get(srcs[i])?.get(exts[i]) ?? -1;
      if (slot >= 0) external[i] = slot;
      else if (!fresh(c.missingExt.get(srcs[i])?.get(exts[i]))) {
        asked.push(i);
        wantSrc.push(srcs[i]);
        wantExt.push(exts[i]);
      }
    }
    if (wantIds.length === 0 && wantSrc.length === 0) return { wire: c.wire, ids: known, external };
    const rows = await this.lookUp(tenantId, wantIds, wantSrc, wantExt);
    const until = now + this.opts.negativeTtlMs;
    for (const id of wantIds) c.missing.set(id, until);
    for (let i = 0; i < wantSrc.length; i++) if (setIn(c.missingExt, wantSrc[i], wantExt[i], until)) c.extEntries++;
    for (const r of rows) remember(c, r);
    if (unknown.size) for (let i = 0; i < ids.length; i++) if (known[i] < 0) known[i] = c.ids.get(ids[i]);
    for (const i of asked) external[i] = c.ext.get(srcs[i])?.get(exts[i]) ?? -1;
    // The slab as it is now: it holds every slot above (a later one is a copy that holds them too).
    return { wire: c.wire, ids: known, external };
  }

  /**
   * Makes the tenant's products ready for `product`. Stale ones (older than the age) answer while
   * one load replaces them in the background; only a tenant with none waits, for the one load
   * every request of it shares. A load per request at each expiry opened a PostgreSQL connection
   * per request at once: on the benchmark, a second of request p99 in the hundreds of
   * milliseconds once a minute.
   */
  async prepareProducts(tenantId: string): Promise<void> {
    for (;;) {
      const p = this.products.get(tenantId);
      if (p && Date.now() - p.loadedAt < (this.opts.maxAgeMs ?? Infinity)) return;
      const load = this.productLoads.get(tenantId) ?? this.loadProducts(tenantId);
      if (p) return;
      await load;
      // Landed, unless an invalidation came while it ran: then load again.
      if (this.products.has(tenantId)) return;
    }
  }

  private loadProducts(tenantId: string): Promise<void> {
    const load: Promise<void> = this.sql<{ id: string; code: string }[]>`
      SELECT id::text, code FROM products WHERE ${inTenant(tenantId)}`
      .then((rows) => {
        if (this.productLoads.get(tenantId) !== load) return;
        this.products.set(tenantId, {
          byCode: new Map(rows.map((r) => [r.code, r.id])),
          ids: new Set(rows.map((r) => r.id)),
          loadedAt: Date.now(),
        });
      })
      .finally(() => {
        if (this.productLoads.get(tenantId) === load) this.productLoads.delete(tenantId);
      });
    this.productLoads.set(tenantId, load);
    // A background load's failure is left for the next request to meet.
    load.catch(() => {});
    return load;
  }

  /** product_id wins over product_code; an unknown product is account-level (''). */
  product(tenantId: string, productId: string | undefined, productCode: string | undefined): string {
    // Most events name no product: no look-up of the workspace's products for them.
    if (productId === undefined && productCode === undefined) return '';
    const p = this.products.get(tenantId);
    if (!p) return '';
    if (productId !== undefined) return p.ids.has(productId.toLowerCase()) ? productId.toLowerCase() : '';
    if (productCode !== undefined) return p.byCode.get(productCode) ?? '';
    return '';
  }
}
