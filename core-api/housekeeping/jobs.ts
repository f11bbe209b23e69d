import { purgeIdempotencyKeys } from '../../lib/idempotency.js';
import type { Sql } from '../../lib/pg.js';

/** A global upkeep job: deletes what has outlived its retention and says how many rows went. */
export interface HousekeepingJob {
  /** Its name in job_leases. */
  name: string;
  run(sql: Sql): Promise<number>;
}

/**
 * Soft-deleted customers are recoverable for 30 days (POST …/restore), then gone for good: each
 * purged customer's erasure is queued in the same statement (docs/erasure.md).
 */
export const purgeDeletedCustomers: HousekeepingJob = {
  name: 'housekeeping.customers',
  async run(sql) {
    const [r] = await sql<[{ n: number }]>`
      SELECT remove_customers(array_agg(id), 'trash_purge') AS n
      FROM customers WHERE deleted_at < now() - interval '30 days'`;
    return r.n;
  },
};

/** Idempotency keys are replayed for 24 hours (lib/idempotency.ts). */
export const purgeIdempotency: HousekeepingJob = {
  name: 'housekeeping.idempotency_keys',
  run: purgeIdempotencyKeys,
};

/** Authorization codes live minutes; a day later nobody can still be exchanging one. */
export const purgeOAuthCodes: HousekeepingJob = {
  name: 'housekeeping.oauth_codes',
  async run(sql) {
    return (await sql`DELETE FROM oauth_codes WHERE expires_at < now() - interval '1 day'`).count;
  },
};

export const HOUSEKEEPING_JOBS: readonly HousekeepingJob[] = [purgeDeletedCustomers, purgeIdempotency, purgeOAuthCodes];
