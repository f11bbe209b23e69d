import type { Sql } from './pg.js';

const PLAN_TTL_MS = 60_000;

/**
 * A workspace's plan (which sets its limits), cached for a minute: a plan change takes effect
 * within a minute in every process, without a database round trip per request.
 */
export class PlanCache {
  private plans = new Map<string, { plan: string; at: number }>();

  constructor(private readonly sql: Sql) {}

  async planOf(tenantId: string): Promise<string> {
    const hit = this.plans.get(tenantId);
    if (hit && Date.now() - hit.at < PLAN_TTL_MS) return hit.plan;
    const [row] = await this.sql<{ plan: string }[]>`SELECT plan FROM tenants WHERE id = ${tenantId}`;
    const plan = row?.plan ?? 'starter';
    if (this.plans.size > 100_000) this.plans.clear();
    this.plans.set(tenantId, { plan, at: Date.now() });
    return plan;
  }
}
