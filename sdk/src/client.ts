import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { gzip as gzipCb } from 'node:zlib';
import { ClientClosedError, HttpStatusError, IngestClientError, NetworkError } from './errors.js';
import { Batch, BatchQueue, BODY_OVERHEAD, HEAD_ROOM } from './queue.js';
import { type BackoffOptions, parseRetryAfter, retryableStatus, retryDelay } from './retry.js';
import { SURFACES } from './schemas.generated.js';
import { type Answer, Transport } from './transport.js';
import { compileEvent, type Problem, unstorablePath } from './validate.js';

/**
 * What the client promises: every event given to track() ends in exactly one of accepted (stored
 * once), rejected (with the service's per-event code), failed (its batch given up, with the
 * error) or dropped (the queue was full) — and each of the last three is told, event by event.
 *
 * How: events are checked against the service's own schemas before they are queued (one invalid
 * event would fail a whole surface-A request), serialized once, and sent in batches by
 * `concurrency` senders. A sender keeps its batch until it is resolved, so retries are bounded by
 * the senders and a service that is down fills the queue (then drops) instead of the heap. A batch's
 * bytes never change across its retries; on surface B it also keeps one Idempotency-Key, so a
 * retry after a lost answer is answered with the first answer instead of being stored again. On
 * surface A the service stores nothing of a refused request, so a retry is safe except after an
 * answer lost in transit (the error's `outcomeUnknown`): docs/sdk.md says what to do about it.
 */

export type Surface = 'a' | 'b';

/** A usage event of surface A (POST /v1/ingest/events). */
export interface EventA {
  event_name: string;
  customer_id?: string;
  external_customer_id?: string;
  external_source?: string;
  user_id?: string;
  product_id?: string;
  product_code?: string;
  properties?: Record<string, unknown>;
  timestamp?: string | Date;
}

/** A usage event of surface B (POST /v1/events). */
export interface EventB {
  customer_id: string;
  event_name: string;
  user_email?: string;
  user_external_id?: string;
  timestamp?: string | Date;
  properties?: Record<string, unknown>;
  external_id?: string;
}

export type IngestEvent = EventA | EventB;

interface CommonOptions {
  /** Base URL of the ingest tier, e.g. https://ingest.example.com. */
  url: string;
  /** Events per request: default and maximum 100 on surface A, 1000 on surface B. */
  maxBatchEvents?: number;
  /** Bytes of a request body before compression; default the service's body cap (1 MiB A, 3 MiB B). */
  maxBatchBytes?: number;
  /** Longest an event waits for its batch to fill, ms (default 1000). */
  flushIntervalMs?: number;
  /** Events held (queued and in flight) before track() drops (default 100,000). */
  maxQueueEvents?: number;
  /** Requests in flight (default 4). */
  concurrency?: number;
  /** gzip request bodies when that saves bytes (default true, level 1). */
  gzip?: boolean | { level?: number };
  /** Retries per batch after its first request (default 10). */
  maxRetries?: number;
  /** Deadline of one request, ms (default 30,000: longer than the service's own publish budget). */
  timeoutMs?: number;
  /** Longest close() waits for the last batches before giving them up, ms (default 30,000; Infinity: no limit). */
  closeTimeoutMs?: number;
  /** Backoff: first retry's ceiling and the largest one, ms (defaults 100 and 10,000). */
  retryBaseMs?: number;
  retryCapMs?: number;
  /** A Retry-After longer than this (a daily quota used up) fails the batch at once, ms (default 120,000). */
  maxRetryAfterMs?: number;
}

export type IngestClientOptions = CommonOptions &
  (
    | { surface: 'a'; apiKey: string }
    | {
        surface: 'b';
        token: string;
        /** Send to POST /v1/events/backfill (timestamps up to 2 years old); each batch becomes a job. */
        backfill?: boolean;
      }
  );

export interface Stats {
  /** Events waiting for a sender. */
  queued: number;
  /** Events in batches being sent or waiting to be retried. */
  inFlight: number;
  /** Events in batches the service answered with 2xx. */
  sent: number;
  accepted: number;
  /** Refused one by one: locally (schema) or in a 2xx answer's errors. */
  rejected: number;
  /** In batches given up. */
  failed: number;
  dropped: number;
  /** Requests sent again. */
  retries: number;
}

/** One batch the service took (2xx). */
export interface BatchInfo {
  events: number;
  accepted: number;
  rejected: number;
  /** Body bytes as sent (compressed when it was). */
  bytes: number;
  attempts: number;
  /** From the first request to the answer, retries included. */
  ms: number;
  /** Surface B: answered from the record of an earlier request with the same Idempotency-Key. */
  replayed: boolean;
}

/** A backfill batch's job (GET /v1/jobs/{id} on the core API follows it). */
export interface BackfillJob {
  id: string;
  status: string;
  statusUrl: string;
  events: number;
}

export interface IngestClientEvents<E> {
  rejected: [event: E, problem: Problem];
  failed: [events: E[], error: IngestClientError];
  retry: [attempt: number, delayMs: number, reason: string];
  dropped: [event: E, reason: 'queue_full' | 'closed'];
  batch: [info: BatchInfo];
  job: [job: BackfillJob];
}

const gzipAsync = (b: Buffer, level: number) =>
  new Promise<Buffer>((resolve, reject) => gzipCb(b, { level }, (err, out) => (err ? reject(err) : resolve(out))));

/** Bodies shorter than this are sent as they are: gzip's header and table cost more than they save. */
const GZIP_MIN_BYTES = 1024;

interface Sleeper {
  timer: NodeJS.Timeout;
  wake: () => void;
}

export class IngestClient<E extends object = IngestEvent> extends EventEmitter<IngestClientEvents<E>> {
  readonly surface: Surface;
  private readonly path: string;
  private readonly auth: Record<string, string>;
  private readonly check: (event: unknown) => Problem | undefined;
  private readonly maxBatchEvents: number;
  private readonly maxBatchBytes: number;
  private readonly flushIntervalMs: number;
  private readonly maxQueueEvents: number;
  private readonly lowWater: number;
  private readonly concurrency: number;
  private readonly gzipLevel: number | undefined;
  private readonly maxRetries: number;
  private readonly timeoutMs: number;
  private readonly closeTimeoutMs: number;
  private readonly backoff: BackoffOptions;
  private readonly maxRetryAfterMs: number;
  private readonly transport: Transport;
  private readonly queue: BatchQueue<E>;

  private readonly active = new Set<Batch<E>>();
  private readonly deliveries = new Set<Promise<void>>();
  private readonly sleepers = new Set<Sleeper>();
  private flushWaiters: Array<{ seq: number; resolve: () => void }> = [];
  private roomWaiters: Array<() => void> = [];
  private timer: NodeJS.Timeout | undefined;
  private closing: Promise<void> | undefined;
  private aborted = false;

  private inFlight = 0;
  private sent = 0;
  private accepted = 0;
  private rejected = 0;
  private failed = 0;
  private dropped = 0;
  private retries = 0;

  constructor(o: IngestClientOptions) {
    super();
    const s = SURFACES[o.surface];
    if (s === undefined) throw new TypeError(`surface must be 'a' or 'b', got ${String(o.surface)}`);
    this.surface = o.surface;
    if (o.surface === 'a') {
      if (!o.apiKey) throw new TypeError('surface a needs apiKey');
      this.auth = { 'X-API-Key': o.apiKey };
      this.path = s.path;
    } else {
      if (!o.token) throw new TypeError('surface b needs token');
      this.auth = { Authorization: `Bearer ${o.token}` };
      this.path = o.backfill ? s.backfillPath! : s.path;
    }
    const eventCheck = compileEvent(s.event);
    this.check =
      o.surface === 'a'
        ? (e) =>
            eventCheck(e) ??
            // Rule 1 of surface A, checked by the service on the whole request (422).
            ((e as EventA).customer_id === undefined && (e as EventA).external_customer_id === undefined
              ? { code: 'customer_reference_required', message: 'Each event needs customer_id or external_customer_id' }
              : undefined)
        : eventCheck;
    const int = (name: string, v: number | undefined, def: number, min = 1, max = Number.POSITIVE_INFINITY) => {
      const x = v ?? def;
      if (!(x >= min && x <= max) || (Number.isFinite(x) && !Number.isInteger(x)))
        throw new RangeError(`${name} must be an integer from ${min} to ${max}, got ${x}`);
      return x;
    };
    this.maxBatchEvents = int('maxBatchEvents', o.maxBatchEvents, s.maxBatchEvents, 1, s.maxBatchEvents);
    this.maxBatchBytes = int('maxBatchBytes', o.maxBatchBytes, s.maxBodyBytes, BODY_OVERHEAD + 2);
    this.flushIntervalMs = int('flushIntervalMs', o.flushIntervalMs, 1000, 0);
    this.maxQueueEvents = int('maxQueueEvents', o.maxQueueEvents, 100_000);
    this.lowWater = Math.max(0, this.maxQueueEvents - this.maxBatchEvents);
    this.concurrency = int('concurrency', o.concurrency, 4);
    this.gzipLevel = o.gzip === false ? undefined : typeof o.gzip === 'object' ? (o.gzip.level ?? 1) : 1;
    this.maxRetries = int('maxRetries', o.maxRetries, 10, 0);
    this.timeoutMs = int('timeoutMs', o.timeoutMs, 30_000);
    this.closeTimeoutMs = int('closeTimeoutMs', o.closeTimeoutMs, 30_000, 0);
    this.backoff = {
      baseMs: int('retryBaseMs', o.retryBaseMs, 100, 0),
      capMs: int('retryCapMs', o.retryCapMs, 10_000, 0),
    };
    this.maxRetryAfterMs = int('maxRetryAfterMs', o.maxRetryAfterMs, 120_000, 0);
    this.transport = new Transport(new URL(o.url), this.concurrency);
    this.queue = new BatchQueue<E>(this.maxBatchEvents, this.maxBatchBytes);
  }

  /**
   * Queues one event: true once it is queued. False when it was not: it broke the service's
   * schema ('rejected' tells why), or the queue is full or the client closing ('dropped').
   */
  track(event: E): boolean {
    if (this.closing !== undefined) return this.drop(event, 'closed');
    if (this.queue.queued + this.inFlight >= this.maxQueueEvents) return this.drop(event, 'queue_full');
    const problem = this.check(event);
    if (problem !== undefined) return this.reject(event, problem);
    if (this.queue.write(event) < 0 && !this.add(event)) return false;
    if (this.timer === undefined && this.queue.openedAt !== undefined) this.arm(this.flushIntervalMs);
    if (this.queue.waiting > 0) this.pump();
    return true;
  }

  /** An event writeJson leaves to JSON.stringify: serialized, checked for what JSON.stringify escapes, queued. */
  private add(event: E): boolean {
    let json: string;
    try {
      json = JSON.stringify(event);
    } catch (err) {
      return this.reject(event, {
        code: 'invalid_event',
        message: `not serializable as JSON: ${(err as Error).message}`,
      });
    }
    if (json.includes('\\u')) {
      const at = unstorablePath(event);
      if (at !== undefined)
        return this.reject(event, {
          code: 'invalid_unicode',
          message: `${at} contains a NUL character (\\u0000) or an unpaired UTF-16 surrogate, which cannot be stored`,
        });
    }
    const bytes = Buffer.byteLength(json);
    if (bytes + BODY_OVERHEAD > this.maxBatchBytes)
      return this.reject(event, {
        code: 'event_too_large',
        message: `the event takes ${bytes} bytes as JSON; a request body may take ${this.maxBatchBytes}`,
      });
    this.queue.push(event, json, bytes);
    return true;
  }

  /** Whether track() would queue an event now rather than drop it. */
  hasCapacity(): boolean {
    return this.closing === undefined && this.queue.queued + this.inFlight < this.maxQueueEvents;
  }

  /**
   * Resolves once there is room for at least a batch of events again: a producer reading from a
   * file or a stream awaits it instead of dropping.
   */
  waitForCapacity(): Promise<void> {
    if (this.queue.queued + this.inFlight <= this.lowWater || this.closing !== undefined) return Promise.resolve();
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  /** Sends everything queued now and resolves once each of those events is resolved. */
  flush(): Promise<void> {
    this.queue.seal();
    this.pump();
    const seq = this.queue.lastSeq;
    if (this.lowestUnresolved() > seq) return Promise.resolve();
    return new Promise((resolve) => this.flushWaiters.push({ seq, resolve }));
  }

  /**
   * Flushes, then stops: later track() calls drop. What is not resolved after closeTimeoutMs is
   * given up and reported as failed (ClientClosedError; `outcomeUnknown` when a request was out).
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  stats(): Stats {
    return {
      queued: this.queue.queued,
      inFlight: this.inFlight,
      sent: this.sent,
      accepted: this.accepted,
      rejected: this.rejected,
      failed: this.failed,
      dropped: this.dropped,
      retries: this.retries,
    };
  }

  private async shutdown(): Promise<void> {
    let deadline: NodeJS.Timeout | undefined;
    const flushed = Number.isFinite(this.closeTimeoutMs)
      ? await Promise.race([
          this.flush().then(() => true),
          new Promise<boolean>((resolve) => {
            deadline = setTimeout(() => resolve(false), this.closeTimeoutMs);
          }),
        ])
      : await this.flush().then(() => true);
    clearTimeout(deadline);
    if (!flushed) {
      this.aborted = true;
      for (const s of this.sleepers) s.wake();
      this.transport.destroy();
      for (const b of this.queue.drain()) this.fail(b.events, new ClientClosedError(), 0, undefined, true);
      await Promise.all(this.deliveries);
    }
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.transport.destroy();
    for (const w of this.roomWaiters) w();
    this.roomWaiters = [];
  }

  private drop(event: E, reason: 'queue_full' | 'closed'): false {
    this.dropped++;
    this.emit('dropped', event, reason);
    return false;
  }

  /** `delivering`: called from a delivery, where a listener's exception must not cut the accounting short. */
  private reject(event: E, problem: Problem, delivering = false): false {
    this.rejected++;
    if (delivering) this.safeEmit('rejected', event, problem);
    else this.emit('rejected', event, problem);
    return false;
  }

  private arm(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const opened = this.queue.openedAt;
      if (opened === undefined) return;
      const left = opened + this.flushIntervalMs - Date.now();
      if (left > 0) return this.arm(left);
      this.queue.seal();
      this.pump();
    }, ms);
  }

  private pump(): void {
    while (this.active.size < this.concurrency && !this.aborted) {
      const b = this.queue.take();
      if (b === undefined) return;
      this.active.add(b);
      this.inFlight += b.size;
      const d: Promise<void> = this.deliver(b, Date.now()).then(
        () => this.finished(b, d),
        (err: unknown) => {
          // A listener threw inside a delivery: the batch's events were already counted.
          this.finished(b, d);
          process.nextTick(() => {
            throw err;
          });
        },
      );
      this.deliveries.add(d);
    }
  }

  private finished(b: Batch<E>, d: Promise<void>): void {
    this.active.delete(b);
    this.deliveries.delete(d);
    if (this.flushWaiters.length) {
      const low = this.lowestUnresolved();
      const still = [];
      for (const w of this.flushWaiters)
        if (low > w.seq) w.resolve();
        else still.push(w);
      this.flushWaiters = still;
    }
    if (this.roomWaiters.length && this.queue.queued + this.inFlight <= this.lowWater) {
      const ws = this.roomWaiters;
      this.roomWaiters = [];
      for (const w of ws) w();
    }
    this.pump();
  }

  private lowestUnresolved(): number {
    let low = this.queue.lowestSeq;
    for (const b of this.active) if (b.seq < low) low = b.seq;
    return low;
  }

  private async encode(b: Batch<E>): Promise<{ body: Buffer; gzip: boolean }> {
    const raw = b.body();
    if (this.gzipLevel === undefined || raw.length < GZIP_MIN_BYTES) return { body: raw, gzip: false };
    const zipped = await gzipAsync(raw, this.gzipLevel);
    return zipped.length < raw.length ? { body: zipped, gzip: true } : { body: raw, gzip: false };
  }

  /** Sends one batch until it is resolved: taken (2xx), given up, or split and each part resolved. */
  private async deliver(b: Batch<E>, started: number): Promise<void> {
    const key = this.surface === 'b' ? `csp-${randomUUID()}` : undefined;
    const { body, gzip } = await this.encode(b);
    const headers: Record<string, string> = { ...this.auth, 'Content-Type': 'application/json' };
    if (gzip) headers['Content-Encoding'] = 'gzip';
    if (key !== undefined) headers['Idempotency-Key'] = key;
    for (let attempt = 1; ; attempt++) {
      // close() gave up while the body was being compressed or the retry was waiting.
      if (this.aborted) return this.fail(b.events, new ClientClosedError(), attempt - 1, key);
      let err: IngestClientError;
      let retryable = true;
      let reason: string;
      try {
        // A batch's own body has HEAD_ROOM free bytes before it; a compressed copy has none.
        const answer = await this.transport.post(this.path, headers, body, this.timeoutMs, gzip ? 0 : HEAD_ROOM);
        if (answer.status >= 200 && answer.status < 300) {
          this.took(b, answer, body.length, attempt, Date.now() - started);
          // The next batches write into its buffer, once no socket write can still read it.
          if (gzip || answer.written) this.queue.recycle(b);
          return;
        }
        // Nothing of a refused request is stored: its parts can be sent under keys of their own.
        if (answer.status === 413) return this.split(b, answer);
        const listed = answer.status === 422 && this.surface === 'a' ? listedRefusals(answer, b.size) : undefined;
        if (listed !== undefined) return this.resendWithout(b, listed);
        err = new HttpStatusError(answer.status, answer.body, parseRetryAfter(answer.headers['retry-after']));
        retryable = retryableStatus(answer.status, this.surface);
        reason = `HTTP ${answer.status}`;
      } catch (e) {
        err = e instanceof IngestClientError ? e : new NetworkError(e);
        reason = err.code;
      }
      if (this.aborted) {
        const closed = new ClientClosedError();
        closed.outcomeUnknown = err.outcomeUnknown;
        return this.fail(b.events, closed, attempt, key);
      }
      const retryAfter = err instanceof HttpStatusError ? err.retryAfterMs : undefined;
      if (!retryable || attempt > this.maxRetries || (retryAfter ?? 0) > this.maxRetryAfterMs)
        return this.fail(b.events, err, attempt, key);
      const delay = retryDelay(attempt - 1, retryAfter, this.backoff);
      this.retries++;
      this.safeEmit('retry', attempt, delay, reason);
      await this.sleep(delay);
    }
  }

  /** A 2xx answer: the batch is resolved; its per-event errors are rejections. */
  private took(b: Batch<E>, answer: Answer, bytes: number, attempts: number, ms: number): void {
    let parsed: {
      errors?: Array<{ index?: unknown; code?: unknown; message?: unknown }>;
      job_id?: string;
      status?: string;
      status_url?: string;
    } = {};
    try {
      parsed = JSON.parse(answer.body);
    } catch {
      // A 2xx without a readable body still says the batch was taken.
    }
    let rejected = 0;
    for (const e of Array.isArray(parsed.errors) ? parsed.errors : []) {
      const i = e.index;
      if (typeof i !== 'number' || !(i >= 0 && i < b.size)) continue;
      rejected++;
      this.safeEmit('rejected', b.events[i], { code: String(e.code), message: String(e.message ?? '') });
    }
    this.inFlight -= b.size;
    this.sent += b.size;
    this.rejected += rejected;
    this.accepted += b.size - rejected;
    const replayed = answer.headers['idempotent-replayed'] === 'true';
    this.safeEmit('batch', { events: b.size, accepted: b.size - rejected, rejected, bytes, attempts, ms, replayed });
    if (typeof parsed.job_id === 'string')
      this.safeEmit('job', {
        id: parsed.job_id,
        status: String(parsed.status ?? ''),
        statusUrl: String(parsed.status_url ?? `/v1/jobs/${parsed.job_id}`),
        events: b.size - rejected,
      });
  }

  /** 413: halves sent one after the other; a single event too large for the service is rejected. */
  private async split(b: Batch<E>, answer: Answer): Promise<void> {
    if (b.size === 1) {
      this.inFlight--;
      this.reject(
        b.events[0],
        { code: 'payload_too_large', message: new HttpStatusError(413, answer.body).message },
        true,
      );
      return;
    }
    const half = Math.ceil(b.size / 2);
    await this.deliver(b.slice(0, half), Date.now());
    await this.deliver(b.slice(half, b.size), Date.now());
  }

  /** Surface A's 422 named its failing events: they are rejected in the service's words, the others sent again. */
  private async resendWithout(b: Batch<E>, bad: Map<number, Problem>): Promise<void> {
    const rest = new Batch<E>(b.seq, b.openedAt, b.bytes);
    for (let i = 0; i < b.size; i++) {
      const p = bad.get(i);
      if (p === undefined) rest.addFrom(b, i);
      else {
        this.inFlight--;
        this.reject(b.events[i], p, true);
      }
    }
    if (rest.size > 0) await this.deliver(rest, Date.now());
  }

  /** `queued`: the batch never left the queue, so it was not in flight. */
  private fail(events: E[], err: IngestClientError, attempts: number, key?: string, queued = false): void {
    err.attempts = attempts;
    if (key !== undefined) err.idempotencyKey = key;
    if (!queued) this.inFlight -= events.length;
    this.failed += events.length;
    this.safeEmit('failed', events, err);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const s: Sleeper = {
        timer: setTimeout(() => s.wake(), ms),
        wake: () => {
          clearTimeout(s.timer);
          this.sleepers.delete(s);
          resolve();
        },
      };
      this.sleepers.add(s);
    });
  }

  /** A listener's exception must not leave a batch half-counted: it is thrown on the next tick instead. */
  private safeEmit<K extends keyof IngestClientEvents<E>>(name: K, ...args: IngestClientEvents<E>[K]): void {
    try {
      (this.emit as (n: K, ...a: IngestClientEvents<E>[K]) => boolean)(name, ...args);
    } catch (err) {
      process.nextTick(() => {
        throw err;
      });
    }
  }
}

/**
 * The events a surface-A 422 names (loc: body, events, index, …) with the service's type and
 * message; undefined when it names anything else (then the whole request was wrong).
 */
export function listedRefusals(answer: Answer, size: number): Map<number, Problem> | undefined {
  let detail: unknown;
  try {
    detail = (JSON.parse(answer.body) as { detail?: unknown }).detail;
  } catch {
    return undefined;
  }
  if (!Array.isArray(detail) || detail.length === 0) return undefined;
  const bad = new Map<number, Problem>();
  for (const d of detail as Array<{ loc?: unknown[]; type?: unknown; msg?: unknown }>) {
    const i = Array.isArray(d?.loc) && d.loc[0] === 'body' && d.loc[1] === 'events' ? d.loc[2] : undefined;
    if (typeof i !== 'number' || !(i >= 0 && i < size)) return undefined;
    if (!bad.has(i)) bad.set(i, { code: String(d.type), message: String(d.msg ?? '') });
  }
  return bad;
}
