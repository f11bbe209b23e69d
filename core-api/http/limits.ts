import type { Sql } from '../../lib/pg.js';
import { PlanCache } from '../../lib/plans.js';
import type { Decision, SharedRateLimiter } from '../../lib/rate-limit.js';
import type { Bucket } from './router.js';

export interface PlanLimits {
  reads_per_min: number;
  writes_per_min: number;
  bulk_imports_per_hour: number;
}

const WINDOW: Record<Bucket, number> = { read: 60_000, write: 60_000, bulk: 3600_000 };
const FIELD: Record<Bucket, keyof PlanLimits> = {
  read: 'reads_per_min',
  write: 'writes_per_min',
  bulk: 'bulk_imports_per_hour',
};

/**
 * Per-workspace limits by plan, counted in PostgreSQL through SharedRateLimiter so they hold across
 * every core-api process. The workspace's plan is cached for a minute.
 */
export class Limits {
  private plans: PlanCache;

  constructor(
    sql: Sql,
    private readonly limiter: SharedRateLimiter,
    private readonly defaults: PlanLimits,
    private readonly perPlan: Record<string, Partial<PlanLimits>>,
  ) {
    this.plans = new PlanCache(sql);
  }

  async limitFor(tenantId: string, bucket: Bucket): Promise<number> {
    const plan = await this.plans.planOf(tenantId);
    return this.perPlan[plan]?.[FIELD[bucket]] ?? this.defaults[FIELD[bucket]];
  }

  async take(tenantId: string, bucket: Bucket): Promise<Decision> {
    return this.limiter.take(tenantId, `api_${bucket}`, await this.limitFor(tenantId, bucket), WINDOW[bucket]);
  }
}

export const rateHeaders = (d: Decision): Array<[string, string]> => [
  ['X-RateLimit-Limit', String(d.limit)],
  ['X-RateLimit-Remaining', String(d.remaining)],
  ['X-RateLimit-Reset', String(d.resetAt)],
];
