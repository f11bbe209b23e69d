import { isUuid } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { chTenants } from '../../lib/metrics/literal.js';
import { tenantOfSubject } from '../../lib/nats.js';
import { type ClickHouse, chErrorCode } from '../clickhouse.js';
import { batchIdOf, rowsOf, withoutRows } from './payload.js';
import type { RowsMessage } from './held.js';
import { detachUnregisteredParts } from './unregistered-parts.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** ClickHouse's UNKNOWN_STATUS_OF_INSERT: a replicated insert lost ZooKeeper while committing. */
const UNKNOWN_STATUS_OF_INSERT = 319;

/** What to do with each message of a batch before inserting it. */
export interface Verdict<M extends RowsMessage = RowsMessage> {
  /** Every row already stored: acknowledge without inserting. */
  stored: M[];
  /** To insert: absent messages whole, partly stored ones through `override`. */
  insert: M[];
  /** The payload of the rows still missing, for partly stored messages. */
  override: Map<M, Buffer>;
  /** Further copies of a batch id that is also in `insert`: acknowledged with it, never inserted. */
  copies: M[];
}

export interface ReconcileDeps {
  ch: ClickHouse;
  log: Logger;
  /** query_ids of this process's inserts whose requests are still open (shared by its writers). */
  running: Set<string>;
}

/**
 * Decides, before every insert, which messages of a batch are new. This is what keeps the sink
 * and every materialized view fed by it exactly once:
 * - every batch is looked up in csp.batch_ledger (rows per batch_id, filled by views in the same
 *   insert; a primary-key lookup, and batch ids are UUIDv7 so a batch's ids sit close together).
 *   That catches copies the stream cannot tell apart: a request published again after its PubAck
 *   was lost to a nats-server crash, or messages delivered again as new after the server lost
 *   acknowledgements it had not yet persisted;
 * - a suspect batch (redelivered, republished, or retried after a failed insert) is checked
 *   `thorough`ly: first wait for writer inserts still running in ClickHouse that no live request
 *   of this process owns (a killed writer's, or ours that timed out while ClickHouse went on),
 *   then, on a cluster, have parts that ZooKeeper never registered detached (an insert of unknown
 *   status), then count the rows in the table itself rather than the ledger;
 * - a partly stored message (an insert cut off between its partitions) is completed by inserting
 *   only its missing rows. Rows once stored are never deleted, so a view never counts a row twice.
 */
export class Reconciler {
  constructor(
    private readonly table: 'events' | 'billing_events',
    private readonly d: ReconcileDeps,
  ) {}

  async classify<M extends RowsMessage>(batch: M[], thorough: boolean): Promise<Verdict<M>> {
    const first = new Map<string, M>();
    const copies: M[] = [];
    for (const m of batch) {
      const id = batchIdOf(m);
      if (first.has(id)) copies.push(m);
      else first.set(id, m);
    }
    if (thorough) {
      await this.awaitForeignInserts();
      // After the inserts it waited for: one of them may have ended in an unknown status.
      await detachUnregisteredParts(this.d.ch, this.table, this.d.log);
    }
    const ids = [...first.keys()];
    const counts = thorough ? await this.countInTable(ids, tenantsOf(batch)) : await this.countInLedger(ids);
    const v: Verdict<M> = { stored: [], insert: [], override: new Map(), copies: [] };
    const partial: M[] = [];
    for (const [id, m] of first) {
      const c = counts.get(id) ?? 0;
      if (c === 0) v.insert.push(m);
      else if (c >= rowsOf(m)) v.stored.push(m);
      else partial.push(m);
    }
    if (partial.length) await this.complete(partial, v);
    const storedIds = new Set(v.stored.map(batchIdOf));
    for (const m of copies) (storedIds.has(batchIdOf(m)) ? v.stored : v.copies).push(m);
    if (v.stored.length)
      this.d.log.info({ table: this.table, messages: v.stored.length }, 'already stored; acknowledging without insert');
    return v;
  }

  /**
   * Told of every failed insert. An insert into a replicated table whose commit lost ZooKeeper
   * (unknown status) leaves a part that ZooKeeper may or may not know; the retry is thorough, and a
   * thorough count first has such parts detached (unregistered-parts.ts), so it never counts rows
   * that vanish later. When the unknown status came from a view ("while pushing to view …"), the
   * table's own part was committed before the views ran; that view's part is left to ClickHouse's
   * own check (kept or dropped, at a time of its choosing) and the views after it never got the
   * rows: the rollups, not the events, may then miss them (docs/cluster.md says how to rebuild
   * them). Logged as an error with the batch ids.
   */
  insertFailed(err: unknown, batch: RowsMessage[]): void {
    if (chErrorCode(err) !== UNKNOWN_STATUS_OF_INSERT) return;
    const message = String((err as Error)?.message ?? err);
    const view = /while pushing to view (\S+?)[.:,]?\s/.exec(message)?.[1];
    if (view)
      this.d.log.error(
        { table: this.table, view, batches: batch.map(batchIdOf) },
        'insert of unknown status in a view: the rollups may miss these batches',
      );
    else
      this.d.log.warn(
        { table: this.table, batches: batch.length },
        'insert of unknown status: the retry first detaches its part if ZooKeeper never registered it',
      );
  }

  /** Partly stored messages: keep only the rows whose event_id is not in the table yet. */
  private async complete<M extends RowsMessage>(partial: M[], v: Verdict<M>): Promise<void> {
    const list = partial.map((m) => `'${batchIdOf(m)}'`).join(',');
    const stored = await this.d.ch.rows<{ e: string }>(
      `SELECT lower(toString(event_id)) AS e FROM ${this.d.ch.database}.${this.table}
       WHERE ${chTenants(tenantsOf(partial))} AND batch_id IN (${list})`,
    );
    const ids = new Set(stored.map((r) => r.e));
    for (const m of partial) {
      const rest = withoutRows(m, this.table, ids);
      if (rest.rows === 0) v.stored.push(m);
      else {
        v.insert.push(m);
        v.override.set(m, rest.payload);
      }
    }
    this.d.log.warn({ table: this.table, messages: partial.length }, 'partly stored; inserting only the missing rows');
  }

  private async countInLedger(ids: string[]): Promise<Map<string, number>> {
    const rows = await this.d.ch.rows<{ b: string; c: string }>(
      `SELECT lower(toString(batch_id)) AS b, sum(rows) AS c FROM ${this.d.ch.database}.batch_ledger
       WHERE batch_id IN (${ids.map((i) => `'${i}'`).join(',')}) AND tbl = '${this.table}' GROUP BY b`,
    );
    return new Map(rows.map((r) => [r.b, Number(r.c)]));
  }

  private async countInTable(ids: string[], tenants: string[]): Promise<Map<string, number>> {
    const rows = await this.d.ch.rows<{ b: string; c: string }>(
      `SELECT lower(toString(batch_id)) AS b, count() AS c FROM ${this.d.ch.database}.${this.table}
       WHERE ${chTenants(tenants)} AND batch_id IN (${ids.map((i) => `'${i}'`).join(',')}) GROUP BY b`,
    );
    return new Map(rows.map((r) => [r.b, Number(r.c)]));
  }

  /**
   * Waits for what could still add this table's rows without the count seeing them yet, in two steps.
   * First, writer inserts running on any server of the store that no live request of this process
   * owns (a killed writer's, or ours that timed out while ClickHouse went on), up to two minutes (a
   * stuck query must not stop the writer for good); with `consumer`, only that consumer's writers'
   * inserts. On a cluster that includes the shards' parts of an insert, which the Distributed table
   * sends to the other shards as inserts of their own (into `csp_local.<table>`, under a query id
   * of their own that names no writer): every one that began before this check is waited for, since
   * a server killed while it sent them leaves them running on their shard, and which of them are
   * this process's own cannot be told.
   * Then, on a replicated cluster, parts that a replica has committed but its peer has not fetched
   * yet (a count read from the peer would miss them, and inserting them again would count them twice
   * when it catches up): the peer has copied every entry of the shard's replication log written so
   * far into its queue, and its queue holds no fetch of a part committed before then. That wait has
   * no deadline: while a replica that holds the only copy of a part is down, suspect batches wait
   * for it; new batches go on.
   */
  async awaitForeignInserts(consumer?: string): Promise<void> {
    const { database: db, storageDatabase: local } = this.d.ch;
    const began = Date.now();
    const deadline = began + 120_000;
    const writers = `query_id LIKE '${consumer ? `cw-%-${consumer}-%` : 'cw-%'}' AND query LIKE 'INSERT INTO ${db}.${this.table} %'`;
    const shards = local === db ? '0' : `query LIKE 'INSERT INTO ${local}.${this.table} %'`;
    while (Date.now() < deadline) {
      // Only what began before the check (or within a second after it: clocks may differ a little)
      // can hold the batches checked: the wait ends even while other writers go on inserting.
      const running = await this.d.ch.rows<{ q: string; shard: number }>(
        `SELECT query_id AS q, ${shards} AS shard FROM ${db}.processes
         WHERE (${writers} OR ${shards}) AND elapsed > ${(Date.now() - began) / 1000 - 1}
         SETTINGS skip_unavailable_shards = 1`,
      );
      if (!running.some((r) => Number(r.shard) || !this.d.running.has(r.q))) break;
      await sleep(200);
    }
    const since = Math.floor(Date.now() / 1000);
    /** Per replica: the last entry of its shard's replication log when first seen. */
    const logged = new Map<string, number>();
    let warned = 0;
    for (;;) {
      const replicas = await this.d.ch.rows<{ r: string; logged: string; pulled: string; fetching: number }>(
        `SELECT replica_path AS r, log_max_index AS logged, log_pointer AS pulled,
                inserts_in_queue > 0 AND toUInt32(inserts_oldest_time) <= ${since} AS fetching
         FROM ${db}.replicas WHERE table = '${this.table}'
         SETTINGS skip_unavailable_shards = 1`,
      );
      for (const r of replicas) if (!logged.has(r.r)) logged.set(r.r, Number(r.logged));
      const lagging = replicas.filter((r) => {
        // log_pointer is the next entry a replica will copy into its queue (an empty log reads as 0).
        const last = logged.get(r.r) ?? 0;
        return Number(r.fetching) || (last > 0 && Number(r.pulled) <= last);
      });
      if (lagging.length === 0) return;
      if (Date.now() - warned > 30_000) {
        warned = Date.now();
        this.d.log.warn(
          { table: this.table, replicas: lagging.map((r) => r.r) },
          'waiting for replicas to fetch parts before reconciling',
        );
      }
      await sleep(200);
    }
  }
}

/** The workspaces of a batch, from its subjects: restricts a count to their part of the table. */
function tenantsOf(batch: RowsMessage[]): string[] {
  const out = new Set<string>();
  for (const m of batch) {
    const t = tenantOfSubject(m.subject);
    // A subject without a workspace: no restriction (the count then reads the whole column).
    if (t === undefined || !isUuid(t)) return [];
    out.add(t.toLowerCase());
  }
  return [...out];
}
