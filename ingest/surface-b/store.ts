import { FORMAT_HEADER, ROW_FORMAT } from '../../lib/row-binary.js';
import { type IdempotencyClaim, onceWithKey } from '../../lib/idempotency.js';
import { ApiError } from '../../lib/problem.js';
import type { Sql } from '../../lib/pg.js';
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
  /** How long a request waits for another request holding the same Idempotency-Key. */
  idempotencyWaitMs: number;
}

const pgCode = (err: unknown) => (err as { code?: string })?.code;

/** A request checked and charged, its rows ready to publish. */
interface Ready {
  r: StoreRequest;
  bytes: Buffer;
  names: string[];
  result: StoreResult;
}

/**
 * Stores one surface-B request atomically: the Idempotency-Key claim, the deduplication keys, the
 * daily quota, the backfill job row and the JetStream publish. The PostgreSQL transaction stays
 * open until the PubAck and is rolled back when the publish fails, so a failed request records
 * nothing and its retry is not mistaken for a duplicate. The publish is the last step: whatever
 * can fail in PostgreSQL (recording the answer too) has run before it, so an error answer never
 * follows stored events. Two requests carrying the same key wait on each other's row lock: the
 * second sees the first's outcome.
 */
export class SurfaceBStore {
  constructor(
    private readonly sql: Sql,
    private readonly publisher: Publisher,
    private readonly quota: DailyQuota,
    private readonly o: StoreOptions,
  ) {}

  async store(r: StoreRequest): Promise<StoreResult> {
    if (!r.idempotency && !r.job && r.prepared.keyCustomers.length === 0) return this.send(await this.charge(r, null));
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

  /** Records the request's deduplication keys (one statement); what is new goes on. */
  private async dedupe(tx: Sql, r: StoreRequest): Promise<Ready> {
    const p = r.prepared;
    let fresh: Uint8Array | null = null;
    if (p.keyCustomers.length) {
      // One statement for the whole request; sorted so concurrent requests lock shared keys in one order.
      const inserted = await tx<{ c: string; e: string }[]>`
        INSERT INTO event_dedup (tenant_id, customer_id, external_id)
        SELECT ${r.tenantId}::uuid, c, e FROM unnest(${p.keyCustomers}::uuid[], ${p.keyExternal}::text[]) AS u(c, e) ORDER BY c, e
        ON CONFLICT DO NOTHING
        RETURNING customer_id::text AS c, external_id AS e`;
      fresh = new Uint8Array(p.keyCustomers.length);
      if (inserted.length === p.keyCustomers.length) fresh.fill(1);
      else for (const row of inserted) fresh[p.keyIndex!.get(`${row.c} ${row.e}`)!] = 1;
    }
    return this.charge(r, fresh, tx);
  }

  /** Size, quota, job row: what every request does before its publish, inside the transaction when there is one. */
  private async charge(r: StoreRequest, fresh: Uint8Array | null, tx?: Sql): Promise<Ready> {
    const { payload: bytes, stored, names } = payloadOf(r.prepared, fresh, this.publisher.payloads);
    if (bytes.length > this.o.maxPayloadBytes) {
      throw new ApiError(
        'payload_too_large',
        `The events of this request take ${bytes.length} bytes once stored, more than the ${this.o.maxPayloadBytes} one request may hold; send smaller batches.`,
      );
    }
    const charge = this.quota.take(r.tenantId, r.plan, stored);
    if (charge) {
      const d = await charge;
      if (!d.ok) {
        throw new ApiError(
          'daily_quota_exceeded',
          `The daily event quota of ${d.limit} events of the ${r.plan} plan is used up for today; it resets at 00:00 UTC.`,
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
        VALUES (${r.job.id}, ${r.tenantId}, 'events.backfill', ${stored > 0 ? 'queued' : 'succeeded'}, '{}', '[]', ${stored}, ${JSON.stringify(counts)}::text::jsonb,
          ${stored > 0 ? null : new Date()})`;
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
