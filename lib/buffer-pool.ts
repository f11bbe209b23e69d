/**
 * Large buffers reused instead of allocated per request. A fresh buffer of tens of kilobytes is
 * memory outside V8's heap, and V8 answers a steady stream of them with full mark-compact
 * collections (about one for every couple of megabytes allocated): at a few hundred requests a
 * second that is a 5–30 ms pause every half second, the latency tail of the ingest tier. Buffers
 * from here are allocated once per size class and handed back when their owner is done.
 *
 * Rules for an owner: give a buffer back only once nothing reads it any more (for a JetStream
 * payload: after its PubAck, never after a failed publish, which the client may still send on
 * reconnect); a buffer kept, or lost on an error path, is simply left to the garbage collector.
 */
export class BufferPool {
  /** Size classes, smallest first: powers of two from `minBytes` to `maxBytes`. */
  private readonly classes: number[] = [];
  private readonly idle: Buffer[][] = [];
  /** Every ArrayBuffer this pool allocated, and those now idle (a second give must not hand one out twice). */
  private readonly born = new WeakSet<ArrayBufferLike>();
  private readonly idleSet = new Set<ArrayBufferLike>();
  private idleBytes = 0;

  constructor(
    minBytes = 64 * 1024,
    maxBytes = 1024 * 1024,
    /** Idle bytes kept at most; a buffer given back past it is dropped. */
    private readonly maxIdleBytes = 16 * 1024 * 1024,
  ) {
    for (let size = minBytes; size <= maxBytes; size *= 2) {
      this.classes.push(size);
      this.idle.push([]);
    }
  }

  /** The largest buffer this pool hands out. */
  get maxBytes(): number {
    return this.classes[this.classes.length - 1];
  }

  /** A buffer of at least `bytes` (its content is whatever was there); larger than maxBytes: a fresh one. */
  take(bytes: number): Buffer {
    for (let i = 0; i < this.classes.length; i++) {
      if (this.classes[i] < bytes) continue;
      const b = this.idle[i].pop();
      if (b) {
        this.idleSet.delete(b.buffer);
        this.idleBytes -= b.length;
        return b;
      }
      const fresh = Buffer.allocUnsafeSlow(this.classes[i]);
      this.born.add(fresh.buffer);
      return fresh;
    }
    return Buffer.allocUnsafe(bytes);
  }

  /** Hands back a buffer from take() (or any view of one); anything else is ignored. */
  give(b: Buffer | Uint8Array): void {
    const ab = b.buffer;
    if (!this.born.has(ab) || this.idleSet.has(ab)) return;
    const i = this.classes.indexOf(ab.byteLength);
    if (i < 0 || this.idleBytes + ab.byteLength > this.maxIdleBytes) return;
    this.idleSet.add(ab);
    this.idleBytes += ab.byteLength;
    this.idle[i].push(Buffer.from(ab));
  }
}
