import type { JsMsg, Msg, MsgHdrs, NatsConnection } from 'nats';

/** What the writer reads of a message: a JsMsg has it, and so has a Held. */
export type RowsMessage = Pick<JsMsg, 'seq' | 'subject' | 'data' | 'headers' | 'redelivered'> & {
  /** Rows the writer left out as duplicates of keys stored or claimed before (processors/dedup/). */
  duplicates?: number;
};

const ACK = Uint8Array.of(43, 65, 67, 75); // +ACK
const WPI = Uint8Array.of(43, 87, 80, 73); // +WPI: in progress, restarts the ack wait

export type Publisher = Pick<NatsConnection, 'publish'>;

/**
 * A message the writer holds until its rows are stored: its payload, copied out of the client's
 * read buffers, and what acknowledging it takes (the reply subject). The JsMsg is dropped at once.
 *
 * Why: nats.js hands out payloads as views of its socket reads. A JsMsg held for the length of an
 * insert (hundreds of milliseconds) outlives two scavenges and moves to the old generation, and
 * the socket buffers it keeps are freed only by a major GC, which V8 starts late for external
 * memory: with 32 MB inserts, 76–212 MB of external memory for at most 96 MB of rows held.
 * Copied into an arena that is reused batch after batch, the rows cost a fixed amount and the
 * socket buffers die young.
 */
export class Held implements RowsMessage {
  readonly seq: number;
  readonly subject: string;
  readonly headers: MsgHdrs | undefined;
  readonly redelivered: boolean;
  duplicates?: number;
  private readonly reply: string;
  private acked = false;

  constructor(
    m: JsMsg,
    readonly data: Buffer,
    private readonly nc: Publisher,
  ) {
    this.seq = m.seq;
    this.subject = m.subject;
    this.headers = m.headers;
    this.redelivered = m.redelivered;
    // JsMsg keeps the core message (and so its reply subject) public on the implementation only.
    const reply = (m as Partial<{ msg: Msg }>).msg?.reply;
    if (!reply) throw new Error(`message ${m.seq} has no reply subject: it cannot be acknowledged`);
    this.reply = reply;
  }

  /** As JsMsg.ack: once; later acks and in-progress signals are dropped. */
  ack(): void {
    if (this.acked) return;
    this.acked = true;
    this.nc.publish(this.reply, ACK);
  }

  /** As JsMsg.working: restarts the message's ack wait. */
  working(): void {
    if (!this.acked) this.nc.publish(this.reply, WPI);
  }
}

/** One buffer that a batch's payloads are copied into, end to end. */
export class Arena {
  used = 0;
  constructor(readonly buf: Buffer) {}

  /** The bytes copied into the arena, or undefined when they do not fit. */
  copy(src: Uint8Array): Buffer | undefined {
    if (this.used + src.byteLength > this.buf.byteLength) return undefined;
    const out = this.buf.subarray(this.used, this.used + src.byteLength);
    out.set(src);
    this.used += src.byteLength;
    return out;
  }
}

/**
 * A writer's arenas: at most `max` (the batch being gathered and those being inserted), each of
 * `size` bytes, allocated when first needed and reused. Arenas left unused for `idleMs` are let go,
 * so a writer that drained one burst does not keep its memory.
 */
export class Arenas {
  private free: Array<{ arena: Arena; since: number }> = [];
  private lent = 0;

  constructor(
    private readonly size: number,
    private readonly max: number,
    private readonly idleMs = 30_000,
  ) {}

  /** An empty arena, or undefined when all are in use (the caller then copies message by message). */
  take(): Arena | undefined {
    const f = this.free.pop();
    if (f) {
      f.arena.used = 0;
      this.lent++;
      return f.arena;
    }
    if (this.lent >= this.max) return undefined;
    this.lent++;
    return new Arena(Buffer.allocUnsafeSlow(this.size));
  }

  give(arena: Arena | undefined): void {
    if (!arena) return;
    this.lent--;
    this.free.push({ arena, since: Date.now() });
  }

  /** Lets go of arenas unused for idleMs (the writer calls it every few seconds). */
  trim(now = Date.now()): void {
    this.free = this.free.filter((f) => now - f.since < this.idleMs);
  }
}
