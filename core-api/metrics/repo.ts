import { inTenant, type Sql } from '../../lib/pg.js';
import type { DefinitionRow, MetricDefinition, MetricFilter } from '../../schemas/core/metrics.js';
import type { Position } from '../../lib/cursor.js';

/** SQL of the metrics library (PostgreSQL). Every query is scoped by tenant_id. */

export interface MetricRow extends DefinitionRow {
  id: string;
  slug: string;
  name: string;
  description: string | null;
  target_property: string | null;
  filter: MetricFilter[];
  unit: string | null;
  status: 'active' | 'deleted';
  created_at: Date;
  updated_at: Date;
  cursor_ts: string;
}

export interface Consumers {
  objectives: number;
  health_drivers: number;
  playbook_triggers: number;
}

const COLUMNS = `id::text, slug, name, description, source_event, calculation, target_property, filter, window_def,
  grain, unit, status, created_at, updated_at, created_at::text AS cursor_ts`;

export interface NewMetric extends MetricDefinition {
  slug: string;
  name: string;
  description?: string | null;
  unit?: string | null;
}

export async function insertMetric(sql: Sql, tenantId: string, m: NewMetric): Promise<MetricRow> {
  const [row] = await sql<MetricRow[]>`
    INSERT INTO metrics (tenant_id, slug, name, description, source_event, calculation, target_property, filter,
      window_def, grain, unit)
    VALUES (${tenantId}, ${m.slug}, ${m.name}, ${m.description ?? null}, ${m.source_event}, ${m.calculation},
      ${m.target_property ?? null}, ${JSON.stringify(m.filter ?? [])}::text::jsonb,
      ${JSON.stringify(m.window)}::text::jsonb, ${m.grain}, ${m.unit ?? null})
    RETURNING ${sql.unsafe(COLUMNS)}`;
  return row;
}

export async function getMetric(sql: Sql, tenantId: string, id: string): Promise<MetricRow | undefined> {
  const [row] = await sql<MetricRow[]>`
    SELECT ${sql.unsafe(COLUMNS)} FROM metrics WHERE ${inTenant(tenantId)} AND id = ${id}`;
  return row;
}

/** Oldest first, keyset on (created_at, id). */
export async function listMetrics(
  sql: Sql,
  tenantId: string,
  f: { includeDeleted: boolean; after: Position | null; limit: number },
): Promise<MetricRow[]> {
  return sql<MetricRow[]>`
    SELECT ${sql.unsafe(COLUMNS)} FROM metrics
    WHERE ${inTenant(tenantId)}
      ${f.includeDeleted ? sql`` : sql`AND status = 'active'`}
      ${f.after ? sql`AND (created_at, id) > (${f.after.t}::text::timestamptz, ${f.after.id}::uuid)` : sql``}
    ORDER BY created_at, id LIMIT ${f.limit + 1}`;
}

export async function patchMetric(
  sql: Sql,
  tenantId: string,
  id: string,
  p: { name?: string; description?: string | null; unit?: string | null },
): Promise<MetricRow | undefined> {
  const [row] = await sql<MetricRow[]>`
    UPDATE metrics SET
      name = ${p.name !== undefined ? sql`${p.name}` : sql`name`},
      description = ${p.description !== undefined ? sql`${p.description}` : sql`description`},
      unit = ${p.unit !== undefined ? sql`${p.unit}` : sql`unit`},
      updated_at = now()
    WHERE ${inTenant(tenantId)} AND id = ${id} AND status = 'active'
    RETURNING ${sql.unsafe(COLUMNS)}`;
  return row;
}

export async function softDeleteMetric(sql: Sql, tenantId: string, id: string): Promise<void> {
  await sql`
    UPDATE metrics SET status = 'deleted', deleted_at = now(), updated_at = now()
    WHERE ${inTenant(tenantId)} AND id = ${id} AND status = 'active'`;
}

/**
 * What uses each metric: objectives of live customers, the workspace's health drivers, and
 * enabled playbooks whose trigger reads it (a metric_threshold trigger or `metric.<slug>` in a
 * condition: playbooks.metric_ids, resolved when the playbook is saved).
 */
export async function consumers(sql: Sql, tenantId: string, ids: string[]): Promise<Map<string, Consumers>> {
  const out = new Map(ids.map((id) => [id, { objectives: 0, health_drivers: 0, playbook_triggers: 0 }]));
  if (!ids.length) return out;
  const rows = await sql<Array<{ id: string; objectives: number; health_drivers: number; playbook_triggers: number }>>`
    SELECT m.id::text,
      (SELECT count(*) FROM objectives o JOIN customers c ON c.id = o.customer_id AND c.deleted_at IS NULL
       WHERE o.tenant_id = m.tenant_id AND o.metric_id = m.id)::int AS objectives,
      (SELECT count(*) FROM health_models hm, jsonb_array_elements(hm.model->'drivers') d
       WHERE hm.tenant_id = m.tenant_id AND jsonb_typeof(hm.model->'drivers') = 'array'
         AND d->>'metric_id' = m.id::text)::int AS health_drivers,
      (SELECT count(*) FROM playbooks p
       WHERE p.tenant_id = m.tenant_id AND p.enabled AND m.id = ANY(p.metric_ids))::int AS playbook_triggers
    FROM metrics m WHERE ${inTenant(tenantId, 'm')} AND m.id = ANY(${ids}::uuid[])`;
  for (const r of rows)
    out.set(r.id, {
      objectives: r.objectives,
      health_drivers: r.health_drivers,
      playbook_triggers: r.playbook_triggers,
    });
  return out;
}

export interface ConsumerRef {
  type: 'objective' | 'health_driver' | 'playbook_trigger';
  id: string | null;
  customer_id: string | null;
  name: string;
}

/** The consumers of one metric by name, for 409 metric_in_use (at most 100). */
export async function consumerList(sql: Sql, tenantId: string, metricId: string): Promise<ConsumerRef[]> {
  return sql<ConsumerRef[]>`
    (SELECT 'objective' AS type, o.id::text AS id, o.customer_id::text AS customer_id, o.name
     FROM objectives o JOIN customers c ON c.id = o.customer_id AND c.deleted_at IS NULL
     WHERE ${inTenant(tenantId, 'o')} AND o.metric_id = ${metricId} ORDER BY o.created_at LIMIT 100)
    UNION ALL
    (SELECT 'health_driver', NULL, NULL, 'metric:' || (d->>'slug')
     FROM health_models hm, jsonb_array_elements(hm.model->'drivers') d
     WHERE ${inTenant(tenantId, 'hm')} AND jsonb_typeof(hm.model->'drivers') = 'array'
       AND d->>'metric_id' = ${metricId}::text)
    UNION ALL
    (SELECT 'playbook_trigger', p.id::text, NULL, p.name FROM playbooks p
     WHERE ${inTenant(tenantId, 'p')} AND p.enabled AND ${metricId}::uuid = ANY(p.metric_ids)
     ORDER BY p.created_at LIMIT 100)`;
}

export const inUse = (c: Consumers): boolean => c.objectives + c.health_drivers + c.playbook_triggers > 0;

export async function catalogHas(sql: Sql, tenantId: string, eventName: string): Promise<boolean> {
  const rows = await sql`SELECT 1 FROM event_catalog WHERE ${inTenant(tenantId)} AND event_name = ${eventName}`;
  return rows.length > 0;
}

/** Live customers of the workspace among `ids`. */
export async function liveCustomers(sql: Sql, tenantId: string, ids: string[]): Promise<Set<string>> {
  if (!ids.length) return new Set();
  const rows = await sql<Array<{ id: string }>>`
    SELECT id::text FROM customers WHERE ${inTenant(tenantId)} AND id = ANY(${ids}::uuid[]) AND deleted_at IS NULL`;
  return new Set(rows.map((r) => r.id));
}
