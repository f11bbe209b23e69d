import { inTenant, type Sql } from '../../lib/pg.js';
import { type DefinitionRow, definitionOfRow, type MetricDefinition } from '../../schemas/core/metrics.js';

/**
 * Which customers each active metric of a workspace is materialized for, from its consumers:
 * - an objective: that objective's customer (live customers only);
 * - a health driver, or a metric_threshold trigger of an enabled playbook: every live customer.
 * A metric without a consumer is not materialized on schedule.
 */

export interface MetricToRun {
  id: string;
  definition: MetricDefinition;
  /** 'all': every live customer of the workspace. */
  customers: 'all' | string[];
}

interface Row extends DefinitionRow {
  id: string;
  status: 'active' | 'deleted';
  driver: boolean;
  objective_customers: string[] | null;
}

/**
 * Metrics the workspace's enabled playbooks read: metric_threshold triggers and `metric.<slug>`
 * references of conditions, resolved into playbooks.metric_ids when the playbook is saved. They
 * are materialized for every customer, like health drivers.
 */
export async function playbookTriggerMetrics(sql: Sql, tenantId: string): Promise<Set<string>> {
  const rows = await sql<Array<{ id: string }>>`
    SELECT DISTINCT m.id::text AS id FROM playbooks p, unnest(p.metric_ids) AS m (id)
    WHERE ${inTenant(tenantId, 'p')} AND p.enabled`;
  return new Set(rows.map((r) => r.id));
}

async function metricRows(sql: Sql, tenantId: string, only?: string): Promise<Row[]> {
  return sql<Row[]>`
    SELECT m.id::text, m.source_event, m.calculation, m.target_property, m.filter, m.window_def, m.grain, m.status,
      EXISTS (SELECT 1 FROM health_models hm, jsonb_array_elements(hm.model->'drivers') d
              WHERE hm.tenant_id = m.tenant_id AND jsonb_typeof(hm.model->'drivers') = 'array'
                AND d->>'metric_id' = m.id::text) AS driver,
      (SELECT array_agg(DISTINCT o.customer_id::text) FROM objectives o
       JOIN customers c ON c.id = o.customer_id AND c.deleted_at IS NULL
       WHERE o.tenant_id = m.tenant_id AND o.metric_id = m.id) AS objective_customers
    FROM metrics m
    WHERE ${inTenant(tenantId, 'm')} ${only ? sql`AND m.id = ${only}` : sql`AND m.status = 'active'`}`;
}

/** The workspace's active metrics that have at least one consumer, with the customers they need. */
export async function metricsInUse(sql: Sql, tenantId: string): Promise<MetricToRun[]> {
  const [rows, triggers] = await Promise.all([metricRows(sql, tenantId), playbookTriggerMetrics(sql, tenantId)]);
  const out: MetricToRun[] = [];
  for (const r of rows) {
    const all = r.driver || triggers.has(r.id);
    if (!all && !r.objective_customers?.length) continue;
    out.push({ id: r.id, definition: definitionOfRow(r), customers: all ? 'all' : r.objective_customers! });
  }
  return out;
}

export type OneMetric = { found: false } | { found: true; deleted: boolean; metric: MetricToRun };

/**
 * One metric for a run now: the customers its consumers need, or every live customer when it has
 * none (whoever asks wants to see values).
 */
export async function metricForNow(sql: Sql, tenantId: string, metricId: string): Promise<OneMetric> {
  const [[r], triggers] = await Promise.all([
    metricRows(sql, tenantId, metricId),
    playbookTriggerMetrics(sql, tenantId),
  ]);
  if (!r) return { found: false };
  const some = !(r.driver || triggers.has(r.id)) && r.objective_customers?.length;
  return {
    found: true,
    deleted: r.status === 'deleted',
    metric: { id: r.id, definition: definitionOfRow(r), customers: some ? r.objective_customers! : 'all' },
  };
}

/** Ids of the workspace's live customers, in one value rather than a row each. */
export async function liveCustomers(sql: Sql, tenantId: string): Promise<string[]> {
  const [row] = await sql<Array<{ ids: string | null }>>`
    SELECT string_agg(id::text, ',') AS ids FROM customers WHERE ${inTenant(tenantId)} AND deleted_at IS NULL`;
  return row?.ids ? row.ids.split(',') : [];
}
