import { headers as natsHeaders, type Consumer, type ConsumerMessages, type JetStreamClient, type JsMsg } from 'nats';
import type { Piscina } from 'piscina';
import type { Logger } from '../lib/logger.js';
import { STREAM_EVENTS, subjects } from '../lib/nats.js';
import { type ClickHouse, isDataError } from './clickhouse.js';
import type { WriterMetrics } from './metrics.js';
import { TABLES } from './tables.js';
import type { CheckInput } from './workers/check-rows.js';

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
  /**
   * Called with messages whose rows are in ClickHouse, before they are acked. If it throws, the
   * messages are retried (and found already stored), so the hook runs at least once per message.
   */
  onStored?: (messages: JsMsg[]) => Promise<void>;
  /** Called before a message is acked after being dead-lettered. */
  onDeadLettered?: (message: JsMsg, reason: string) => Promise<void>;
}

interface Deps {
  js: JetStreamClient;
  ch: ClickHouse;
  pool: Piscina;
  log: Logger;
  metrics: WriterMetrics;
  /** query_ids of this process's inserts whose requests are still open (shared by its writers). */
  running: Set<string>;
}

const COMMA = Buffer.from(',');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Streams one durable consumer into one ClickHouse table, exactly once:
 * - messages (one per ingestion request, rows prebuilt by the ingest tier) are concatenated into
 *   large inserts, several in flight; each message is acked only after its insert succeeded;
 * - every row carries batch_id, the message's Nats-Msg-Id. A message that may already have been
 *   inserted (redelivered after a crash, or retried after a failed insert) is reconciled first:
 *   fully present → ack without inserting; partly present (an insert cut off between
 *   partitions) → its rows are deleted and it is inserted again; absent → inserted;
 * - while ClickHouse is down the writer holds its batches and retries with backoff, keeping the
 *   messages alive with in-progress acks, and pulls nothing more: memory stays bounded and the
 *   backlog stays in JetStream;
 * - a message ClickHouse can never take is published to dlq.<consumer>.<subject> with the reason,
 *   and only then acked.
 */
export class ClickhouseWriter {
  private pending: JsMsg[] = [];
  private pendingRows = 0;
  private pendingBytes = 0;
  private oldest = 0;
  private inflight = 0;
  private flushing?: Promise<void>;
  private slotFreed?: () => void;
  private held = new Map<number, JsMsg>();
  private fetching?: ConsumerMessages;
  /** Running average of message sizes; the first pulls assume 100 events of ~1.6 KB. */
  private avgMessageBytes = 160 * 1024;
  private stopping = false;
  private querySeq = 0;
  private timers: NodeJS.Timeout[] = [];
  private loop?: Promise<void>;

  constructor(
    private readonly o: WriterOptions,
    private readonly d: Deps,
  ) {}

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
      }, 3_000),
    );
    this.loop = this.pull(consumer);
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
        this.fetching = await consumer.fetch({ max_messages: count, expires: 1000 });
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
      }
    }
  }

  private pendingFull(): boolean {
    return this.pendingRows >= this.o.batchRows || this.pendingBytes >= this.o.batchBytes;
  }

  private take(m: JsMsg): void {
    if (this.held.has(m.seq)) return; // a redelivery of a message this process still holds
    this.held.set(m.seq, m);
    if (this.pending.length === 0) this.oldest = Date.now();
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
    this.pending = [];
    this.pendingRows = 0;
    this.pendingBytes = 0;
    this.inflight++;
    void this.write(batch).finally(() => {
      this.inflight--;
      const wake = this.slotFreed;
      this.slotFreed = undefined;
      wake?.();
    });
  }

  private async write(batch: JsMsg[]): Promise<void> {
    let verify = batch.some((m) => m.redelivered);
    let attempt = 0;
    while (batch.length) {
      const queryId = this.nextQueryId();
      try {
        if (verify) batch = await this.reconcile(batch);
        if (!batch.length) return;
        const t0 = performance.now();
        await this.insert(body(batch), queryId);
        this.d.metrics.inserted(
          this.o.table,
          batch.reduce((n, m) => n + rowsOf(m), 0),
          performance.now() - t0,
        );
        // From here on the rows are stored: a failing hook retries through reconcile, never re-inserts.
        verify = true;
        await this.done(batch);
        return;
      } catch (err) {
        if (isDataError(err)) {
          batch = await this.isolate(batch, err);
          verify = false;
          continue;
        }
        // An outage: the insert may or may not have landed (in part), so reconcile before retrying.
        verify = true;
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

  private async done(batch: JsMsg[]): Promise<void> {
    if (batch.length && this.o.onStored) await this.o.onStored(batch);
    for (const m of batch) {
      m.ack();
      this.held.delete(m.seq);
    }
  }

  private nextQueryId(): string {
    return `cw-${this.o.instance}-${this.o.consumer}-${++this.querySeq}`;
  }

  /** Every insert in flight in this process is registered, so reconcile can tell them apart. */
  private async insert(payload: Buffer, queryId: string): Promise<void> {
    this.d.running.add(queryId);
    try {
      await this.d.ch.insert(this.o.table, payload, queryId);
    } finally {
      this.d.running.delete(queryId);
    }
  }

  /**
   * Which messages of the batch are already stored? Waits first for writer inserts still running
   * in ClickHouse that no live request of this process is waiting for: those of a killed writer,
   * or one of ours whose request failed (a timeout) while ClickHouse went on. Their rows count.
   */
  private async reconcile(batch: JsMsg[]): Promise<JsMsg[]> {
    const table = `${this.d.ch.database}.${this.o.table}`;
    const deadline = Date.now() + 120_000;
    for (;;) {
      const running = await this.d.ch.rows<{ q: string }>(
        `SELECT query_id AS q FROM system.processes WHERE query_id LIKE 'cw-%' AND query LIKE 'INSERT INTO ${table} %'`,
      );
      if (!running.some((r) => !this.d.running.has(r.q)) || Date.now() > deadline) break;
      await sleep(200);
    }
    const ids = batch.map(batchIdOf);
    const found = new Map<string, number>();
    const rows = await this.d.ch.rows<{ b: string; c: string }>(
      `SELECT toString(batch_id) AS b, count() AS c FROM ${table} WHERE batch_id IN (${ids.map((i) => `'${i}'`).join(',')}) GROUP BY b`,
    );
    for (const r of rows) found.set(r.b, Number(r.c));
    const present: JsMsg[] = [];
    const partial: JsMsg[] = [];
    const absent: JsMsg[] = [];
    for (const m of batch) {
      const c = found.get(batchIdOf(m)) ?? 0;
      if (c === 0) absent.push(m);
      else if (c >= rowsOf(m)) present.push(m);
      else partial.push(m);
    }
    if (present.length)
      this.d.log.info(
        { table: this.o.table, messages: present.length },
        'already stored; acknowledging without insert',
      );
    await this.done(present);
    if (partial.length) {
      const list = partial.map((m) => `'${batchIdOf(m)}'`).join(',');
      this.d.log.warn(
        { table: this.o.table, messages: partial.length },
        'partly stored; removing their rows before inserting again',
      );
      await this.d.ch.command(`ALTER TABLE ${table} DELETE WHERE batch_id IN (${list})`);
      for (;;) {
        const [{ c }] = await this.d.ch.rows<{ c: string }>(
          `SELECT count() AS c FROM ${table} WHERE batch_id IN (${list})`,
        );
        if (Number(c) === 0) break;
        await sleep(100);
      }
    }
    return [...absent, ...partial];
  }

  /** A data error: find the messages ClickHouse cannot take, dead-letter them, return the rest. */
  private async isolate(batch: JsMsg[], err: unknown): Promise<JsMsg[]> {
    const reasons = (await this.d.pool.run({
      columns: TABLES[this.o.table],
      payloads: batch.map((m) => m.data),
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
        await this.insert(body([m]), this.nextQueryId());
        this.d.metrics.inserted(this.o.table, rowsOf(m), 0);
        await this.done([m]);
      } catch (e) {
        if (!isDataError(e)) throw e;
        await this.deadLetter(m, `ClickHouse rejected the rows: ${String((e as Error).message).slice(0, 500)}`);
      }
    }
    return [];
  }

  private async deadLetter(m: JsMsg, reason: string): Promise<void> {
    const h = natsHeaders();
    if (m.headers) for (const [k, v] of m.headers) for (const x of v) h.append(k, x);
    h.set('Cs-Dlq-Reason', reason.replace(/[\r\n]+/g, ' '));
    h.set('Cs-Dlq-Consumer', this.o.consumer);
    h.set('Cs-Original-Subject', m.subject);
    h.set('Cs-Original-Seq', String(m.seq));
    h.set('Cs-Original-Msg-Id', m.headers?.get('Nats-Msg-Id') ?? '');
    // A dead-letter copy is stored once even if we crash between publishing and acking.
    await this.d.js.publish(subjects.dlq(this.o.consumer, m.subject), m.data, {
      headers: h,
      msgID: `dlq-${this.o.consumer}-${m.seq}`,
    });
    this.d.log.error({ consumer: this.o.consumer, seq: m.seq, subject: m.subject, reason }, 'message dead-lettered');
    this.d.metrics.deadLettered(this.o.table);
    await this.o.onDeadLettered?.(m, reason);
    m.ack();
    this.held.delete(m.seq);
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

  get heldMessages(): number {
    return this.held.size;
  }
}

function rowsOf(m: JsMsg): number {
  return Number(m.headers?.get('Cs-Rows') ?? 0);
}

function batchIdOf(m: JsMsg): string {
  const id = m.headers?.get('Nats-Msg-Id') ?? '';
  // batch ids are UUIDs set by the ingest tier; anything else can only be a foreign message.
  return /^[0-9a-f-]{36}$/i.test(id) ? id.toLowerCase() : '00000000-0000-0000-0000-000000000000';
}

function body(batch: JsMsg[]): Buffer {
  const parts: Buffer[] = [];
  let size = 0;
  for (let i = 0; i < batch.length; i++) {
    if (i) {
      parts.push(COMMA);
      size += 1;
    }
    const d = batch[i].data;
    parts.push(Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    size += d.byteLength;
  }
  return Buffer.concat(parts, size);
}
