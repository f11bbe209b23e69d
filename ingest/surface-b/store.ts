import { FORMAT_HEADER, ROW_FORMAT } from '../../lib/row-binary.js';
import { subjects } from '../../lib/nats.js';
import { type IdempotencyClaim, onceWithKey } from '../../lib/idempotency.js';
import { ApiError } from '../../lib/problem.js';
import type { BufferPool } from '../../lib/buffer-pool.js';
import type { Logger } from '../../lib/logger.js';
import type { Sql } from '../../lib/pg.js';
import { DedupKeys, type KeySet } from './dedup.js';
import { payloadOf, type PreparedB } from './events.js';
import type { Publisher } from '../publisher.js';
import type { DailyQuota } from '../quota.js';

export interface Answer {
  status: number;
  body: Buffer;
  headers: Array<[string, string]>;
}

export interface StoreRequest {
  tenantId: string;
  plan: string;
  subject: string;
  /** Nats-Msg-Id and batch_id of the rows. */
  msgId: string;
  prepared: PreparedB;
  idempotency?: IdempotencyClaim;
  /** Backfill: the job row is written with the events. */
  job?: { id: string; rejected: number };
  /** Computed before anything is stored, so a replay returns exactly these bytes. */
  answer: Answer;
}

export interface StoreResult extends Answer {
  replayed: boolean;
  stored: number;
}

export interface StoreOptions {
  /** Largest JetStream message (nats max_payload, minus headers). */
  maxPayloadBytes: number;
  /**
   * How long a request's reservation of its deduplication keys stands unconfirmed before others take them over
   * (dedup.ts).
   */
  reservationMs: number;
  /** How long a request waits for another request holding the same Idempotency-Key. */
  idempotencyWaitMs: number;
  /**
   * request: keys claimed in PostgreSQL before the publish. stream: no claim here; a request with
   * keys is published on its workspace's keyed subject, where the processors drop duplicates.
   */
  dedupAt: 'request' | 'stream';
}

const pgCode = (err: unknown) => (err as { code?: string })?.code;

const keySet = (r: StoreRequest): KeySet => ({
  tenantId: r.tenantId,
  batchId: r.msgId,
  customers: r.prepared.keyCustomers,
  externals: r.prepared.keyExternal,
});

/** A request checked and charged, its rows ready to publish. */
interface Ready {
  r: StoreRequest;
  bytes: Buffer;
  names: string[];
  result: StoreResult;
}

/**
 * Stores one surface-B request atomically: its deduplication keys (SURFACE_B_DEDUP=request), the daily
 * quota, the backfill job row, the Idempotency-Key record and the JetStream publish, the publish last:
 * whatever can fail in PostgreSQL has run before it, so an error answer never follows stored events.
 *
 * A plain request (no Idempotency-Key, no job) reserves its keys (dedup.ts) in one statement,
 * publishes, then confirms them; a failed publish, or any error before it, releases them, so its
 * retry is not mistaken for a duplicate. No transaction stays open across the publish.
 *
 * A request with an Idempotency-Key or a backfill job runs in one transaction held until the
 * PubAck instead: its record and job row must not be seen before the events are stored, and a
 * second request with the same key waits on the record's row lock to see the first one's outcome.
 * Its keys are uncommitted rows until then, which another request sharing them waits on.
 */
export class SurfaceBStore {
  private readonly keys: DedupKeys;

  constructor(
    private readonly sql: Sql,
    private readonly publisher: Publisher,
    private readonly quota: DailyQuota,
    private readonly o: StoreOptions,
    private readonly log: Logger,
  ) {
    this.keys = new DedupKeys(sql, { reservationMs: o.reservationMs, maxWaitMs: o.reservationMs + 5000 });
  }

  /** Where requests' rows and payloads are written (the publisher's pool). */
  get payloads(): BufferPool {
    return this.publisher.payloads;
  }

  /** Hears when other requests' reservations end (before the first request). */
  listen(): Promise<void> {
    return this.keys.listen();
  }

  /** Releases the keys of requests whose process died, a reservation's length after they expired. */
  sweepExpired(): Promise<number> {
    return this.keys.sweep(this.o.reservationMs);
  }

  async store(r: StoreRequest): Promise<StoreResult> {
    if (this.o.dedupAt === 'stream') {
      if (r.prepared.keyCustomers.length > 0) r = { ...r, subject: subjects.keyed(r.tenantId) };
      if (!r.idempotency && !r.job) return this.send(await this.charge(r, null));
    }
    const keyed = this.o.dedupAt === 'request' && r.prepared.keyCustomers.length > 0;
    if (!r.idempotency && !r.job) return keyed ? this.reserved(r) : this.send(await this.charge(r, null));
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.sql.begin((tx) => this.inTransaction(tx as unknown as Sql, r));
      } catch (err) {
        // Overlapping key sets are inserted in one order, but a deadlock is still retried rather than failed.
        if (pgCode(err) === '40P01' && attempt < 2) continue;
        throw err;
      }
    }
  }

  /** Reserve the keys, publish what is new, confirm; on any failure the keys are released. */
  private async reserved(r: StoreRequest): Promise<StoreResult> {
    const s = keySet(r);
    let fresh: Uint8Array | undefined;
    let result: StoreResult;
    try {
      fresh = await this.keys.claim(this.sql, s, true);
      result = await this.send(await this.charge(r, fresh));
    } catch (err) {
      await this.keys.release(s, fresh).catch((e) =>
        // The reservation expires instead: the next request with these keys stores them.
        this.log.error({ trace_id: r.msgId, err: e }, 'deduplication keys not released'),
      );
      throw err;
    }
    await this.keys.confirm(s).catch((e) =>
      // Stored, but its keys stay in flight until the reservation expires; then a copy may follow.
      this.log.error({ trace_id: r.msgId, err: e }, 'deduplication keys not confirmed'),
    );
    return result;
  }

  private async inTransaction(tx: Sql, r: StoreRequest): Promise<StoreResult> {
    if (!r.idempotency) return this.send(await this.dedupe(tx, r));
    const run: { ready?: Ready } = {};
    const out = await onceWithKey(tx, r.tenantId, r.idempotency, this.o.idempotencyWaitMs, async () => {
      run.ready = await this.dedupe(tx, r);
      return run.ready.result;
    });
    if (out.replayed || !run.ready) return { ...out.answer, replayed: true, stored: 0 };
    // The answer is recorded by now; the transaction commits after the PubAck.
    return this.send(run.ready);
  }

  /** Records the request's deduplication keys inside the transaction; what is new goes on. */
  private async dedupe(tx: Sql, r: StoreRequest): Promise<Ready> {
    const claims = this.o.dedupAt === 'request' && r.prepared.keyCustomers.length > 0;
    const fresh = claims ? await this.keys.claim(tx, keySet(r), false) : null;
    return this.charge(r, fresh, tx);
  }

  /** Size, quota, job row: what every request does before its publish, inside the transaction when there is one. */
  private async charge(r: StoreRequest, fresh: Uint8Array | null, tx?: Sql): Promise<Ready> {
    const { payload: bytes, stored, names } = payloadOf(r.prepared, fresh, this.publisher.payloads);
    if (bytes.length > this.o.maxPayloadBytes) {
      throw new ApiError(
        'payload_too_large',
        `The events of this request take ${bytes.length} bytes once stored, more than the ` +
          `${this.o.maxPayloadBytes} one request may hold; send smaller batches.`,
      );
    }
    const charge = this.quota.take(r.tenantId, r.plan, stored);
    if (charge) {
      const d = await charge;
      if (!d.ok) {
        throw new ApiError(
          'daily_quota_exceeded',
          `The daily event quota of ${d.limit} events of the ${r.plan} plan is used up for today; ` +
            'it resets at 00:00 UTC.',
          undefined,
          [['Retry-After', String(d.retryAfter)]],
        );
      }
    }
    if (r.job && tx) {
      const counts = {
        accepted: r.prepared.accepted,
        rejected: r.job.rejected,
        duplicates: r.prepared.accepted - stored,
        stored: 0,
      };
      await tx`
        INSERT INTO jobs (id, tenant_id, type, status, params, input, total, counts, finished_at)
        VALUES (
          ${r.job.id}, ${r.tenantId}, 'events.backfill', ${stored > 0 ? 'queued' : 'succeeded'}, '{}', '[]', ${stored},
          ${JSON.stringify(counts)}::text::jsonb, ${stored > 0 ? null : new Date()}
        )`;
    }
    return { r, bytes, names, result: { ...r.answer, replayed: false, stored } };
  }

  private async send({ r, bytes, names, result }: Ready): Promise<StoreResult> {
    if (result.stored > 0) {
      const meta: Record<string, string> = {
        'Cs-Rows': String(result.stored),
        'Cs-Names': names.join(','),
        [FORMAT_HEADER]: ROW_FORMAT,
      };
      if (r.job) meta['Cs-Job-Id'] = r.job.id;
      await this.publisher.publish(r.subject, bytes, r.msgId, meta);
    } else this.publisher.payloads.give(bytes);
    return result;
  }
}
