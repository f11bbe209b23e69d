/**
 * Events waiting to be sent, already serialized and grouped into batches as they arrive: a batch
 * is closed ("sealed") when it holds `maxEvents` events or the next event would take its body past
 * `maxBytes`, or when the flush timer or flush() says so. Senders take sealed batches oldest
 * first. Each event's JSON is written into its batch's body buffer at track() time (by writeJson,
 * straight from the object; JSON.stringify's string for the values it leaves to it), so the body
 * is sent as it is (no join, no copy) and a batch's bytes (and so its retries' bytes) are fixed
 * from the start. The event objects are kept only because 'rejected' and 'failed' hand them back.
 */

import { NO_ROOM, NOT_PLAIN, writeJson } from './json-writer.js';

/** `{"events":[` and `]}`. */
export const BODY_OVERHEAD = 13;
/**
 * Bytes kept free in front of each body, where the transport writes the request's head so that
 * head and body leave in one write of one buffer (two buffers in one writev cost more).
 */
export const HEAD_ROOM = 1024;

const HEAD = Buffer.from('{"events":[');
const TAIL = Buffer.from(']}');
/** First capacity of a batch's buffer before the queue has seen a batch to size it by. */
const FIRST_CAPACITY = 16 * 1024;
/** Buffers kept for reuse at most. */
const MAX_SPARES = 16;
const EMPTY = Buffer.alloc(0);

export class Batch<E = unknown> {
  readonly events: E[] = [];
  /** Where each event's JSON ends in `buf`. */
  private readonly ends: number[] = [];
  /** HEAD_ROOM free bytes, then the body. */
  private buf: Buffer;
  /** The body's length in bytes once closed. */
  bytes = BODY_OVERHEAD;

  constructor(
    /** Order of sealing; flush() waits for the batches sealed before it. */
    public seq: number,
    /** When its first event was queued (ms, the client's clock). */
    readonly openedAt: number,
    /** Bytes to reserve for the body at first (it grows as needed). */
    capacity = FIRST_CAPACITY,
    /** A buffer no longer in use, taken when it is large enough. */
    spare?: Buffer,
  ) {
    const n = HEAD_ROOM + Math.max(capacity, BODY_OVERHEAD + 64);
    this.buf = spare !== undefined && spare.length >= n ? spare : Buffer.allocUnsafe(n);
    HEAD.copy(this.buf, HEAD_ROOM);
  }

  get size(): number {
    return this.events.length;
  }

  /** Appends an event and its JSON (`bytes`: the JSON's length in UTF-8). */
  add(event: E, json: string, bytes: number): void {
    let at = HEAD_ROOM + this.bytes - TAIL.length;
    this.reserve(at + 1 + bytes + TAIL.length);
    if (this.events.length > 0) this.buf[at++] = 0x2c; // ','
    this.buf.write(json, at, bytes, 'utf8');
    this.events.push(event);
    this.ends.push(at + bytes);
    this.bytes = at + bytes + TAIL.length - HEAD_ROOM;
  }

  /**
   * Appends an event, its JSON written by writeJson: its bytes, NOT_PLAIN (serialize it with
   * JSON.stringify and add() it), or NO_ROOM (it would take the body past `maxBytes`; or, in an
   * empty batch, writeJson's bound says so: add() finds out exactly). Nothing is appended then.
   */
  write(event: E, maxBytes: number): number {
    const at = HEAD_ROOM + this.bytes - TAIL.length;
    const start = this.events.length > 0 ? at + 1 : at;
    const cap = HEAD_ROOM + maxBytes - TAIL.length;
    let end: number;
    for (;;) {
      try {
        end = writeJson(event, this.buf, start, Math.min(this.buf.length - TAIL.length, cap));
      } catch {
        // A getter threw: JSON.stringify will throw the same, and the client says why.
        return NOT_PLAIN;
      }
      if (end !== NO_ROOM || this.buf.length >= HEAD_ROOM + maxBytes) break;
      this.reserve(Math.min(HEAD_ROOM + maxBytes, this.buf.length * 2));
    }
    if (end < 0) return end;
    if (start > at) this.buf[at] = 0x2c; // ','
    this.events.push(event);
    this.ends.push(end);
    this.bytes = end + TAIL.length - HEAD_ROOM;
    return end - start;
  }

  /** Whether `bytes` more would still fit under `maxBytes`. */
  fits(bytes: number, maxBytes: number): boolean {
    return this.bytes + (this.events.length > 0 ? 1 : 0) + bytes <= maxBytes;
  }

  /**
   * The request body: a view of the batch's buffer, which does not change once the batch is
   * sealed. The HEAD_ROOM bytes before it are free for the sender (Transport.post's `room`).
   */
  body(): Buffer {
    if (this.buf === EMPTY) throw new Error('the batch was recycled');
    TAIL.copy(this.buf, HEAD_ROOM + this.bytes - TAIL.length);
    return this.buf.subarray(HEAD_ROOM, HEAD_ROOM + this.bytes);
  }

  /** The events from `from` to `to` (exclusive) as a batch of their own, in this one's place in the order. */
  slice(from: number, to: number): Batch<E> {
    const b = new Batch<E>(this.seq, this.openedAt, this.bytes);
    for (let i = from; i < to; i++) b.addFrom(this, i);
    return b;
  }

  /** Appends event `i` of `other` with its JSON as it was serialized. */
  addFrom(other: Batch<E>, i: number): void {
    const start = i === 0 ? HEAD_ROOM + HEAD.length : other.ends[i - 1] + 1;
    const end = other.ends[i];
    let at = HEAD_ROOM + this.bytes - TAIL.length;
    this.reserve(at + 1 + end - start + TAIL.length);
    if (this.events.length > 0) this.buf[at++] = 0x2c;
    other.buf.copy(this.buf, at, start, end);
    this.events.push(other.events[i]);
    this.ends.push(at + end - start);
    this.bytes = at + end - start + TAIL.length - HEAD_ROOM;
  }

  /** Gives up the batch's buffer (BatchQueue.recycle): its body cannot be read afterwards. */
  release(): Buffer {
    const buf = this.buf;
    this.buf = EMPTY;
    return buf;
  }

  /** Makes `buf` at least `n` bytes long, keeping the body so far. */
  private reserve(n: number): void {
    if (n <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(n, this.buf.length * 2));
    this.buf.copy(grown, HEAD_ROOM, HEAD_ROOM, HEAD_ROOM + this.bytes - TAIL.length);
    this.buf = grown;
  }
}

export class BatchQueue<E = unknown> {
  private open: Batch<E> | undefined;
  private ready: Batch<E>[] = [];
  private head = 0;
  private nextSeq = 0;
  /** Events in the open and the sealed batches. */
  queued = 0;
  /** Capacity of the next batch's buffer: a little more than the last sealed batch took. */
  private capacity = FIRST_CAPACITY;
  /** Buffers of batches that are resolved, for the next batches: fresh memory costs page faults. */
  private readonly spares: Buffer[] = [];

  constructor(
    private readonly maxEvents: number,
    private readonly maxBytes: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Adds a serialized event; true when it opened a batch (the caller arms its flush timer). */
  push(event: E, json: string, bytes: number): boolean {
    let b = this.open;
    let opened = false;
    if (b !== undefined && !b.fits(bytes, this.maxBytes)) {
      this.seal();
      b = undefined;
    }
    if (b === undefined) {
      b = this.start();
      opened = true;
    }
    b.add(event, json, bytes);
    this.queued++;
    if (b.size >= this.maxEvents) this.seal();
    return opened;
  }

  /**
   * Adds an event, writing its JSON straight into the open batch: its bytes, or -1 when it must
   * be serialized with JSON.stringify and added with push() (Batch.write says when).
   */
  write(event: E): number {
    let b = this.open ?? this.start();
    let bytes = b.write(event, this.maxBytes);
    if (bytes === NO_ROOM && b.size > 0) {
      this.seal();
      b = this.start();
      bytes = b.write(event, this.maxBytes);
    }
    if (bytes < 0) {
      if (b.size === 0) {
        // No empty batch is left open: the flush timer would send it.
        this.open = undefined;
        this.recycle(b);
      }
      return -1;
    }
    this.queued++;
    if (b.size >= this.maxEvents) this.seal();
    return bytes;
  }

  private start(): Batch<E> {
    this.open = new Batch<E>(-1, this.now(), this.capacity, this.spares.pop());
    return this.open;
  }

  /** Closes the open batch, if any, so that it can be sent. */
  seal(): void {
    const b = this.open;
    if (b === undefined) return;
    this.open = undefined;
    this.capacity = Math.min(this.maxBytes, b.bytes + (b.bytes >> 3) + 256);
    b.seq = this.nextSeq++;
    this.ready.push(b);
  }

  /** The oldest sealed batch, taken out of the queue. */
  take(): Batch<E> | undefined {
    if (this.head >= this.ready.length) return undefined;
    const b = this.ready[this.head];
    this.ready[this.head++] = undefined as unknown as Batch<E>;
    // Compacted once the taken half dominates, so the array neither grows forever nor shifts per take.
    if (this.head > 1024 && this.head * 2 > this.ready.length) {
      this.ready = this.ready.slice(this.head);
      this.head = 0;
    }
    this.queued -= b.size;
    return b;
  }

  /**
   * Takes back the buffer of a resolved batch, which must not be used again, once nothing else can
   * read it (the client: its request was written out in full, or only its compressed copy was sent).
   */
  recycle(b: Batch<E>): void {
    const buf = b.release();
    if (this.spares.length < MAX_SPARES && buf.length <= HEAD_ROOM + Math.max(2 * this.capacity, FIRST_CAPACITY))
      this.spares.push(buf);
  }

  /** Sealed batches waiting. */
  get waiting(): number {
    return this.ready.length - this.head;
  }

  /** When the open batch got its first event, or undefined when there is none. */
  get openedAt(): number | undefined {
    return this.open?.openedAt;
  }

  /** The lowest sequence number still queued (Infinity when none is sealed). */
  get lowestSeq(): number {
    return this.head < this.ready.length ? this.ready[this.head].seq : Number.POSITIVE_INFINITY;
  }

  /** The last sequence number given (the one flush() waits for). */
  get lastSeq(): number {
    return this.nextSeq - 1;
  }

  /** Everything queued, removed (close() reports it as failed). */
  drain(): Batch<E>[] {
    this.seal();
    const all = this.ready.slice(this.head);
    this.ready = [];
    this.head = 0;
    this.queued = 0;
    return all;
  }
}
