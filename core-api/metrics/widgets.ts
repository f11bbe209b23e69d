import { chTenant, date, dateTime, str, uuid } from '../../lib/metrics/literal.js';
import type { Sql } from '../../lib/pg.js';
import { IdParams } from '../../schemas/core/common.js';
import {
  MAX_WIDGETS,
  Widget,
  WidgetCreate,
  WidgetValue,
  WidgetValueQuery,
  type WIDGET_PERIODS,
} from '../../schemas/core/metrics.js';
import Type from '#typebox';
import type { ClickHouseReader } from '../clickhouse.js';
import { json, noContent, type Ctx, type Reply } from '../http/context.js';
import { isUuid } from '../../lib/ids.js';
import { ApiError, invalid, notFound } from '../../lib/problem.js';
import type { Route } from '../http/router.js';
import { unknownEvent } from './definitions.js';
import { catalogHas, liveCustomers } from './repo.js';

/**
 * The older usage widgets: one aggregation of a customer's product usage over the last 7, 30 or
 * 90 UTC days, today included so far (events the service generates do not count). At most 8 per
 * workspace. count, trend_pct and frequency read the daily rollup; unique_users csp.events.
 */

const DAY_MS = 86_400_000;
const PERIOD_DAYS: Record<(typeof WIDGET_PERIODS)[number], number> = { '7d': 7, '30d': 30, '90d': 90 };

interface WidgetRow {
  id: string;
  name: string;
  event_name: string | null;
  aggregation: 'count' | 'unique_users' | 'trend_pct' | 'frequency';
  period: '7d' | '30d' | '90d';
  created_at: Date;
}

const toWidget = (r: WidgetRow) => ({ ...r, created_at: r.created_at.toISOString() });

export interface WidgetPeriods {
  days: number;
  from: Date;
  to: Date;
  previousFrom: Date;
}

/** The N UTC days ending today (so far), and the N days before them. */
export function widgetPeriods(period: WidgetRow['period'], now: Date): WidgetPeriods {
  const days = PERIOD_DAYS[period];
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  const from = today - (days - 1) * DAY_MS;
  return { days, from: new Date(from), to: now, previousFrom: new Date(from - days * DAY_MS) };
}

export async function widgetValue(
  ch: ClickHouseReader,
  tenantId: string,
  customerId: string,
  w: Pick<WidgetRow, 'event_name' | 'aggregation' | 'period'>,
  now: Date,
) {
  const p = widgetPeriods(w.period, now);
  const db = ch.database;
  const who = `${chTenant(tenantId)} AND customer_id = ${uuid(customerId)}`;
  const name = w.event_name !== null ? ` AND event_name = ${str(w.event_name)}` : '';
  const period = { from: p.from.toISOString(), to: p.to.toISOString() };
  const what = 'The event store';
  if (w.aggregation === 'unique_users') {
    const [r] = await ch.rows<{ v: number }>(
      `SELECT uniqExactIf(user_id, user_id != '') AS v FROM ${db}.events
       WHERE ${who}${name} AND ts >= ${dateTime(p.from)} AND ts <= ${dateTime(p.to)} AND surface != 'system'`,
      what,
    );
    return { value: Number(r?.v ?? 0), period };
  }
  const [r] = await ch.rows<{ cur: number; prev: number; days: number }>(
    `SELECT sumIf(events, day >= ${date(p.from)}) AS cur, sumIf(events, day < ${date(p.from)}) AS prev,
       uniqExactIf(day, day >= ${date(p.from)} AND events > 0) AS days
     FROM ${db}.usage_daily_names
     WHERE ${who}${name} AND day >= ${date(p.previousFrom)} AND day <= ${date(p.to)}`,
    what,
  );
  const cur = Number(r?.cur ?? 0);
  const prev = Number(r?.prev ?? 0);
  if (w.aggregation === 'count') return { value: cur, period };
  if (w.aggregation === 'frequency')
    return { value: Math.round((Number(r?.days ?? 0) / p.days) * 10_000) / 10_000, period };
  const value = prev === 0 ? (cur === 0 ? 0 : null) : Math.round(((cur - prev) / prev) * 10_000) / 100;
  return {
    value,
    period,
    previous: { count: prev, from: p.previousFrom.toISOString(), to: p.from.toISOString() },
  };
}

export function widgetRoutes(sql: Sql, ch: ClickHouseReader): Route[] {
  async function list(c: Ctx): Promise<Reply> {
    const rows = await sql<WidgetRow[]>`
      SELECT id::text, name, event_name, aggregation, period, created_at FROM usage_widgets
      WHERE ${c.tenant} ORDER BY created_at, id`;
    return json(200, { data: rows.map(toWidget) });
  }

  async function create(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const b = c.body as WidgetCreate;
    const eventName = b.event_name ?? null;
    if (eventName !== null && !(await catalogHas(sql, tenantId, eventName)))
      throw unknownEvent(eventName, 'event_name');
    const row = (await sql.begin(async (tx) => {
      // The workspace row's lock serializes creations, so two concurrent ones cannot both be the 8th.
      await tx`SELECT 1 FROM tenants WHERE id = ${tenantId} FOR UPDATE`;
      const [{ n }] = await tx<Array<{ n: number }>>`
        SELECT count(*)::int AS n FROM usage_widgets WHERE ${c.tenant}`;
      if (n >= MAX_WIDGETS)
        throw new ApiError(
          'widget_limit_reached',
          `The workspace has ${n} usage widgets, the most it can have (${MAX_WIDGETS}); delete one first.`,
        );
      const [r] = await tx<WidgetRow[]>`
        INSERT INTO usage_widgets (tenant_id, name, event_name, aggregation, period)
        VALUES (${tenantId}, ${b.name.trim()}, ${eventName}, ${b.aggregation}, ${b.period})
        RETURNING id::text, name, event_name, aggregation, period, created_at`;
      return r;
    })) as WidgetRow;
    return json(201, toWidget(row));
  }

  async function remove(c: Ctx): Promise<Reply> {
    const rows = await sql`
      DELETE FROM usage_widgets WHERE ${c.tenant} AND id = ${c.params.id} RETURNING id`;
    if (!rows.length) throw notFound('Usage widget');
    return noContent();
  }

  async function value(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const [w] = await sql<WidgetRow[]>`
      SELECT id::text, name, event_name, aggregation, period, created_at FROM usage_widgets
      WHERE ${c.tenant} AND id = ${c.params.id}`;
    if (!w) throw notFound('Usage widget');
    const customerId = String(c.query.customer_id ?? '').toLowerCase();
    if (!isUuid(customerId))
      throw invalid(
        [
          {
            field: 'customer_id',
            code: customerId ? 'invalid_uuid' : 'required',
            message: 'customer_id must be a UUID',
          },
        ],
        'The query string is invalid; see errors.',
      );
    if (!(await liveCustomers(sql, tenantId, [customerId])).has(customerId)) throw notFound('Customer');
    const v = await widgetValue(ch, tenantId, customerId, w, new Date());
    return json(200, { widget_id: w.id, customer_id: customerId, ...v });
  }

  const common = { tag: 'Metrics', auth: 'bearer' as const };
  const write = { ...common, scope: 'metrics:write' as const, role: 'admin' as const };
  return [
    {
      ...common,
      method: 'GET',
      path: '/v1/usage-widgets',
      summary: 'The usage widgets of the workspace (at most 8)',
      scope: 'metrics:read',
      handler: list,
      responses: {
        200: { description: 'All widgets, oldest first.', schema: Type.Object({ data: Type.Array(Widget) }) },
      },
    },
    {
      ...write,
      method: 'POST',
      path: '/v1/usage-widgets',
      summary: 'Add a usage widget (admin)',
      description:
        '`event_name` (optional; all product usage events when absent) must be in the event catalog (422 ' +
        '`unknown_event`). The 9th widget of a workspace → 409 `widget_limit_reached`.',
      body: WidgetCreate,
      bodyExample: { name: 'Exports', event_name: 'report_exported', aggregation: 'trend_pct', period: '30d' },
      handler: create,
      errors: [409, 413, 415, 422],
      responses: { 201: { description: 'The widget.', schema: Widget } },
    },
    {
      ...write,
      method: 'DELETE',
      path: '/v1/usage-widgets/{id}',
      summary: 'Remove a usage widget (admin)',
      params: IdParams,
      handler: remove,
      errors: [404],
      responses: { 204: { description: 'Removed.' } },
    },
    {
      ...common,
      method: 'GET',
      path: '/v1/usage-widgets/{id}/value',
      summary: "A widget's value for one customer",
      description: [
        'Period: the last 7, 30 or 90 UTC days, today included so far. `count`: events; `unique_users`:',
        'distinct non-empty user_id; `frequency`: days with an event ÷ days of the period (4 decimals);',
        '`trend_pct`: (count − count of the previous period of the same length) ÷ that previous count × 100,',
        '2 decimals, null when the previous period has no event (0 when neither has). Generated events',
        '(surface system) do not count.',
      ].join(' '),
      scope: 'metrics:read',
      params: IdParams,
      query: WidgetValueQuery,
      handler: value,
      errors: [404],
      responses: { 200: { description: 'The value.', schema: WidgetValue } },
    },
  ] satisfies Route[];
}
