import { ErrorCode, headers, type JetStreamClient, type NatsError } from 'nats';
import { BufferPool } from '../lib/buffer-pool.js';

/** JetStream API error codes (nats-server's err_code) that mean the stream cannot take more. */
const STORE_FULL = new Set([
  10077, // store failed: maximum bytes or messages exceeded (discard new)
  10023, // insufficient resources
  10047, // storage resources exceeded
]);

/** Failures after which the same publish may succeed: the server is away, restarting, or slow. */
const TRANSIENT = new Set<string>([
  ErrorCode.Timeout,
  ErrorCode.NoResponders, // also JetStreamNotEnabled: JetStream still loading after a restart
  ErrorCode.Disconnect,
  ErrorCode.ConnectionRefused,
  ErrorCode.ConnectionTimeout,
]);

/**
 * Why a publish failed, in words neither surface owns: each surface turns these into its own
 * answer (surface A's 503/500 bodies, surface B's problem+json). Sorted by nats.js error codes and
 * JetStream's err_code, never by message text.
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

  constructor(
    private readonly js: JetStreamClient,
    private readonly timeoutMs: number,
    /** Total time a request may spend publishing; the default is three PubAck waits. */
    private readonly budgetMs = 3 * timeoutMs,
  ) {}

  async publish(subject: string, payload: Uint8Array, msgId: string, meta: Record<string, string>): Promise<void> {
    const h = headers();
    for (const k in meta) h.set(k, meta[k]);
    const deadline = Date.now() + this.budgetMs;
    let last: unknown;
    let maybeStored = false;
    let backoff = 50;
    for (let attempt = 0; ; attempt++) {
      if (maybeStored) h.set('Cs-Republished', String(attempt));
      const left = deadline - Date.now();
      try {
        await this.js.publish(subject, payload, {
          msgID: msgId,
          headers: h,
          timeout: Math.max(100, Math.min(this.timeoutMs, left)),
        });
        this.payloads.give(payload);
        return;
      } catch (err) {
        last = err;
        const e = err as NatsError;
        if (STORE_FULL.has(e.api_error?.err_code ?? 0)) throw new EventStoreFull(err);
        if (!TRANSIENT.has(e.code)) break;
        // Only a publish that may have reached the server can have left a copy there.
        if (e.code === ErrorCode.Timeout) maybeStored = true;
        if (Date.now() + backoff >= deadline) break;
        await sleep(backoff);
        backoff = Math.min(1000, backoff * 2);
      }
    }
    throw new EventStoreUnavailable(last);
  }
}
