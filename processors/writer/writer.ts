import type { Consumer, ConsumerMessages, JetStreamClient, JsMsg } from 'nats';
import type { Piscina } from 'piscina';
import type { Logger } from '../../lib/logger.js';
import { STREAM_EVENTS, tenantOfSubject } from '../../lib/nats.js';
import { type ClickHouse, chErrorCode, isDataError } from '../clickhouse.js';
import type { ErasedSet } from '../erasure/erased-customers.js';
import type { WriterMetrics } from '../metrics.js';
import type { CheckInput } from './check-rows.js';
import { publishDeadLetter } from './dead-letter.js';
import { type Arena, Arenas, Held, type Publisher, type RowsMessage } from './held.js';
import { batchIdOf, body, byFormat, formatOfMessage, isSuspect, rowsOf, withoutCustomers } from './payload.js';
import {
  columnsOf,
  FORMAT_HEADER,
  ROW_BINARY_V1,
  ROW_BINARY_V2,
  type RowBinaryFormat,
  type RowFormat,
} from '../../lib/row-binary.js';
import { Reconciler, type Verdict } from './reconcile.js';
import { TABLES } from './tables.js';
import type { KeysStore } from '../dedup/keys-store.js';

export interface WriterOptions {
  consumer: string;
  table: keyof typeof TABLES;
  /** Flush when this many rows are pending… */
  batchRows: number;
  /** …or this many bytes… */
  batchBytes: number;
  /** …or when the oldest pending message is this old. */
  batchMs: number;
  /** Inserts in flight at once; ClickHouse uses about a core per insert stream. */
  insertStreams: number;
  /** Bytes requested from JetStream per pull (nats-server cuts off a client holding > 64 MB). */
  pullBytes: number;
  /** Identifies this process in its inserts' query_ids. */
  instance: string;
  /** Rows of these customers are dropped before the insert (docs/erasure.md). */
  erased?: ErasedSet;
  /**
   * Called with messages whose rows are in ClickHouse, before they are acked, and the generation of
   * the erased customers their rows were checked against (0: unknown, stored earlier). If it throws,
   * the messages are retried (and found already stored), so the hook runs at least once per message.
   */
  onStored?: (messages: RowsMessage[], erasedGeneration: number) => Promise<void>;
  /** Called before a message is acked after being dead-lettered. */
  onDeadLettered?: (message: RowsMessage, reason: string) => Promise<void>;
  /**
   * Surface-B deduplication (the keyed writer, processors/dedup/): rows whose (customer_id,
   * external_id) a message earlier in the stream stored or claimed are left out of the insert.
   */
  keys?: KeysStore;
}

/** A batch's place in the order of claims: claims of a batch wait for those of the batch before it. */
interface Turn {
  before: Promise<void>;
  done: () => void;
}

interface Deps {
  js: JetStreamClient;
  /** Acknowledgements go out on it (the connection js belongs to). */
  nc: Publisher;
  ch: ClickHouse;
  pool: Piscina;
  log: Logger;
  metrics: WriterMetrics;
  /** query_ids of this process's inserts whose requests are still open (shared by its writers). */
  running: Set<string>;
}

const STALL_MS = 5_000;
/**
 * How long a pull waits for messages. A pull request outlives a writer that stopped while it was
 * open: the server may still deliver into it (to nobody) until it expires, and those messages come
 * again only after their ack wait.
 */
export const PULL_EXPIRES_MS = 1000;
/** Where external_id is in each RowBinary column list of csp.events. */
const EXTERNAL_ID = Object.fromEntries(
  ([ROW_BINARY_V1, ROW_BINARY_V2] as const).map((f) => [
    f,
    columnsOf(f, 'events').findIndex(([c]) => c === 'external_id'),
  ]),
) as Record<RowBinaryFormat, number>;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Streams one durable consumer into one ClickHouse table, exactly once:
 * - messages (one per ingestion request, rows prebuilt by the ingest tier) are concatenated into
 *   large inserts, several in flight; each message is acked only after its insert succeeded;
 * - every row carries batch_id, the message's Nats-Msg-Id, and every batch is reconciled before
 *   its insert (reconcile.ts): fully stored → ack without inserting; partly stored (an insert cut
 *   off between partitions) → only its missing rows are inserted; absent → inserted. Two copies of
 *   one batch id never insert at once in this process: the later waits for the earlier;
 * - while ClickHouse is down the writer holds its batches and retries with backoff, keeping the
 *   messages alive with in-progress acks, and pulls nothing more: memory stays bounded and the
 *   backlog stays in JetStream;
 * - a message ClickHouse can never take is published to dlq.<consumer>.<subject> with the reason,
 *   and only then acked;
 * - rows of erased customers are left out of the insert (the message is acked as if they were
 *   stored): one map lookup per message of a workspace, and rows are read only in the messages of
 *   a workspace that has erased customers. Nothing at all while no workspace has one;
 * - with `keys` (the keyed writer), rows whose key an earlier message stored or claimed are left
 *   out too. Claims follow the stream: each batch claims after the batch taken before it, before
 *   its insert, so a later batch in another insert stream finds them. Before its first claim the
 *   writer waits for inserts of its consumer's other writers still running in ClickHouse (a
 *   previous owner's).
 */
export class ClickhouseWriter {
  private pending: Held[] = [];
  /** Where the pending messages' payloads are copied (undefined: each has its own copy). */
  private arena?: Arena;
  private readonly arenas: Arenas;
  private pendingRows = 0;
  private pendingBytes = 0;
  private oldest = 0;
  private inflight = 0;
  private flushing?: Promise<void>;
  private slotFreed?: () => void;
  private held = new Map<number, Held>();
  private fetching?: ConsumerMessages;
  /** When the fetch in progress started (0: none): a fetch lives about 1 s, its expiry. */
  private fetchStarted = 0;
  private lastFetchEnd = Date.now();
  /** Running average of message sizes; the first pulls assume 100 events of ~1.6 KB. */
  private avgMessageBytes = 160 * 1024;
  private stopping = false;
  /** Stopped by `abandon`: nothing more is inserted, whatever is held comes again to another writer. */
  private abandoned = false;
  private querySeq = 0;
  private timers: NodeJS.Timeout[] = [];
  private loop?: Promise<void>;
  /** Batch ids being written by this writer, and when their write settles. */
  private writing = new Map<string, Promise<void>>();
  private readonly reconciler: Reconciler;
  /** Settles when the last batch taken has made its claims. */
  private claimed: Promise<void> = Promise.resolve();
  /** Settles once other writers' inserts running at start have ended: claims wait for it. */
  private foreignInserts?: Promise<void>;

  constructor(
    private readonly o: WriterOptions,
    private readonly d: Deps,
  ) {
    this.reconciler = new Reconciler(o.table, d);
    // The batch being gathered, and one per insert stream.
    this.arenas = new Arenas(o.batchBytes, o.insertStreams + 1);
  }

  async start(): Promise<void> {
    const consumer = await this.d.js.consumers.get(STREAM_EVENTS, this.o.consumer);
    this.timers.push(
      setInterval(
        () => {
          if (this.pending.length && Date.now() - this.oldest >= this.o.batchMs) void this.flush();
        },
        Math.max(10, Math.floor(this.o.batchMs / 4)),
      ),
    );
    // Keep held messages from being redelivered while ClickHouse is slow or down.
    this.timers.push(
      setInterval(() => {
        for (const m of this.held.values()) m.working();
        this.arenas.trim();
      }, 3_000),
    );
    // A fetch that outlives its expiry by far hangs on a pull request the server forgot (a
    // nats-server restart): end it so the loop pulls again instead of stalling for minutes.
    this.timers.push(
      setInterval(() => {
        if (this.fetchStarted && Date.now() - this.fetchStarted > STALL_MS) {
          this.d.log.warn({ consumer: this.o.consumer }, 'pull hung past its expiry; pulling again');
          this.fetching?.stop();
        }
      }, 1_000),
    );
    this.loop = this.pull(consumer);
  }

  /** True while the writer should be pulling but no pull has ended for a while: not ready. */
  get stalled(): boolean {
    return !this.stopping && !this.pendingFull() && Date.now() - this.lastFetchEnd > 2 * STALL_MS;
  }

  /**
   * Pulls only when the pending batch has room, and holds every message the moment it arrives: a
   * message never waits in a client-side buffer without in-progress acks, where its ack wait could
   * run out and JetStream hand it to another writer while this one still inserts it.
   */
  private async pull(consumer: Consumer): Promise<void> {
    while (!this.stopping) {
      while (!this.stopping && this.pendingFull()) await this.flush();
      if (this.stopping) break;
      try {
        // By count, sized from the messages seen so far to about pullBytes: nats.js ends a fetch
        // capped by bytes only when its 1 s expiry runs out, even with a backlog waiting.
        const count = Math.max(1, Math.min(1000, Math.floor(this.o.pullBytes / this.avgMessageBytes)));
        this.fetchStarted = Date.now();
        this.fetching = await consumer.fetch({ max_messages: count, expires: PULL_EXPIRES_MS });
        for await (const m of this.fetching) {
          this.avgMessageBytes = this.avgMessageBytes * 0.98 + Math.max(1024, m.data.length) * 0.02;
          this.take(m);
        }
      } catch (err) {
        if (this.stopping) break;
        this.d.log.warn(
          { consumer: this.o.consumer, err: String((err as Error).message ?? err) },
          'pull failed; retrying',
        );
        await sleep(500);
      } finally {
        this.fetching = undefined;
        this.fetchStarted = 0;
        this.lastFetchEnd = Date.now();
      }
    }
  }

  private pendingFull(): boolean {
    return this.pendingRows >= this.o.batchRows || this.pendingBytes >= this.o.batchBytes;
  }

  private take(msg: JsMsg): void {
    if (this.held.has(msg.seq)) return; // a redelivery of a message this process still holds
    if (this.pending.length === 0) {
      this.oldest = Date.now();
      this.arena ??= this.arenas.take();
    }
    const m = new Held(msg, this.arena?.copy(msg.data) ?? Buffer.from(msg.data), this.d.nc);
    this.held.set(m.seq, m);
    this.pending.push(m);
    this.pendingRows += rowsOf(m);
    this.pendingBytes += m.data.length;
    if (this.pendingFull()) void this.flush();
  }

  /**
   * Takes the pending messages as one batch once an insert slot is free (backpressure). Callers
   * (the consume loop and the timer) share one flush in progress, so a freed slot always wakes
   * the flush that is waiting for it.
   */
  private flush(): Promise<void> {
    this.flushing ??= this.flushWhenSlotFree().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  private async flushWhenSlotFree(): Promise<void> {
    while (this.inflight >= this.o.insertStreams)
      await new Promise<void>((r) => {
        this.slotFreed = r;
      });
    if (this.pending.length === 0) return;
    const batch = this.pending;
    const arena = this.arena;
    this.pending = [];
    this.arena = undefined;
    this.pendingRows = 0;
    this.pendingBytes = 0;
    this.inflight++;
    let turn: Turn | undefined;
    if (this.o.keys) {
      let done!: () => void;
      const before = this.claimed;
      this.claimed = new Promise<void>((r) => {
        done = r;
      });
      turn = { before, done };
    }
    void this.write(batch, turn).finally(() => {
      turn?.done();
      // Every use of the batch's payloads has ended: inserts, dead letters, checks.
      this.arenas.give(arena);
      this.inflight--;
      const wake = this.slotFreed;
      this.slotFreed = undefined;
      wake?.();
    });
  }

  private async write(batch: Held[], turn?: Turn): Promise<void> {
    // Copies of a batch id already being written here wait for that write, then find it stored.
    const others: Promise<void>[] = [];
    const mine: string[] = [];
    let settle!: () => void;
    const settled = new Promise<void>((r) => {
      settle = r;
    });
    for (const m of batch) {
      const id = batchIdOf(m);
      const other = this.writing.get(id);
      if (other === undefined) {
        this.writing.set(id, settled);
        mine.push(id);
      } else if (other !== settled) others.push(other);
    }
    try {
      if (others.length) await Promise.all(others);
      // Rows in a format this build cannot read (a newer ingest tier's): never storable here.
      const readable: Held[] = [];
      for (const m of batch)
        if (formatOfMessage(m)) readable.push(m);
        else await this.deadLetter(m, `unknown row format: ${m.headers?.get(FORMAT_HEADER)}; upgrade processors first`);
      batch = readable;
      await this.writeOnce(batch, others.length > 0 || batch.some(isSuspect), turn);
    } finally {
      for (const id of mine) this.writing.delete(id);
      settle();
    }
  }

  private async writeOnce(batch: Held[], thorough: boolean, turn?: Turn): Promise<void> {
    let attempt = 0;
    while (batch.length) {
      if (this.abandoned) {
        for (const m of batch) this.held.delete(m.seq);
        return;
      }
      const queryId = this.nextQueryId();
      try {
        const v = await this.reconciler.classify(batch, thorough);
        this.d.metrics.reconciled(this.o.table, thorough, v.stored.length, v.override.size);
        await this.done(v.stored, 0);
        batch = [...v.insert, ...v.copies];
        if (!v.insert.length) return;
        const generation = this.o.erased?.generation ?? 0;
        const erased = this.dropErased(v);
        if (turn) await turn.before;
        const duplicates = await this.dropDuplicates(v, erased.left);
        turn?.done();
        // One insert per row format (several only while messages of an older format drain after
        // an upgrade). An outage after the first leaves it stored: the retry's reconcile finds it.
        let first = true;
        for (const [format, msgs] of byFormat(v.insert)) {
          const t0 = performance.now();
          const payload = body(msgs, format, v.override);
          await this.insert(payload, first ? queryId : this.nextQueryId(), format);
          first = false;
          this.d.metrics.inserted(
            this.o.table,
            msgs.reduce((n, m) => n + (erased.left.get(m) ?? rowsOf(m)), 0),
            performance.now() - t0,
            payload.reduce((n, b) => n + b.length, 0),
          );
        }
        // From here on the rows are stored: a failing hook retries through reconcile, never re-inserts.
        thorough = true;
        await this.done(batch, generation);
        if (erased.dropped) this.d.metrics.droppedErased(this.o.table, erased.dropped);
        if (duplicates) this.d.metrics.droppedDuplicates(this.o.table, duplicates);
        return;
      } catch (err) {
        this.d.metrics.clickhouseError(this.o.table, chErrorCode(err));
        if (isDataError(err)) {
          batch = await this.isolate(batch, err);
          continue;
        }
        // An outage: the insert may or may not have landed (in part), so reconcile before retrying.
        this.reconciler.insertFailed(err, batch);
        thorough = true;
        attempt++;
        this.d.metrics.retry(this.o.table);
        const wait = Math.min(10_000, 100 * 2 ** Math.min(attempt, 7));
        this.d.log.warn(
          {
            table: this.o.table,
            attempt,
            wait_ms: wait,
            messages: batch.length,
            err: String((err as Error).message ?? err).slice(0, 300),
          },
          'insert failed; retrying',
        );
        if (this.stopping && attempt >= 3) {
          // Leave them un-acked: JetStream redelivers them to the next writer, which reconciles.
          for (const m of batch) this.held.delete(m.seq);
          return;
        }
        await sleep(wait);
      }
    }
  }

  /**
   * Leaves the rows of erased customers out of the messages to insert: a message left with none is
   * taken out of `insert` (it is acknowledged with the batch), one left with some is inserted through
   * `override`. The rows each of those holds now, and how many were dropped.
   */
  private dropErased(v: Verdict<Held>): { left: Map<Held, number>; dropped: number } {
    const left = new Map<Held, number>();
    const erased = this.o.erased;
    if (!erased || erased.empty) return { left, dropped: 0 };
    let dropped = 0;
    const insert: Held[] = [];
    for (const m of v.insert) {
      const ids = erased.of(tenantOfSubject(m.subject));
      let r: ReturnType<typeof withoutCustomers>;
      try {
        r = ids && withoutCustomers(m, v.override.get(m) ?? m.data, this.o.table, ids);
      } catch {
        // Rows that cannot be read: inserted as they are, ClickHouse refuses them and they are
        // dead-lettered (isolate) as any other.
        r = undefined;
      }
      if (!r) {
        insert.push(m);
        continue;
      }
      dropped += r.dropped;
      left.set(m, r.rows);
      if (r.rows === 0) continue;
      v.override.set(m, r.payload);
      insert.push(m);
    }
    v.insert = insert;
    return { left, dropped };
  }

  /**
   * Claims the keys of the messages to insert (keyed writer only) and leaves out the rows whose key
   * was stored or claimed before: a message left with none is taken out of `insert` (it is
   * acknowledged with the batch), one left with some is inserted through `override`. `left` (rows per message after
   * the erased customers' went) is updated; returns the rows dropped.
   */
  private async dropDuplicates(v: Verdict<Held>, left: Map<Held, number>): Promise<number> {
    const store = this.o.keys;
    if (!store) return 0;
    // A previous owner's inserts: other writers into the table do not touch this partition's keys.
    this.foreignInserts ??= this.reconciler.awaitForeignInserts(this.o.consumer);
    await this.foreignInserts;
    let dropped = 0;
    const insert: Held[] = [];
    for (const m of v.insert) {
      const format = formatOfMessage(m);
      const keys = await store.of(tenantOfSubject(m.subject) ?? '');
      if (!format || format === 'JSONEachRow') {
        insert.push(m);
        continue;
      }
      const columns = columnsOf(format, 'events');
      let r: ReturnType<typeof keys.claim>;
      try {
        r = keys.claim(m.seq, v.override.get(m) ?? m.data, columns, EXTERNAL_ID[format], rowsOf(m));
      } catch {
        // Rows that cannot be read: inserted as they are; ClickHouse refuses them and they are
        // dead-lettered (isolate).
        insert.push(m);
        continue;
      }
      m.duplicates = r.dropped;
      if (r.dropped === 0) {
        insert.push(m);
        continue;
      }
      dropped += r.dropped;
      left.set(m, r.kept);
      if (r.kept === 0) continue;
      const data = v.override.get(m) ?? m.data;
      v.override.set(m, Buffer.concat(r.ranges.map(([s, e]) => data.subarray(s, e))));
      insert.push(m);
    }
    v.insert = insert;
    return dropped;
  }

  private async done(batch: Held[], erasedGeneration: number): Promise<void> {
    if (batch.length && this.o.onStored) await this.o.onStored(batch, erasedGeneration);
    for (const m of batch) {
      m.ack();
      this.held.delete(m.seq);
      if (this.o.keys) this.o.keys.loaded(tenantOfSubject(m.subject) ?? '')?.landed(m.seq);
    }
  }

  private nextQueryId(): string {
    return `cw-${this.o.instance}-${this.o.consumer}-${++this.querySeq}`;
  }

  /** Every insert in flight in this process is registered, so reconcile can tell them apart. */
  private async insert(payload: Buffer[], queryId: string, format: RowFormat): Promise<void> {
    if (this.abandoned) throw new Error('the writer was abandoned');
    this.d.running.add(queryId);
    try {
      await this.d.ch.insert(this.o.table, payload, queryId, format);
    } finally {
      this.d.running.delete(queryId);
    }
  }

  /** A data error: find the messages ClickHouse cannot take, dead-letter them, return the rest. */
  private async isolate(batch: Held[], err: unknown): Promise<Held[]> {
    const reasons = (await this.d.pool.run({
      table: this.o.table,
      columns: TABLES[this.o.table],
      // Copies: a view of the arena would be cloned whole into the worker.
      payloads: batch.map((m) => new Uint8Array(m.data)),
      formats: batch.map((m) => formatOfMessage(m)!),
    } satisfies CheckInput)) as Array<string | null>;
    const bad = batch.filter((_, i) => reasons[i] !== null);
    for (const m of bad) await this.deadLetter(m, reasons[batch.indexOf(m)]!);
    const rest = batch.filter((_, i) => reasons[i] === null);
    if (bad.length || rest.length === 0) return rest;
    // The checker found nothing: insert one by one; each that still fails is dead-lettered.
    if (rest.length === 1) {
      await this.deadLetter(rest[0], `ClickHouse rejected the rows: ${String((err as Error).message).slice(0, 500)}`);
      return [];
    }
    for (const m of rest) {
      try {
        // Reclassified alone: a partly stored message inserts only its missing rows.
        const v = await this.reconciler.classify([m], true);
        if (v.stored.length) {
          await this.done(v.stored, 0);
          continue;
        }
        const generation = this.o.erased?.generation ?? 0;
        const erased = this.dropErased(v);
        const duplicates = await this.dropDuplicates(v, erased.left);
        if (duplicates) this.d.metrics.droppedDuplicates(this.o.table, duplicates);
        if (v.insert.length) {
          const format = formatOfMessage(m)!;
          const payload = body([m], format, v.override);
          await this.insert(payload, this.nextQueryId(), format);
          this.d.metrics.inserted(
            this.o.table,
            erased.left.get(m) ?? rowsOf(m),
            0,
            payload.reduce((n, b) => n + b.length, 0),
          );
        }
        await this.done([m], generation);
        if (erased.dropped) this.d.metrics.droppedErased(this.o.table, erased.dropped);
      } catch (e) {
        if (!isDataError(e)) throw e;
        await this.deadLetter(m, `ClickHouse rejected the rows: ${String((e as Error).message).slice(0, 500)}`);
      }
    }
    return [];
  }

  private async deadLetter(m: Held, reason: string): Promise<void> {
    await publishDeadLetter(this.d.js, this.o.consumer, m, reason);
    this.d.log.error({ consumer: this.o.consumer, seq: m.seq, subject: m.subject, reason }, 'message dead-lettered');
    this.d.metrics.deadLettered(this.o.table);
    await this.o.onDeadLettered?.(m, reason);
    m.ack();
    this.held.delete(m.seq);
    if (this.o.keys) this.o.keys.loaded(tenantOfSubject(m.subject) ?? '')?.release(m.seq);
  }

  /** Stops pulling, writes what it holds, waits for in-flight inserts (bounded by the caller's grace). */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const t of this.timers) clearInterval(t);
    this.fetching?.stop();
    await this.loop;
    await this.flush();
    while (this.inflight > 0) await sleep(20);
  }

  /**
   * Stops at once without writing what it holds: for a writer whose ownership ran out, whose
   * messages the next owner must get. Inserts already sent are waited for; none is started.
   */
  async abandon(): Promise<void> {
    this.abandoned = true;
    this.stopping = true;
    for (const t of this.timers) clearInterval(t);
    this.fetching?.stop();
    await this.loop;
    for (const m of this.pending) this.held.delete(m.seq);
    this.pending = [];
    this.pendingRows = 0;
    this.pendingBytes = 0;
    while (this.inflight > 0) await sleep(20);
  }

  get heldMessages(): number {
    return this.held.size;
  }
}
