import { inTenant, type Sql } from '../../lib/pg.js';
import {
  effectiveModel,
  type DimensionScore,
  type HealthDriver,
  type HealthModel,
  type HealthStatus,
} from '../../schemas/health.js';
import { mergeModel, modelErrors, type ModelPatch } from './model.js';
import { invalid, type FieldError } from '../../lib/problem.js';

export interface StoredModel {
  model: HealthModel;
  updated_at: Date | null;
}

export interface HealthRow {
  score: number;
  status: HealthStatus;
  calculated_at: Date;
  dimensions: DimensionScore[];
}

/**
 * A live customer of the workspace with its stored score (null when never scored) and the
 * workspace model (for the breakdown of an unscored customer); undefined when there is no such
 * customer (another workspace's, deleted, or unknown). calculated_at comes from
 * customer_health_current: a scheduled run that found the score unchanged moved it too.
 */
export async function customerHealth(
  sql: Sql,
  tenantId: string,
  customerId: string,
): Promise<{ health: HealthRow | null; model: HealthModel } | undefined> {
  const [row] = await sql<
    Array<{
      score: number | null;
      status: HealthStatus | null;
      calculated_at: Date | null;
      dimensions: DimensionScore[] | null;
      model: Partial<HealthModel> | null;
    }>
  >`
    SELECT h.score, h.status, h.calculated_at, h.dimensions, m.model
    FROM customers c
      LEFT JOIN customer_health_current h ON h.customer_id = c.id
      LEFT JOIN health_models m ON m.tenant_id = c.tenant_id
    WHERE ${inTenant(tenantId, 'c')} AND c.id = ${customerId} AND c.deleted_at IS NULL`;
  if (!row) return undefined;
  const health =
    row.score === null
      ? null
      : { score: row.score, status: row.status!, calculated_at: row.calculated_at!, dimensions: row.dimensions! };
  return { health, model: effectiveModel(row.model) };
}

export type CurrentScore = Omit<HealthRow, 'dimensions'>;

/**
 * A live customer's current score without its breakdown (null when never scored); undefined when
 * there is no such customer. The history reads it as its newest point.
 */
export async function currentScore(
  sql: Sql,
  tenantId: string,
  customerId: string,
): Promise<{ health: CurrentScore | null } | undefined> {
  const [row] = await sql<Array<{ score: number | null; status: HealthStatus | null; calculated_at: Date | null }>>`
    SELECT h.score, h.status, h.calculated_at
    FROM customers c LEFT JOIN customer_health_current h ON h.customer_id = c.id
    WHERE ${inTenant(tenantId, 'c')} AND c.id = ${customerId} AND c.deleted_at IS NULL`;
  if (!row) return undefined;
  return {
    health: row.score === null ? null : { score: row.score, status: row.status!, calculated_at: row.calculated_at! },
  };
}

export async function customerExists(sql: Sql, tenantId: string, customerId: string): Promise<boolean> {
  const rows =
    await sql`SELECT 1 FROM customers WHERE ${inTenant(tenantId)} AND id = ${customerId} AND deleted_at IS NULL`;
  return rows.length > 0;
}

export async function getModel(sql: Sql, tenantId: string): Promise<StoredModel> {
  const [row] = await sql<Array<{ model: Partial<HealthModel>; updated_at: Date }>>`
    SELECT model, updated_at FROM health_models WHERE ${inTenant(tenantId)}`;
  return { model: effectiveModel(row?.model), updated_at: row?.updated_at ?? null };
}

/**
 * Read, merge, validate and write under the row's lock, so two concurrent PATCHes both land
 * (each merges over the other's result) and a rejected one changes nothing.
 */
export async function patchModel(sql: Sql, tenantId: string, patch: ModelPatch): Promise<StoredModel> {
  return sql.begin(async (tx) => {
    await tx`
      INSERT INTO health_models (tenant_id, model) VALUES (${tenantId}, '{}') ON CONFLICT (tenant_id) DO NOTHING`;
    const [row] = await tx<Array<{ model: Partial<HealthModel> }>>`
      SELECT model FROM health_models WHERE ${inTenant(tenantId)} FOR UPDATE`;
    const drivers = patch.drivers ? await resolveDrivers(tx as unknown as Sql, tenantId, patch.drivers) : undefined;
    const merged = mergeModel(effectiveModel(row.model), patch, drivers);
    const errors = modelErrors(merged, patch);
    if (errors.length) throw invalid(errors, 'The health model would be invalid; see errors.');
    const [out] = await tx<Array<{ updated_at: Date }>>`
      UPDATE health_models SET model = ${JSON.stringify(merged)}::text::jsonb, updated_at = now()
      WHERE ${inTenant(tenantId)} RETURNING updated_at`;
    return { model: merged, updated_at: out.updated_at };
  }) as Promise<StoredModel>;
}

/**
 * The drivers of a PATCH against the workspace's metrics: each an active customer-grain metric,
 * at most once; otherwise 400 naming `drivers[i].metric_id`. The metrics' rows are share-locked
 * until the model is written, so DELETE /v1/metrics/{id} (which counts consumers under an update
 * lock) cannot delete one in between.
 */
async function resolveDrivers(
  sql: Sql,
  tenantId: string,
  drivers: NonNullable<ModelPatch['drivers']>,
): Promise<HealthDriver[]> {
  const ids = drivers.map((d) => d.metric_id.toLowerCase());
  const rows = ids.length
    ? await sql<Array<{ id: string; slug: string; unit: string | null; status: string; grain: string }>>`
        SELECT id::text, slug, unit, status, grain FROM metrics
        WHERE ${inTenant(tenantId)} AND id = ANY(${ids}::uuid[]) FOR SHARE`
    : [];
  const byId = new Map(rows.map((r) => [r.id, r]));
  const errors: FieldError[] = [];
  const seen = new Set<string>();
  ids.forEach((id, i) => {
    const field = `drivers[${i}].metric_id`;
    const m = byId.get(id);
    if (!m) errors.push({ field, code: 'not_found', message: `${field}: no metric ${id} in this workspace` });
    else if (m.status !== 'active')
      errors.push({ field, code: 'metric_deleted', message: `${field}: the metric is deleted` });
    else if (m.grain !== 'customer')
      errors.push({ field, code: 'invalid_grain', message: `${field}: a driver needs a customer-grain metric` });
    else if (seen.has(id))
      errors.push({ field, code: 'duplicate', message: `${field}: the metric is already a driver` });
    seen.add(id);
  });
  if (errors.length) throw invalid(errors, 'The health model would be invalid; see errors.');
  return drivers.map((d, i) => {
    const m = byId.get(ids[i])!;
    return { metric_id: m.id, slug: m.slug, unit: m.unit, weight: d.weight, target: d.target, direction: d.direction };
  });
}
