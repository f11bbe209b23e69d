import type { Logger } from '../../lib/logger.js';
import { chTenant } from '../../lib/metrics/literal.js';
import type { ClickHouse } from '../clickhouse.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Rows per customer id, per table. */
export type TableCounts = Map<string, Map<string, number>>;

/**
 * Customer ids per statement. Each takes about 46 bytes of SQL (`toUUID('…'), `): a thousand keep a
 * statement near 46 KiB, where ClickHouse refuses one above max_query_size (256 KiB: about 5,400 ids,
 * fewer than a month of purges of a large workspace, which the sweep counts at once).
 */
export const IDS_PER_STATEMENT = 1000;

/** The condition of a statement on the rows of a workspace's customers `ids`. */
export function customersCondition(tenantId: string, ids: readonly string[]): string {
  for (const id of [tenantId, ...ids]) if (!UUID.test(id)) throw new Error(`not a UUID: ${id}`);
  return `${chTenant(tenantId)} AND customer_id IN (${ids.map((id) => `toUUID('${id}')`).join(', ')})`;
}

/** `items` in slices of at most `size`, in order. */
export function chunks<T>(items: readonly T[], size: number): T[][] {
  if (!(size >= 1)) throw new Error(`chunk size ${size}`);
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * The ClickHouse half of an erasure: every storage table with a customer_id column, found in
 * system.columns (events, billing_events, the rollups, health_history, metric_values, and any
 * table added later, inner tables of views included), loses the rows of a workspace's customers
 * through `ALTER TABLE … DELETE WHERE` mutations: on a cluster on the `_local` tables ON CLUSTER,
 * so every shard and replica rewrites its own parts. Mutations are asynchronous and rewrite whole
 * parts; each is followed in system.mutations on every server until is_done. Customer ids go in
 * lists of at most IDS_PER_STATEMENT per statement.
 */
export class ClickHouseErasure {
  constructor(
    private readonly ch: ClickHouse,
    private readonly log: Logger,
    private readonly pollMs = 200,
    private readonly idsPerStatement = IDS_PER_STATEMENT,
  ) {}

  /** Storage tables of the MergeTree family with customer_id and tenant_id columns. */
  async tables(): Promise<string[]> {
    const db = this.ch.storageDatabase;
    const [cols, engines] = await Promise.all([
      this.ch.rows<{ table: string; n: string }>(
        `SELECT table, count() AS n FROM system.columns WHERE database = '${db}'
           AND ((name = 'customer_id' AND type = 'UUID') OR (name = 'tenant_id' AND type = 'UUID')) GROUP BY table`,
      ),
      this.ch.rows<{ name: string }>(
        `SELECT name FROM system.tables WHERE database = '${db}' AND engine LIKE '%MergeTree'`,
      ),
    ]);
    const merge = new Set(engines.map((e) => e.name));
    return cols
      .filter((c) => Number(c.n) === 2 && merge.has(c.table))
      .map((c) => c.table)
      .sort();
  }

  /** Where a table's rows are read: the Distributed table of a cluster, the table itself on one server. */
  private readable(table: string): string {
    return table.startsWith('.inner.') || !this.ch.cluster
      ? `${this.ch.storageDatabase}.\`${table}\``
      : `${this.ch.database}.\`${table}\``;
  }

  /** Rows of each customer in each table (customers without rows absent): tables at once, a slice of ids at a time. */
  async count(tables: string[], tenantId: string, ids: string[]): Promise<TableCounts> {
    const out: TableCounts = new Map();
    await Promise.all(
      tables.map(async (table) => {
        const m = new Map<string, number>();
        for (const slice of chunks(ids, this.idsPerStatement)) {
          const rows = await this.ch.rows<{ id: string; n: string }>(
            `SELECT toString(customer_id) AS id, count() AS n FROM ${this.readable(table)}
             WHERE ${customersCondition(tenantId, slice)} GROUP BY customer_id`,
          );
          for (const r of rows) if (Number(r.n) > 0) m.set(r.id, Number(r.n));
        }
        if (m.size) out.set(table, m);
      }),
    );
    return out;
  }

  /**
   * One mutation per slice of ids (a run claims at most IDS_PER_STATEMENT customers: one). A slice
   * waits for the previous one: ClickHouse 18.16 loses one of several mutations queued at once on
   * the same parts (the middle one of three issued back to back, here, every time).
   */
  async mutate(table: string, tenantId: string, ids: string[], stopping: () => boolean = () => false): Promise<void> {
    for (const [i, slice] of chunks(ids, this.idsPerStatement).entries()) {
      if (i > 0) await this.settle([table], tenantId, stopping);
      await this.ch.command(
        `ALTER TABLE ${this.ch.storageDatabase}.\`${table}\`${this.ch.onCluster} ` +
          `DELETE WHERE ${customersCondition(tenantId, slice)}`,
      );
      this.log.info({ table, tenantId, customers: slice.length }, 'erasure mutation issued');
    }
  }

  /**
   * The mutations issued for the workspace per table, as their commands (which name the customer
   * ids), done or not: what a killed run had issued before it died. ClickHouse keeps the last
   * finished mutations of a table (100 by default), far more than a resumed run looks back on.
   */
  async issued(tables: string[], tenantId: string): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (!tables.length) return out;
    const list = tables.map((t) => `'${t.replace(/'/g, "\\'")}'`).join(', ');
    for (const u of this.ch.endpoints.urls) {
      const rows = await this.ch.rowsAt<{ table: string; command: string }>(
        u,
        `SELECT table, command FROM system.mutations WHERE database = '${this.ch.storageDatabase}'
         AND table IN (${list}) AND position(command, '${tenantId}') > 0`,
      );
      for (const r of rows) out.set(r.table, `${out.get(r.table) ?? ''}\n${r.command}`);
    }
    return out;
  }

  /**
   * Waits until no mutation of the workspace is left unfinished on these tables on any server:
   * those just issued and those a killed run issued before (a resumed run waits for them instead
   * of counting rows they are about to remove).
   */
  async settle(tables: string[], tenantId: string, stopping: () => boolean): Promise<void> {
    if (!tables.length) return;
    const list = tables.map((t) => `'${t.replace(/'/g, "\\'")}'`).join(', ');
    const q = `SELECT count() AS n FROM system.mutations WHERE database = '${this.ch.storageDatabase}'
      AND table IN (${list}) AND is_done = 0 AND position(command, '${tenantId}') > 0`;
    for (;;) {
      const open = await Promise.all(
        this.ch.endpoints.urls.map(async (u) => Number((await this.ch.rowsAt<{ n: string }>(u, q))[0]?.n ?? 0)),
      );
      if (open.every((n) => n === 0)) return;
      if (stopping()) throw new Error('stopping');
      await sleep(this.pollMs);
    }
  }
}
