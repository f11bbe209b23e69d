/**
 * Events waiting to be sent, already serialized and grouped into batches as they arrive: a batch
 * is closed ("sealed") when it holds `maxEvents` events or the next event would take its body past
 * `maxBytes`, or when the flush timer or flush() says so. Senders take sealed batches oldest
 * first. Serializing at track() time is what lets the body be one join at send time, and makes a
 * batch's bytes (and so its retries' bytes) fixed from the start.
 */

/** `{"events":[` and `]}`. */
export const BODY_OVERHEAD = 13;

export class Batch<E = unknown> {
  readonly events: E[] = [];
  readonly parts: string[] = [];
  /** The body's length in bytes once joined. */
  bytes = BODY_OVERHEAD;

  constructor(
    /** Order of sealing; flush() waits for the batches sealed before it. */
    public seq: number,
    /** When its first event was queued (ms, the client's clock). */
    readonly openedAt: number,
  ) {}

  get size(): number {
    return this.events.length;
  }

  add(event: E, json: string, bytes: number): void {
    if (this.events.length > 0) this.bytes++;
    this.events.push(event);
    this.parts.push(json);
    this.bytes += bytes;
  }

  /** Whether `bytes` more would still fit under `maxBytes`. */
  fits(bytes: number, maxBytes: number): boolean {
    return this.bytes + (this.events.length > 0 ? 1 : 0) + bytes <= maxBytes;
  }

  body(): string {
    return `{"events":[${this.parts.join(',')}]}`;
  }

  /** The events from `from` to `to` (exclusive) as a batch of their own, in this one's place in the order. */
  slice(from: number, to: number): Batch<E> {
    const b = new Batch<E>(this.seq, this.openedAt);
    for (let i = from; i < to; i++) b.add(this.events[i], this.parts[i], Buffer.byteLength(this.parts[i]));
    return b;
  }
}

export class BatchQueue<E = unknown> {
  private open: Batch<E> | undefined;
  private ready: Batch<E>[] = [];
  private head = 0;
  private nextSeq = 0;
  /** Events in the open and the sealed batches. */
  queued = 0;

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
      b = this.open = new Batch<E>(-1, this.now());
      opened = true;
    }
    b.add(event, json, bytes);
    this.queued++;
    if (b.size >= this.maxEvents) this.seal();
    return opened;
  }

  /** Closes the open batch, if any, so that it can be sent. */
  seal(): void {
    const b = this.open;
    if (b === undefined) return;
    this.open = undefined;
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
