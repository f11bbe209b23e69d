import { decodeCursor, page } from '../../lib/cursor.js';
import type { Sql } from '../../lib/pg.js';
import { notFound } from '../../lib/problem.js';
import { Page } from '../../schemas/core/common.js';
import { Erasure, ErasureListQuery, ErasureParams } from '../../schemas/core/erasures.js';
import type { Deps } from '../deps.js';
import { type Ctx, json, type Reply } from '../http/context.js';
import type { Route } from '../http/router.js';

interface ErasureRow {
  id: string;
  reason: string;
  status: string;
  requested_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  clickhouse_rows: Record<string, number>;
  postgres_rows: Record<string, number>;
  cursor_ts: string;
}

// Only ids, times and counts: the record outlives the customer and must hold none of its personal data.
const COLUMNS = `customer_id::text AS id, reason, status, requested_at, started_at, completed_at, clickhouse_rows,
  postgres_rows, requested_at::text AS cursor_ts`;

const counts = (tables: Record<string, number>) => ({
  total: Object.values(tables).reduce((n, v) => n + v, 0),
  tables,
});

const toErasure = (r: ErasureRow) => ({
  customer_id: r.id,
  reason: r.reason,
  status: r.status,
  requested_at: r.requested_at.toISOString(),
  started_at: r.started_at?.toISOString() ?? null,
  completed_at: r.completed_at?.toISOString() ?? null,
  rows_removed: { clickhouse: counts(r.clickhouse_rows), postgres: counts(r.postgres_rows) },
});

/** Erasures are queued by permanent deletes and purges and carried out by the processors (processors/erasure/). */
export function erasureRoutes(d: Deps): Route[] {
  const sql: Sql = d.sql;
  const none = sql``;

  async function list(c: Ctx): Promise<Reply> {
    const q = c.query;
    const limit = q.limit ?? 50;
    const after = decodeCursor(q.cursor);
    const rows = await sql<ErasureRow[]>`
      SELECT ${sql.unsafe(COLUMNS)} FROM erasures WHERE ${c.tenant}
        ${q.status ? sql`AND status = ANY(${q.status.split(',')}::text[])` : none}
        ${after ? sql`AND (requested_at, customer_id) < (${after.t}::text::timestamptz, ${after.id}::uuid)` : none}
      ORDER BY requested_at DESC, customer_id DESC LIMIT ${limit + 1}`;
    return json(200, page(rows, limit, toErasure));
  }

  async function get(c: Ctx): Promise<Reply> {
    const [row] = await sql<ErasureRow[]>`
      SELECT ${sql.unsafe(COLUMNS)} FROM erasures WHERE ${c.tenant} AND customer_id = ${c.params.customer_id}`;
    if (!row) throw notFound('Erasure');
    return json(200, toErasure(row));
  }

  const common = {
    tag: 'Customers',
    auth: 'bearer' as const,
    scope: 'customers:read' as const,
    role: 'admin' as const,
  };
  return [
    {
      ...common,
      method: 'GET',
      path: '/v1/erasures',
      summary: 'Erasures of permanently removed customers (admin)',
      description:
        'Newest first, cursor-paginated; filter `status` (comma-separated). One record per customer removed ' +
        'with `hard=true` or purged from the trash: `queued`, `running`, then `completed` once no row of the ' +
        'customer is left in ClickHouse or PostgreSQL, with the rows removed per store and table. Records hold ' +
        'no name, domain or external id. docs/erasure.md.',
      query: ErasureListQuery,
      handler: list,
      responses: { 200: { description: 'A page of erasures.', schema: Page(Erasure) } },
    },
    {
      ...common,
      method: 'GET',
      path: '/v1/erasures/{customer_id}',
      summary: "One customer's erasure (admin)",
      description: '404 for a customer of another workspace or one never removed for good.',
      params: ErasureParams,
      handler: get,
      errors: [404],
      responses: { 200: { description: 'The erasure record.', schema: Erasure } },
    },
  ] satisfies Route[];
}
