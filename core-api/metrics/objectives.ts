import { inTenant, type Sql } from '../../lib/pg.js';
import { IdParams } from '../../schemas/core/common.js';
import { Objective, ObjectiveCreate, ObjectiveList } from '../../schemas/core/metrics.js';
import type { ClickHouseReader } from '../clickhouse.js';
import { json, noContent, type Ctx, type Reply } from '../http/context.js';
import { invalid, notFound } from '../../lib/problem.js';
import type { Route } from '../http/router.js';
import { storedValues } from './values.js';

/**
 * Objectives: a target for one customer on one customer-grain metric. `current_value` is the
 * metric's latest materialized value for the customer (the materializer computes a metric for the
 * customers of its objectives), `progress` = current_value / target_value. Reading needs
 * customers:read, writing customers:write (an objective belongs to its customer).
 */

interface Row {
  id: string;
  customer_id: string;
  metric_id: string;
  name: string;
  target_value: number;
  due_date: string | null;
  created_at: Date;
}

const COLUMNS = 'id::text, customer_id::text, metric_id::text, name, target_value, due_date::text, created_at';

async function customerExists(sql: Sql, tenantId: string, id: string): Promise<boolean> {
  const rows = await sql`SELECT 1 FROM customers WHERE ${inTenant(tenantId)} AND id = ${id} AND deleted_at IS NULL`;
  return rows.length > 0;
}

type Latest = Map<string, { value: number | null; computed_at: string }>;

/** The latest materialized value of each (metric, customer) pair, keyed `metric/customer`. */
async function latestValues(ch: ClickHouseReader, tenantId: string, pairs: Row[]): Promise<Latest> {
  if (!pairs.length) return new Map();
  const latest = await storedValues(
    ch,
    {
      tenantId,
      metricIds: [...new Set(pairs.map((r) => r.metric_id))],
      customerIds: [...new Set(pairs.map((r) => r.customer_id))],
      limit: 10_000,
    },
    true,
  );
  return new Map(latest.map((v) => [`${v.metric_id}/${v.customer_id}`, v]));
}

function toObjective(r: Row, latest: Latest) {
  const v = latest.get(`${r.metric_id}/${r.customer_id}`);
  const value = v?.value ?? null;
  return {
    id: r.id,
    customer_id: r.customer_id,
    metric_id: r.metric_id,
    name: r.name,
    target_value: r.target_value,
    due_date: r.due_date,
    created_at: r.created_at.toISOString(),
    current_value: value,
    value_computed_at: v?.computed_at ?? null,
    progress: value === null || r.target_value === 0 ? null : Math.round((value / r.target_value) * 10_000) / 10_000,
  };
}

export function objectiveRoutes(sql: Sql, ch: ClickHouseReader): Route[] {
  async function create(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const b = c.body as ObjectiveCreate;
    const metricId = b.metric_id.toLowerCase();
    // Read before anything is stored: a ClickHouse outage answers 503 without a half-made objective.
    const latest = await latestValues(ch, tenantId, [{ metric_id: metricId, customer_id: c.params.id } as Row]);
    const row = await sql.begin(async (tx) => {
      const t = tx as unknown as Sql;
      if (!(await customerExists(t, tenantId, c.params.id))) throw notFound('Customer');
      // A share lock: DELETE /v1/metrics/{id} counts consumers under an update lock of this row.
      const [m] = await t<Array<{ status: string; grain: string }>>`
        SELECT status, grain FROM metrics WHERE ${c.tenant} AND id = ${metricId} FOR SHARE`;
      if (!m || m.status === 'deleted')
        throw invalid([
          {
            field: 'metric_id',
            code: m ? 'metric_deleted' : 'not_found',
            message: m ? 'the metric is deleted' : 'no metric with this id in the workspace',
          },
        ]);
      if (m.grain !== 'customer')
        throw invalid([
          { field: 'metric_id', code: 'invalid_grain', message: 'an objective needs a customer-grain metric' },
        ]);
      const [r] = await t<Row[]>`
        INSERT INTO objectives (tenant_id, customer_id, metric_id, name, target_value, due_date)
        VALUES (${tenantId}, ${c.params.id}, ${metricId}, ${b.name.trim()}, ${b.target_value}, ${b.due_date ?? null})
        RETURNING ${t.unsafe(COLUMNS)}`;
      return r;
    });
    return json(201, toObjective(row, latest));
  }

  async function list(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    if (!(await customerExists(sql, tenantId, c.params.id))) throw notFound('Customer');
    const rows = await sql<Row[]>`
      SELECT ${sql.unsafe(COLUMNS)} FROM objectives
      WHERE ${c.tenant} AND customer_id = ${c.params.id} ORDER BY created_at, id`;
    const latest = await latestValues(ch, tenantId, rows);
    return json(200, { data: rows.map((r) => toObjective(r, latest)) });
  }

  async function remove(c: Ctx): Promise<Reply> {
    const rows = await sql`
      DELETE FROM objectives o USING customers c
      WHERE ${inTenant(c.principal.tenantId, 'o')} AND o.id = ${c.params.id}
        AND c.id = o.customer_id AND c.deleted_at IS NULL
      RETURNING 1`;
    if (!rows.length) throw notFound('Objective');
    return noContent();
  }

  const common = { tag: 'Customers', auth: 'bearer' as const, params: IdParams };
  return [
    {
      ...common,
      method: 'POST',
      path: '/v1/customers/{id}/objectives',
      summary: "Set an objective on a customer's metric",
      description: [
        '`metric_id`: an active customer-grain metric of the workspace (otherwise 400 naming `metric_id`:',
        '`not_found`, `metric_deleted`, `invalid_grain`). The metric is then materialized for this customer every',
        'hour, and cannot be deleted while the objective exists. `current_value` is its latest materialized value',
        '(null until the first run; POST /v1/metrics/{id}/materialize runs it now), `progress` = current_value /',
        'target_value (null without a value or with a 0 target).',
      ].join(' '),
      scope: 'customers:write',
      body: ObjectiveCreate,
      bodyExample: {
        name: 'Export 50 reports a month',
        metric_id: '0192f0c4-8a55-7b3e-9d1c-4f1d2a3b4c5d',
        target_value: 50,
      },
      handler: create,
      errors: [404, 413, 415],
      responses: { 201: { description: 'The objective.', schema: Objective } },
    },
    {
      ...common,
      method: 'GET',
      path: '/v1/customers/{id}/objectives',
      summary: "A customer's objectives with their current value and progress",
      description: 'Oldest first, all of them (not paginated).',
      scope: 'customers:read',
      handler: list,
      errors: [404],
      responses: { 200: { description: 'The objectives.', schema: ObjectiveList } },
    },
    {
      ...common,
      method: 'DELETE',
      path: '/v1/objectives/{id}',
      summary: 'Remove an objective',
      description: 'Its metric stops being materialized for the customer unless something else uses it.',
      scope: 'customers:write',
      handler: remove,
      errors: [404],
      responses: { 204: { description: 'Removed.' } },
    },
  ] satisfies Route[];
}
