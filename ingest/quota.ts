import type { Sql } from '../lib/pg.js';
import { PlanCache } from '../lib/plans.js';
import type { Decision, SharedRateLimiter } from '../lib/rate-limit.js';

export const DAY_MS = 24 * 3600_000;

/** Events per UTC day by plan; a plan missing here (enterprise) is unlimited. */
export type DailyQuotas = Partial<Record<string, number>>;

/**
 * The daily event volume of SPEC.md "Limits", shared by both ingestion surfaces and every ingest
 * process: one SharedRateLimiter bucket per workspace whose window is the UTC day and whose cost
 * is the number of events stored. Unlimited plans never touch the counter.
 */
export class DailyQuota {
  private plans: PlanCache;

  constructor(
    sql: Sql,
    private readonly limiter: SharedRateLimiter,
    private readonly quotas: DailyQuotas,
  ) {
    this.plans = new PlanCache(sql);
  }

  /** The workspace's plan (surface B knows only the tenant from its credential). */
  planOf(tenantId: string): Promise<string> {
    return this.plans.planOf(tenantId);
  }

  /** `null` when the plan is unlimited or nothing is charged. */
  take(tenantId: string, plan: string, events: number): Promise<Decision> | null {
    const limit = this.quotas[plan];
    if (limit === undefined || events <= 0) return null;
    return this.limiter.take(tenantId, 'events_daily', limit, DAY_MS, events);
  }
}

/** Parses `starter=1000000,growth=10000000,…`; `unlimited` (or a missing plan) means no quota. */
export function parseQuotas(text: string): DailyQuotas {
  const out: DailyQuotas = {};
  for (const part of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^([a-z_]+)=(\d+|unlimited)$/.exec(part);
    if (!m) throw new Error(`"${part}" is not plan=number or plan=unlimited`);
    if (m[2] !== 'unlimited') out[m[1]] = Number(m[2]);
  }
  return out;
}
