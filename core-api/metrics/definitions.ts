import { definitionErrors, slugify } from '../../lib/metrics/validate.js';
import type { Sql } from '../../lib/pg.js';
import { IdParams } from '../../schemas/core/common.js';
import {
  definitionOfRow,
  Metric,
  MetricCreate,
  MetricListQuery,
  MetricPatch,
  type MetricDefinition,
} from '../../schemas/core/metrics.js';
import { Page } from '../../schemas/core/common.js';
import { compileBody } from '../../schemas/core/validate.js';
import { isUniqueViolation } from '../deps.js';
import { json, noContent, type Ctx, type Reply } from '../http/context.js';
import { decodeCursor, page } from '../../lib/cursor.js';
import { ApiError, fieldErrors, invalid, notFound, type FieldError } from '../../lib/problem.js';
import type { Route } from '../http/router.js';
import {
  catalogHas,
  consumerList,
  consumers,
  getMetric,
  insertMetric,
  inUse,
  listMetrics,
  patchMetric,
  softDeleteMetric,
  type Consumers,
  type MetricRow,
  type NewMetric,
} from './repo.js';

const MUTABLE = new Set(['name', 'description', 'unit']);
const createValidator = compileBody(MetricCreate);

export const toMetric = (r: MetricRow, c: Consumers) => ({
  id: r.id,
  slug: r.slug,
  name: r.name,
  description: r.description,
  ...definitionOfRow(r),
  unit: r.unit,
  status: r.status,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
  consumers: c,
});

/** The definition part of a create body, as the compiler reads it. */
export const definitionOf = (b: MetricDefinition): MetricDefinition => ({
  source_event: b.source_event,
  calculation: b.calculation,
  target_property: b.target_property ?? null,
  filter: b.filter ?? [],
  window: b.window,
  grain: b.grain,
});

const prefixed = (errors: FieldError[], prefix: string): FieldError[] =>
  prefix ? errors.map((e) => ({ ...e, field: `${prefix}.${e.field}`, message: `${prefix}.${e.message}` })) : errors;

/** 422 unknown_event naming the field. */
export const unknownEvent = (name: string, field = 'source_event') =>
  new ApiError('unknown_event', `The event ${JSON.stringify(name)} is not in the workspace's event catalog.`, [
    {
      field,
      code: 'unknown_event',
      message: `${field} must be an event name of the catalog (GET /v1/event-catalog)`,
    },
  ]);

/**
 * The rules after the body's schema: the semantic ones (400, every error at once), then the
 * catalog (422 unknown_event). `prefix` names the definition's place in the body.
 */
export async function checkDefinition(sql: Sql, tenantId: string, def: MetricDefinition, prefix = ''): Promise<void> {
  const errors = definitionErrors(def);
  if (errors.length) throw invalid(prefixed(errors, prefix));
  if (!(await catalogHas(sql, tenantId, def.source_event)))
    throw unknownEvent(def.source_event, prefix ? `${prefix}.source_event` : 'source_event');
}

/** Schema, rules and catalog errors of a would-be create body, without throwing (proposals). */
export async function createBodyErrors(sql: Sql, tenantId: string, body: unknown): Promise<FieldError[]> {
  if (!createValidator(body)) return fieldErrors(createValidator.errors);
  const def = body as MetricDefinition;
  const errors = definitionErrors(def);
  if (errors.length) return errors;
  if (!(await catalogHas(sql, tenantId, def.source_event))) return unknownEvent(def.source_event).errors ?? [];
  return [];
}

/** Validates a body already checked against MetricCreate and stores it: what POST /v1/metrics does. */
export async function createMetric(sql: Sql, tenantId: string, b: MetricCreate): Promise<MetricRow> {
  await checkDefinition(sql, tenantId, b);
  const m: NewMetric = {
    ...definitionOf(b),
    slug: b.slug ?? slugify(b.name),
    name: b.name.trim(),
    description: b.description ?? null,
    unit: b.unit ?? null,
  };
  try {
    return await insertMetric(sql, tenantId, m);
  } catch (err) {
    if (isUniqueViolation(err))
      throw new ApiError('slug_taken', `A metric with the slug ${m.slug} exists in this workspace.`, [
        {
          field: 'slug',
          code: 'slug_taken',
          message: `slug ${m.slug} is taken${b.slug ? '' : ' (generated from name)'}; send another slug`,
        },
      ]);
    throw err;
  }
}

export async function withConsumers(sql: Sql, tenantId: string, r: MetricRow) {
  const c = await consumers(sql, tenantId, [r.id]);
  return toMetric(r, c.get(r.id)!);
}

export function definitionRoutes(sql: Sql): Route[] {
  async function create(c: Ctx): Promise<Reply> {
    const row = await createMetric(sql, c.principal.tenantId, c.body as MetricCreate);
    return json(201, await withConsumers(sql, c.principal.tenantId, row));
  }

  async function list(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const limit = c.query.limit ?? 50;
    const rows = await listMetrics(sql, tenantId, {
      includeDeleted: c.query.include_deleted === true,
      after: decodeCursor(c.query.cursor),
      limit,
    });
    const counts = await consumers(
      sql,
      tenantId,
      rows.map((r) => r.id),
    );
    return json(
      200,
      page(rows, limit, (r) => toMetric(r, counts.get(r.id)!)),
    );
  }

  async function get(c: Ctx): Promise<Reply> {
    const row = await getMetric(sql, c.principal.tenantId, c.params.id);
    if (!row) throw notFound('Metric');
    return json(200, await withConsumers(sql, c.principal.tenantId, row));
  }

  async function patch(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const fixed = Object.keys(c.body as object).filter((k) => !MUTABLE.has(k));
    if (fixed.length)
      throw new ApiError(
        'immutable_field',
        `Only name, description and unit can change after creation; not ${fixed.join(', ')}.`,
        fixed.map((f) => ({ field: f, code: 'immutable_field', message: `${f} is fixed after creation` })),
      );
    const existing = await getMetric(sql, tenantId, c.params.id);
    if (!existing) throw notFound('Metric');
    if (existing.status === 'deleted')
      throw new ApiError('conflict', 'The metric is deleted and can no longer change.');
    const body = c.body as { name?: string; description?: string | null; unit?: string | null };
    const row = await patchMetric(sql, tenantId, c.params.id, { ...body, name: body.name?.trim() });
    if (!row) throw new ApiError('conflict', 'The metric is deleted and can no longer change.');
    return json(200, await withConsumers(sql, tenantId, row));
  }

  /**
   * The metric's row is locked while its consumers are counted, and a new objective or driver
   * takes a share lock on it: a consumer added concurrently either commits first (and is counted)
   * or sees the metric deleted.
   */
  async function remove(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const out = await sql.begin(async (tx) => {
      const t = tx as unknown as Sql;
      const [row] = await t<Array<{ status: string }>>`
        SELECT status FROM metrics WHERE ${c.tenant} AND id = ${c.params.id} FOR UPDATE`;
      if (!row) return { missing: true as const };
      if (row.status === 'deleted') return { deleted: true as const };
      const used = (await consumers(t, tenantId, [c.params.id])).get(c.params.id)!;
      if (inUse(used)) return { used, list: await consumerList(t, tenantId, c.params.id) };
      await softDeleteMetric(t, tenantId, c.params.id);
      return { deleted: true as const };
    });
    if ('missing' in out) throw notFound('Metric');
    if ('used' in out)
      throw new ApiError(
        'metric_in_use',
        'The metric is in use; remove its objectives, health drivers and playbook triggers first.',
        undefined,
        [],
        { consumers: out.used, used_by: out.list },
      );
    return noContent();
  }

  const common = { tag: 'Metrics', auth: 'bearer' as const };
  const write = { ...common, scope: 'metrics:write' as const, role: 'admin' as const };
  const example = {
    name: 'Reports exported',
    source_event: 'report_exported',
    calculation: 'count',
    filter: [{ field: 'properties.format', op: 'in', value: ['pdf', 'csv'] }],
    window: { type: 'rolling', days: 30 },
    grain: 'customer',
    unit: 'reports',
  };
  return [
    {
      ...common,
      method: 'GET',
      path: '/v1/metrics',
      summary: 'List metric definitions',
      description: 'Oldest first, cursor-paginated. Deleted metrics are left out unless `include_deleted=true`.',
      scope: 'metrics:read',
      query: MetricListQuery,
      handler: list,
      responses: { 200: { description: 'A page of metrics.', schema: Page(Metric) } },
    },
    {
      ...write,
      method: 'POST',
      path: '/v1/metrics',
      summary: 'Define a metric (admin)',
      description: [
        'Rules, each a problem+json whose `errors[]` names the field: schema errors (an unknown calculation or',
        'filter op, a bad window, a missing field) and `target_property` missing for sum, avg, max,',
        'distinct_count (`required`), a filter field that is neither `properties.<name>` nor user_id,',
        'product_id, product_code, external_source (`invalid_field`), `in` without an array → 400;',
        '`source_event` outside the event catalog → 422 `unknown_event`; a slug in use → 409 `slug_taken`.',
        '`slug` defaults to the name in lower case with `_` between words. See docs/metrics.md.',
      ].join(' '),
      body: MetricCreate,
      bodyExample: example,
      handler: create,
      errors: [409, 413, 415, 422],
      responses: { 201: { description: 'The metric.', schema: Metric } },
    },
    {
      ...common,
      method: 'GET',
      path: '/v1/metrics/{id}',
      summary: 'A metric definition (deleted ones too, with status deleted)',
      scope: 'metrics:read',
      params: IdParams,
      handler: get,
      errors: [404],
      responses: { 200: { description: 'The metric.', schema: Metric } },
    },
    {
      ...write,
      method: 'PATCH',
      path: '/v1/metrics/{id}',
      summary: 'Rename or redescribe a metric (admin)',
      description:
        'Accepts `name`, `description` and `unit`; any other field → 422 `immutable_field` naming it. ' +
        'A deleted metric → 409 `conflict`.',
      params: IdParams,
      body: MetricPatch,
      bodyExample: { name: 'Reports exported (30 days)', unit: 'reports' },
      handler: patch,
      errors: [404, 409, 413, 415, 422],
      responses: { 200: { description: 'The metric.', schema: Metric } },
    },
    {
      ...write,
      method: 'DELETE',
      path: '/v1/metrics/{id}',
      summary: 'Delete a metric (admin)',
      description:
        'Soft delete: status `deleted`, hidden from the default list, never materialized again, values kept. ' +
        'While an objective, health driver or playbook trigger uses it: 409 `metric_in_use` with `consumers` ' +
        '(counts) and `used_by` (`[{type, id, customer_id, name}]`: each objective, each driver as `metric:<slug>`, ' +
        'each enabled playbook by its name). ' +
        'Deleting a deleted metric answers 204 again.',
      params: IdParams,
      handler: remove,
      errors: [404, 409],
      responses: { 204: { description: 'Deleted.' } },
    },
  ] satisfies Route[];
}
