import type { Sql } from '../lib/pg.js';

interface TenantCache {
  /** Customer UUIDs known to exist (not soft-deleted). */
  ids: Set<string>;
  /**
   * source → external id → customer UUID. Two levels rather than one composite key: a look-up
   * per event then hashes the strings the request already holds instead of building a new one.
   */
  ext: Map<string, Map<string, string>>;
  /** UUIDs looked up and not found, with the time the answer expires. */
  missing: Map<string, number>;
  /** source → external ids looked up and not found, with the time the answer expires. */
  missingExt: Map<string, Map<string, number>>;
  /** Entries of ext and missingExt together. */
  extEntries: number;
  /** product code → id, product ids; loaded whole per tenant. */
  products?: { byCode: Map<string, string>; ids: Set<string>; loadedAt: number };
  createdAt: number;
}

/** The answers one request works from: the cache as it was when the request's look-ups were made. */
export interface CustomerView {
  /** 1 where the customer id given to `prepare` at the same index exists in the workspace. */
  known: Uint8Array;
  /** The customer of each external reference given to `prepare`, in its order; undefined for none. */
  external: Array<string | undefined>;
}

export interface ResolverOptions {
  /** How long "no such customer" is remembered; invalidations clear it sooner. */
  negativeTtlMs: number;
  /** Entries per tenant before its cache is dropped and refilled. */
  maxEntriesPerTenant: number;
  /** A tenant's cache is rebuilt after this long even without invalidations (a missed message heals). */
  maxAgeMs?: number;
  productTtlMs: number;
}

const emptyCache = (products: TenantCache['products'], now: number): TenantCache => ({
  ids: new Set(),
  ext: new Map(),
  missing: new Map(),
  missingExt: new Map(),
  extEntries: 0,
  products,
  createdAt: now,
});

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

  constructor(
    private readonly sql: Sql,
    private readonly opts: ResolverOptions,
  ) {}

  private cache(tenantId: string): TenantCache {
    let c = this.tenants.get(tenantId);
    const now = Date.now();
    if (
      !c ||
      c.ids.size + c.extEntries + c.missing.size > this.opts.maxEntriesPerTenant ||
      now - c.createdAt > (this.opts.maxAgeMs ?? Infinity)
    ) {
      c = emptyCache(c?.products, now);
      this.tenants.set(tenantId, c);
    }
    return c;
  }

  invalidateCustomers(tenantId: string): void {
    const c = this.tenants.get(tenantId);
    if (c) this.tenants.set(tenantId, emptyCache(c.products, Date.now()));
  }

  /** After a NATS reconnect: invalidations may have been missed while cut off. */
  invalidateAll(): void {
    this.tenants.clear();
  }

  invalidateProducts(tenantId: string): void {
    const c = this.tenants.get(tenantId);
    if (c) c.products = undefined;
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
    const known = new Uint8Array(ids.length);
    // A Set, not includes(): a 1000-event batch of distinct customers would compare half a million strings.
    const unknown = new Set<string>();
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (id === '') continue;
      if (c.ids.has(id)) known[i] = 1;
      else if (!fresh(c.missing.get(id))) unknown.add(id);
    }
    const wantIds = [...unknown];
    const external = new Array<string | undefined>(exts.length);
    // Indexes into exts of the references asked of PostgreSQL.
    const asked: number[] = [];
    for (let i = 0; i < exts.length; i++) {
      external[i] = c.ext.get(srcs[i])?.get(exts[i]);
      if (external[i] !== undefined || fresh(c.missingExt.get(srcs[i])?.get(exts[i]))) continue;
      asked.push(i);
      wantSrc.push(srcs[i]);
      wantExt.push(exts[i]);
    }
    const view: CustomerView = { known, external };
    if (wantIds.length === 0 && wantSrc.length === 0) return view;
    // Two branches, each on its own index: with OR the planner reads every customer of the workspace.
    const rows = await this.sql<{ id: string; external_source: string; external_id: string | null }[]>`
      SELECT id::text, external_source, external_id FROM customers
      WHERE tenant_id = ${tenantId} AND deleted_at IS NULL AND id = ANY(${wantIds}::uuid[])
      UNION ALL
      SELECT id::text, external_source, external_id FROM customers
      WHERE tenant_id = ${tenantId} AND deleted_at IS NULL
        AND (external_source, external_id) IN (SELECT * FROM unnest(${wantSrc}::text[], ${wantExt}::text[]))`;
    const until = now + this.opts.negativeTtlMs;
    for (const id of wantIds) c.missing.set(id, until);
    for (let i = 0; i < wantSrc.length; i++) if (setIn(c.missingExt, wantSrc[i], wantExt[i], until)) c.extEntries++;
    for (const r of rows) {
      c.ids.add(r.id);
      c.missing.delete(r.id);
      if (r.external_id !== null) {
        if (setIn(c.ext, r.external_source, r.external_id, r.id)) c.extEntries++;
        if (c.missingExt.get(r.external_source)?.delete(r.external_id)) c.extEntries--;
      }
    }
    if (unknown.size) for (let i = 0; i < ids.length; i++) if (known[i] === 0 && c.ids.has(ids[i])) known[i] = 1;
    for (const i of asked) external[i] = c.ext.get(srcs[i])?.get(exts[i]);
    return view;
  }

  /** Loads the tenant's products when missing or stale; products are few per tenant. */
  async prepareProducts(tenantId: string): Promise<void> {
    const c = this.cache(tenantId);
    if (c.products && Date.now() - c.products.loadedAt < this.opts.productTtlMs) return;
    const rows = await this.sql<
      { id: string; code: string }[]
    >`SELECT id::text, code FROM products WHERE tenant_id = ${tenantId}`;
    c.products = {
      byCode: new Map(rows.map((r) => [r.code, r.id])),
      ids: new Set(rows.map((r) => r.id)),
      loadedAt: Date.now(),
    };
  }

  /** product_id wins over product_code; an unknown product is account-level (''). */
  product(tenantId: string, productId: string | undefined, productCode: string | undefined): string {
    const p = this.tenants.get(tenantId)?.products;
    if (!p) return '';
    if (productId !== undefined) return p.ids.has(productId.toLowerCase()) ? productId.toLowerCase() : '';
    if (productCode !== undefined) return p.byCode.get(productCode) ?? '';
    return '';
  }
}
