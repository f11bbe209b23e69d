import { isUuid } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { chTenant } from '../../lib/metrics/literal.js';
import type { ClickHouse } from '../clickhouse.js';
import { WorkspaceKeys } from './workspace-keys.js';

/**
 * The deduplication keys of the workspaces whose keyed events this writer lands, each loaded from
 * ClickHouse's csp.event_keys the first time one of its messages comes. Held until the process
 * ends: a key takes 21–43 bytes (bench/RESULTS.md).
 */
export class KeysStore {
  private readonly loading = new Map<string, Promise<WorkspaceKeys>>();
  private readonly ready = new Map<string, WorkspaceKeys>();

  constructor(
    private readonly ch: ClickHouse,
    private readonly log: Logger,
  ) {}

  /** The workspace's keys; the first call loads them (a failed load is tried again by the next call). */
  of(tenantId: string): Promise<WorkspaceKeys> {
    let p = this.loading.get(tenantId);
    if (!p) {
      p = this.load(tenantId).then((keys) => {
        this.ready.set(tenantId, keys);
        return keys;
      });
      p.catch(() => this.loading.delete(tenantId));
      this.loading.set(tenantId, p);
    }
    return p;
  }

  /** Loaded keys only: for what follows a claim (a message landed, or dead-lettered). */
  loaded(tenantId: string): WorkspaceKeys | undefined {
    return this.ready.get(tenantId);
  }

  private async load(tenantId: string): Promise<WorkspaceKeys> {
    if (!isUuid(tenantId)) return new WorkspaceKeys();
    const t0 = performance.now();
    const where = `FROM ${this.ch.database}.event_keys WHERE ${chTenant(tenantId)}`;
    const [count] = await this.ch.rows<{ n: string }>(`SELECT count() AS n ${where}`);
    const keys = new WorkspaceKeys(Number(count?.n ?? 0));
    let carry: Buffer = Buffer.alloc(0);
    await this.ch.stream(`SELECT tenant_id, customer_id, external_id ${where} FORMAT RowBinary`, (chunk) => {
      const b = carry.length ? Buffer.concat([carry, chunk]) : chunk;
      carry = b.subarray(keys.load(b).read);
    });
    if (carry.length) throw new Error(`event_keys of ${tenantId}: ${carry.length} bytes after the last row`);
    this.log.info(
      { tenantId, keys: keys.keys.size, ms: Math.round(performance.now() - t0) },
      'deduplication keys loaded',
    );
    return keys;
  }
}
