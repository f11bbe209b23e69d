import { createHash } from 'node:crypto';
import type { Sql } from '../pg.js';
import type { Role } from '../../schemas/core/scopes.js';
import { Allowlist } from './ip.js';

export interface KeyRecord {
  id: string;
  tenantId: string;
  role: Role;
  scopes: ReadonlySet<string>;
  allowlist: Allowlist;
  expiresAt: Date | null;
  revoked: boolean;
  name: string;
  loadedAt: number;
}

export const API_KEY_RE = /^svc_sk_(live|test)_[A-Za-z0-9_-]{20,128}$/;
const TTL_MS = 5 * 60_000;
const NEGATIVE_TTL_MS = 2_000;

/**
 * API keys by SHA-256, from memory. A miss reads PostgreSQL once; unknown hashes are remembered
 * briefly so a flood of bad keys cannot reach the database. A revocation is announced on NATS
 * (`inv.api-keys`) and drops the entry in every process; entries also age out after 5 minutes,
 * and the whole cache is dropped when the NATS connection was interrupted.
 */
export class ApiKeyStore {
  private byHash = new Map<string, KeyRecord>();
  private misses = new Map<string, number>();

  constructor(private readonly sql: Sql) {}

  async find(key: string): Promise<KeyRecord | null> {
    const hash = createHash('sha256').update(key).digest('hex');
    const now = Date.now();
    const hit = this.byHash.get(hash);
    if (hit && now - hit.loadedAt < TTL_MS) return hit;
    const miss = this.misses.get(hash);
    if (miss !== undefined && miss > now) return null;
    const [row] = await this.sql<
      {
        id: string;
        tenant_id: string;
        role: Role;
        scopes: string[];
        ip_allowlist: string[];
        expires_at: Date | null;
        revoked_at: Date | null;
        name: string;
      }[]
    >`
      SELECT id::text, tenant_id::text, role, scopes, ip_allowlist::text[] AS ip_allowlist, expires_at, revoked_at, name
      FROM api_keys WHERE key_hash = decode(${hash}, 'hex')`;
    if (!row) {
      if (this.misses.size > 100_000) this.misses.clear();
      this.misses.set(hash, now + NEGATIVE_TTL_MS);
      return null;
    }
    const rec: KeyRecord = {
      id: row.id,
      tenantId: row.tenant_id,
      role: row.role,
      scopes: new Set(row.scopes),
      allowlist: new Allowlist(row.ip_allowlist),
      expiresAt: row.expires_at,
      revoked: row.revoked_at !== null,
      name: row.name,
      loadedAt: now,
    };
    if (this.byHash.size > 100_000) this.byHash.clear();
    this.byHash.set(hash, rec);
    return rec;
  }

  invalidate(keyId: string): void {
    for (const [h, r] of this.byHash) if (r.id === keyId) this.byHash.delete(h);
  }

  clear(): void {
    this.byHash.clear();
    this.misses.clear();
  }
}
