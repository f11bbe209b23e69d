import type { DataCipher } from '../../lib/credentials/data-cipher.js';
import { rotateSecrets } from '../../lib/credentials/stored-secrets.js';
import { purgeIdempotencyKeys } from '../../lib/idempotency.js';
import type { Logger } from '../../lib/logger.js';
import type { Sql } from '../../lib/pg.js';

/** A global upkeep job: deletes or rewrites what is due and says how many rows it changed. */
export interface HousekeepingJob {
  /** Its name in job_leases. */
  name: string;
  run(sql: Sql, signal?: AbortSignal): Promise<number>;
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

/**
 * Secrets an older version left in clear (webhook signing secrets stored before secrets were
 * encrypted) or in the first format (`v1.` provider tokens), rewritten under the current data key
 * (lib/credentials/stored-secrets.ts, pass `legacy`). Every start of core-api runs it at once, in
 * the background; as a housekeeping job it runs again every interval, for what a previous version
 * still serving beside this one (a rolling upgrade) wrote in clear meanwhile. Each batch commits on
 * its own, so a process stopped halfway leaves the rest to the next run; readers open both forms,
 * so no delivery or provider call waits for it.
 */
export function encryptLegacySecrets(cipher: DataCipher, log: Logger): HousekeepingJob {
  return {
    name: 'housekeeping.legacy_secrets',
    async run(sql, signal) {
      const report = await rotateSecrets(sql, cipher, (line) => log.debug(line), { pass: 'legacy', signal });
      for (const [column, n] of Object.entries(report.unreadable))
        log.error({ column, values: n }, 'stored secrets no configured data key opens: left as they are');
      return Object.values(report.rewritten).reduce((a, b) => a + b, 0);
    },
  };
}
