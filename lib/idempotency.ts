import { createHash } from 'node:crypto';
import { inTenant, type Sql } from './pg.js';
import { ApiError } from './problem.js';

/**
 * Idempotency-Key, one implementation for every endpoint that takes the header (surface B's
 * events and backfill, the core API's POST /v1/customers):
 * - the first request with a key claims its row in `idempotency_keys` inside the caller's
 *   transaction and does its work there; its answer (status, headers and the exact bytes) is
 *   recorded in the same transaction, so a failed request records nothing and may be retried;
 * - a concurrent request with the same key waits on the row lock up to `waitMs`, then answers
 *   409 `idempotency_key_in_use` with Retry-After;
 * - a later request with the same key and the same body gets the recorded answer byte for byte;
 *   with another body (or from another endpoint), 422 `idempotency_key_reused`;
 * - keys live 24 hours (`purgeIdempotencyKeys`), after which the key may be used afresh.
 */

/** 1 to 255 visible ASCII characters. */
export const IDEMPOTENCY_KEY_RE = /^[\x21-\x7e]{1,255}$/;

export interface IdempotencyClaim {
  /** The endpoint: a key is only ever replayed for the endpoint that recorded it. */
  scope: string;
  key: string;
  /** What identifies "the same request": the SHA-256 of its body. */
  hash: Buffer;
}

export interface RecordedAnswer {
  status: number;
  body: Buffer;
  headers: Array<[string, string]>;
}

export const requestHash = (body: Uint8Array | string): Buffer => createHash('sha256').update(body).digest();

/** The header value checked, or the validation error naming it (400 on every surface that takes it). */
export function checkIdempotencyKey(key: string | undefined): ApiError | null {
  if (key === undefined || IDEMPOTENCY_KEY_RE.test(key)) return null;
  return new ApiError('validation_failed', 'Idempotency-Key must be 1 to 255 visible ASCII characters.', [
    {
      field: 'Idempotency-Key',
      code: 'invalid_format',
      message: 'Idempotency-Key must be 1 to 255 visible ASCII characters',
    },
  ]);
}

const pgCode = (err: unknown) => (err as { code?: string })?.code;

/**
 * Runs `work` once per (tenant, scope, key) within 24 hours, inside `tx` (a transaction the
 * caller opened: the work's own writes commit or roll back with the record).
 */
export async function onceWithKey<T extends RecordedAnswer>(
  tx: Sql,
  tenantId: string,
  claim: IdempotencyClaim,
  waitMs: number,
  work: () => Promise<T>,
): Promise<{ replayed: true; answer: RecordedAnswer } | { replayed: false; answer: T }> {
  await tx.unsafe(`SET LOCAL lock_timeout = ${Math.max(1, Math.floor(waitMs))}`);
  let claimed: Array<Record<string, unknown>>;
  try {
    claimed = await tx`
      INSERT INTO idempotency_keys (tenant_id, scope, key, request_hash, status, body)
      VALUES (${tenantId}, ${claim.scope}, ${claim.key}, ${claim.hash}, 0, 'null')
      ON CONFLICT (tenant_id, scope, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, status = 0, body = 'null',
        response = NULL, response_headers = NULL, created_at = now()
        WHERE idempotency_keys.created_at < now() - interval '24 hours'
      RETURNING 1`;
  } catch (err) {
    if (pgCode(err) === '55P03')
      throw new ApiError(
        'idempotency_key_in_use',
        'Another request with this Idempotency-Key is still being processed; retry shortly to receive its response.',
        undefined,
        [['Retry-After', '1']],
      );
    throw err;
  }
  await tx.unsafe('SET LOCAL lock_timeout = 0');
  if (claimed.length === 0) {
    const [prev] = await tx<
      {
        request_hash: Buffer;
        status: number;
        response: Buffer | null;
        response_headers: Array<[string, string]> | null;
      }[]
    >`SELECT request_hash, status, response, response_headers FROM idempotency_keys
      WHERE ${inTenant(tenantId)} AND scope = ${claim.scope} AND key = ${claim.key}`;
    if (!Buffer.from(prev.request_hash).equals(claim.hash))
      throw new ApiError(
        'idempotency_key_reused',
        'This Idempotency-Key was used in the last 24 hours with a different request body; use a new key for a ' +
          'different request.',
      );
    if (prev.response === null)
      throw new ApiError(
        'idempotency_key_reused',
        'This Idempotency-Key was used in the last 24 hours by another endpoint; use a new key.',
      );
    return {
      replayed: true,
      answer: { status: prev.status, body: Buffer.from(prev.response), headers: prev.response_headers ?? [] },
    };
  }
  const answer = await work();
  await tx`
    UPDATE idempotency_keys SET status = ${answer.status}, body = ${answer.body.toString('utf8')}::text::jsonb,
      response = ${answer.body}, response_headers = ${JSON.stringify(answer.headers)}::text::jsonb
    WHERE ${inTenant(tenantId)} AND scope = ${claim.scope} AND key = ${claim.key}`;
  return { replayed: false, answer };
}

/** Forgets keys older than 24 hours (a housekeeping job). */
export async function purgeIdempotencyKeys(sql: Sql): Promise<number> {
  const r = await sql`DELETE FROM idempotency_keys WHERE created_at < now() - interval '24 hours'`;
  return r.count;
}
