import { ErrorCode, headers, type JetStreamClient, type NatsError } from 'nats';
import { IngestError } from './errors.js';

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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * One JetStream message per request, acknowledged by the stream before we answer. A publish that
 * fails transiently (no PubAck in time, the server restarting) is sent again under the same
 * Nats-Msg-Id, with backoff, until the request's budget runs out: the stream's duplicate window
 * answers "duplicate" when an earlier copy was stored, so the request is stored once or not at
 * all. A copy sent after a lost PubAck is marked (Cs-Republished): a restarted nats-server may
 * have forgotten the first copy's id, and the writer then checks the marked copy against what is
 * stored.
 */
export class Publisher {
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
        return;
      } catch (err) {
        last = err;
        const e = err as NatsError;
        if (STORE_FULL.has(e.api_error?.err_code ?? 0)) {
          throw new IngestError('service_unavailable', `event store is full: ${e.message}`, [], 5);
        }
        if (!TRANSIENT.has(e.code)) break;
        // Only a publish that may have reached the server can have left a copy there.
        if (e.code === ErrorCode.Timeout) maybeStored = true;
        if (Date.now() + backoff >= deadline) break;
        await sleep(backoff);
        backoff = Math.min(1000, backoff * 2);
      }
    }
    const e = new IngestError(
      'internal_error',
      `JetStream did not acknowledge: ${String((last as Error)?.message ?? last)}`,
    );
    (e as { cause?: unknown }).cause = last;
    throw e;
  }
}
