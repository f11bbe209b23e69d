import { createInbox, headers, type Msg, type MsgHdrs, type NatsConnection } from 'nats';
import { BufferPool } from '../lib/buffer-pool.js';

/** JetStream API error codes (nats-server's err_code) that mean the stream cannot take more. */
const STORE_FULL = new Set([
  10077, // store failed: maximum bytes or messages exceeded (discard new)
  10023, // insufficient resources
  10047, // storage resources exceeded
]);

/**
 * Why a publish failed, in words neither surface owns: each surface turns these into its own
 * answer (surface A's 503/500 bodies, surface B's problem+json). Sorted by what became of the
 * publish (`PublishFailure.kind`) and JetStream's err_code, never by message text.
 */
export class EventStoreError extends Error {
  constructor(
    readonly code: 'EVENT_STORE_FULL' | 'EVENT_STORE_UNAVAILABLE',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The stream is at its byte or message cap: nothing of the request was stored; retry later. */
export class EventStoreFull extends EventStoreError {
  /** Seconds a client should wait. */
  readonly retryAfter = 5;
  constructor(cause: unknown) {
    super('EVENT_STORE_FULL', `event store is full: ${(cause as Error).message}`, { cause });
  }
}

/** No PubAck within the request's budget: nothing of the request was stored. */
export class EventStoreUnavailable extends EventStoreError {
  constructor(cause: unknown) {
    super('EVENT_STORE_UNAVAILABLE', `JetStream did not acknowledge: ${String((cause as Error)?.message ?? cause)}`, {
      cause,
    });
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Why one publish got no PubAck. `timeout`: none came in time (the server may have stored the
 * message); `no-responders`: nothing listens on the subject (no stream, or JetStream still
 * loading after a restart); `api`: the stream refused it, with JetStream's `err_code`; `closed`:
 * the connection is closed or draining, and nothing was sent.
 */
export class PublishFailure extends Error {
  constructor(
    readonly kind: 'timeout' | 'no-responders' | 'api' | 'closed',
    message: string,
    readonly errCode = 0,
  ) {
    super(message);
  }
}

/** What the publisher reports (ingest/metrics.ts). */
export interface PublishWatch {
  acked(ms: number): void;
  publishFailed(kind: PublishFailure['kind'] | 'store_full'): void;
}

interface Waiting {
  resolve(): void;
  reject(e: PublishFailure): void;
  timer: NodeJS.Timeout;
}

/**
 * JetStream publishes and their PubAcks over one inbox subscription: a publish is a NATS publish
 * with a reply subject of its own under the inbox, and its PubAck settles it. This is what
 * nats.js's `js.publish` does, less the per-publish work a request does there (a request object,
 * a token, a promise chain, an Error with its stack trace made for every successful request).
 */
class PubAcks {
  private readonly prefix = `${createInbox()}.`;
  private readonly waiting = new Map<number, Waiting>();
  private next = 0;
  private readonly decoder = new TextDecoder();

  constructor(private readonly nc: NatsConnection) {
    // An error here ends no publish: each one still settles by its PubAck or its timeout.
    nc.subscribe(`${this.prefix}*`, { callback: (err, msg) => !err && this.settle(msg) });
  }

  /** Resolves once the stream acknowledges (a duplicate included: it was stored before). */
  publish(subject: string, payload: Uint8Array, h: MsgHdrs, timeoutMs: number): Promise<void> {
    const id = this.next++;
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new PublishFailure('timeout', `no PubAck within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiting.set(id, { resolve, reject, timer });
      if (this.queued.push({ id, subject, payload, h }) === 1) setImmediate(this.sendQueued);
    });
  }

  /**
   * The publishes of this turn of the event loop, sent together once its I/O is handled. Each
   * request's rows (about 55 KB for the benchmark's bodies) passed nats.js's flush threshold and
   * went out in a write of their own; a turn at full load reads a dozen requests, whose publishes
   * now leave in one `writev` (the connection's pending limit is raised to let them: connectNats),
   * and nats-server is woken once for them. The rows' bytes are copied into the kernel all the
   * same, so the saving is the calls and wake-ups: writev fell from 10 % to 8 % of ingest's CPU
   * at full load, and at half load a turn rarely holds more than one.
   */
  private readonly queued: Array<{ id: number; subject: string; payload: Uint8Array; h: MsgHdrs }> = [];

  private readonly sendQueued = () => {
    const q = this.queued.splice(0);
    for (const { id, subject, payload, h } of q) {
      try {
        this.nc.publish(subject, payload, { reply: this.prefix + id, headers: h });
      } catch (err) {
        const w = this.waiting.get(id);
        if (!w) continue;
        clearTimeout(w.timer);
        this.waiting.delete(id);
        w.reject(new PublishFailure('closed', (err as Error).message));
      }
    }
  };

  private settle(msg: Msg): void {
    const id = Number(msg.subject.slice(this.prefix.length));
    const w = this.waiting.get(id);
    if (!w) return; // answered after its timeout
    this.waiting.delete(id);
    clearTimeout(w.timer);
    const failure = this.failure(msg);
    if (failure) w.reject(failure);
    else w.resolve();
  }

  private failure(msg: Msg): PublishFailure | undefined {
    if (msg.headers?.code === 503) return new PublishFailure('no-responders', 'no responders for the subject');
    let ack: { error?: { err_code?: number; description?: string } };
    try {
      ack = JSON.parse(this.decoder.decode(msg.data));
    } catch {
      return new PublishFailure('api', 'unreadable PubAck');
    }
    if (ack.error) return new PublishFailure('api', ack.error.description ?? 'JetStream error', ack.error.err_code);
  }
}

/**
 * One JetStream message per request, acknowledged by the stream before we answer. A publish that
 * fails transiently (no PubAck in time, the server restarting) is sent again under the same
 * Nats-Msg-Id, with backoff, until the request's budget runs out: the stream's duplicate window
 * answers "duplicate" when an earlier copy was stored, so the request is stored once or not at
 * all. A copy sent after a lost PubAck is marked (Cs-Republished): a restarted nats-server may
 * have forgotten the first copy's id, and the writer then checks the marked copy against what is
 * stored.
 *
 * Payloads are built in buffers from `payloads` and go back there once acknowledged (a payload
 * from anywhere else is left alone); after a failed publish the buffer is left to the garbage
 * collector, as the NATS client may still send what it buffered when it reconnects.
 */
export class Publisher {
  readonly payloads = new BufferPool();
  private readonly acks: PubAcks;

  constructor(
    nc: NatsConnection,
    private readonly timeoutMs: number,
    /** Total time a request may spend publishing; the default is three PubAck waits. */
    private readonly budgetMs = 3 * timeoutMs,
    /** Told of each request's PubAck latency and of each attempt that failed (/metrics). */
    private readonly watch?: PublishWatch,
  ) {
    this.acks = new PubAcks(nc);
  }

  async publish(subject: string, payload: Uint8Array, msgId: string, meta: Record<string, string>): Promise<void> {
    const h = headers();
    h.set('Nats-Msg-Id', msgId);
    for (const k in meta) h.set(k, meta[k]);
    const deadline = Date.now() + this.budgetMs;
    let last: unknown;
    let maybeStored = false;
    let backoff = 50;
    const t0 = performance.now();
    for (let attempt = 0; ; attempt++) {
      if (maybeStored) h.set('Cs-Republished', String(attempt));
      const left = deadline - Date.now();
      try {
        await this.acks.publish(subject, payload, h, Math.max(100, Math.min(this.timeoutMs, left)));
        this.payloads.give(payload);
        this.watch?.acked(performance.now() - t0);
        return;
      } catch (err) {
        last = err;
        const e = err as PublishFailure;
        const full = STORE_FULL.has(e.errCode);
        this.watch?.publishFailed(full ? 'store_full' : (e.kind ?? 'closed'));
        if (full) throw new EventStoreFull(err);
        // Only a publish that may have reached the server can have left a copy there.
        if (e.kind === 'timeout') maybeStored = true;
        else if (e.kind !== 'no-responders') break;
        if (Date.now() + backoff >= deadline) break;
        await sleep(backoff);
        backoff = Math.min(1000, backoff * 2);
      }
    }
    throw new EventStoreUnavailable(last);
  }
}
