import { createHash } from 'node:crypto';
import type { Sql } from '../lib/pg.js';

export interface Org {
  tenantId: string;
  plan: string;
}

const KEY_RE = /^sk_live_[0-9a-f]{64}$/;
const NEGATIVE_TTL_MS = 2_000;

/**
 * Ingestion keys: X-API-Key → SHA-256 → organization, from memory. A miss asks PostgreSQL once
 * (a key created a moment ago works at once) and is remembered briefly so a flood of bad keys
 * cannot reach the database. A regenerated key is announced on NATS and dropped at once.
 */
export class IngestionKeys {
  private byHash = new Map<string, Org>();
  private misses = new Map<string, number>();

  constructor(private readonly sql: Sql) {}

  static hash(key: string): string {
    return createHash('sha256').update(key).digest('hex');
  }

  async load(): Promise<number> {
    const rows = await this.sql<{ h: string; tenant_id: string; plan: string }[]>`
      SELECT encode(k.key_hash, 'hex') AS h, k.tenant_id, t.plan
      FROM ingestion_keys k JOIN tenants t ON t.id = k.tenant_id`;
    const next = new Map<string, Org>();
    for (const r of rows) next.set(r.h, { tenantId: r.tenant_id, plan: r.plan });
    this.byHash = next;
    return rows.length;
  }

  /** Synchronous answer when known: an Org, `null` for a known-bad key, `undefined` to ask the database. */
  peek(key: string): { hash: string; org: Org | null | undefined } {
    if (!KEY_RE.test(key)) return { hash: '', org: null };
    const hash = IngestionKeys.hash(key);
    const org = this.byHash.get(hash);
    if (org) return { hash, org };
    const until = this.misses.get(hash);
    if (until !== undefined && until > Date.now()) return { hash, org: null };
    return { hash, org: undefined };
  }

  async fetch(hash: string): Promise<Org | null> {
    const [row] = await this.sql<{ tenant_id: string; plan: string }[]>`
      SELECT k.tenant_id, t.plan FROM ingestion_keys k JOIN tenants t ON t.id = k.tenant_id
      WHERE k.key_hash = decode(${hash}, 'hex')`;
    if (row) {
      const org = { tenantId: row.tenant_id, plan: row.plan };
      this.byHash.set(hash, org);
      return org;
    }
    if (this.misses.size > 100_000) this.misses.clear();
    this.misses.set(hash, Date.now() + NEGATIVE_TTL_MS);
    return null;
  }

  /** The tenant's key changed: forget every hash of it, and every remembered miss. */
  invalidate(tenantId: string): void {
    for (const [h, org] of this.byHash) if (org.tenantId === tenantId) this.byHash.delete(h);
    this.misses.clear();
  }
}
