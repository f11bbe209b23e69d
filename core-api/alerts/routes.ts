import { decodeCursor, page } from '../../lib/cursor.js';
import type { Sql } from '../../lib/pg.js';
import { ApiError, notFound } from '../../lib/problem.js';
import { Alert, AlertListQuery, AlertPatch } from '../../schemas/core/alerts.js';
import { IdParams, Page } from '../../schemas/core/common.js';
import type { Deps } from '../deps.js';
import { type Ctx, json, type Reply } from '../http/context.js';
import type { Route } from '../http/router.js';

interface AlertRow {
  id: string;
  type: string;
  status: string;
  severity: string;
  customer_id: string | null;
  api_key_id: string | null;
  summary: string;
  details: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  cursor_ts: string;
}

const COLUMNS = `id::text, type, status, severity, customer_id::text, api_key_id::text, summary, details, created_at,
  updated_at, created_at::text AS cursor_ts`;

// The same shape as the alert.created webhook event (webhook_alert in migration 0070).
const toAlert = (r: AlertRow) => ({
  id: r.id,
  type: r.type,
  status: r.status,
  severity: r.severity,
  customer_id: r.customer_id,
  api_key_id: r.api_key_id,
  summary: r.summary,
  details: r.details,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

/** Alerts are raised by the processors (processors/alerts/); admins list them and move them on. */
export function alertRoutes(d: Deps): Route[] {
  const sql: Sql = d.sql;
  const none = sql``;

  async function list(c: Ctx): Promise<Reply> {
    const q = c.query;
    const limit = q.limit ?? 50;
    const after = decodeCursor(q.cursor);
    const rows = await sql<AlertRow[]>`
      SELECT ${sql.unsafe(COLUMNS)} FROM alerts
      WHERE ${c.tenant}
        ${q.type ? sql`AND type = ${q.type}` : none}
        ${q.status ? sql`AND status = ANY(${q.status.split(',')}::text[])` : none}
        ${q.customer_id ? sql`AND customer_id = ${q.customer_id}` : none}
        ${after ? sql`AND (created_at, id) < (${after.t}::text::timestamptz, ${after.id}::uuid)` : none}
      ORDER BY created_at DESC, id DESC LIMIT ${limit + 1}`;
    return json(200, page(rows, limit, toAlert));
  }

  async function patch(c: Ctx): Promise<Reply> {
    const b = c.body as AlertPatch;
    const row = await sql.begin(async (tx) => {
      const t = tx as unknown as Sql;
      const [cur] = await t<AlertRow[]>`
        SELECT ${t.unsafe(COLUMNS)} FROM alerts WHERE ${c.tenant} AND id = ${c.params.id} FOR UPDATE`;
      if (!cur) throw notFound('Alert');
      if (cur.status === 'resolved') throw new ApiError('invalid_state', 'The alert is resolved, which is final.');
      if (cur.status === b.status) return cur;
      const [r] = await t<AlertRow[]>`
        UPDATE alerts SET status = ${b.status}, updated_at = now(),
          resolved_at = CASE WHEN ${b.status} = 'resolved' THEN now() END,
          details = CASE WHEN ${b.status} = 'resolved' THEN details || '{"resolved_by": "user"}' ELSE details END
        WHERE ${c.tenant} AND id = ${cur.id} RETURNING ${t.unsafe(COLUMNS)}`;
      return r;
    });
    return json(200, toAlert(row as AlertRow));
  }

  const common = {
    tag: 'Analytics',
    auth: 'bearer' as const,
    scope: 'analytics:read' as const,
    role: 'admin' as const,
  };
  return [
    {
      ...common,
      method: 'GET',
      path: '/v1/alerts',
      summary: 'Alerts (admin)',
      description:
        'Newest first, cursor-paginated; filters `type` (api_key_usage_spike, usage_drop), `status` ' +
        '(comma-separated) and `customer_id`. Needs the admin role and analytics:read. Kinds and thresholds: ' +
        'docs/analytics.md "Alerts".',
      query: AlertListQuery,
      handler: list,
      responses: { 200: { description: 'A page of alerts.', schema: Page(Alert) } },
    },
    {
      ...common,
      method: 'PATCH',
      path: '/v1/alerts/{id}',
      summary: 'Acknowledge or resolve an alert (admin)',
      description:
        '`{"status": "acknowledged"}` or `{"status": "resolved"}`. An acknowledged alert still counts as open ' +
        '(no second alert of its kind for the same key or customer); resolved is final (409 `invalid_state`). ' +
        'A usage_drop alert is also resolved by the service when the usage recovers.',
      params: IdParams,
      body: AlertPatch,
      bodyExample: { status: 'acknowledged' },
      handler: patch,
      errors: [404, 409, 413, 415],
      responses: { 200: { description: 'The alert.', schema: Alert } },
    },
  ] satisfies Route[];
}
