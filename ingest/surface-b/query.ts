import { decodeEventCursor, encodeEventCursor, MAX_DATETIME_S } from '../../lib/cursor.js';
import { type ChAnswer, ClickHouseEndpoints } from '../../lib/clickhouse-endpoints.js';
import { propertiesJson } from '../../lib/event-properties.js';
import { isUuid } from '../../lib/ids.js';
import { chTenant } from '../../lib/metrics/literal.js';
import { ApiError } from '../../lib/problem.js';

export interface EventFilter {
  tenantId: string;
  customerId?: string;
  eventName?: string;
  /** Inclusive, ms since epoch. */
  fromMs: number;
  /** Exclusive, ms since epoch. */
  toMs: number;
  limit: number;
  cursor?: string;
}

interface Row {
  eid: string;
  cid: string;
  event_name: string;
  t: number;
  ts_ms: number;
  r: number;
  surface: string;
  external_id: string;
  user_id: string;
  user_email: string;
  user_external_id: string;
  properties: string;
  prop_keys: string[];
  prop_values: string[];
  prop_kinds: string;
}

/** ClickHouse errors that pass: overload, memory, timeouts, cancelled queries. */
const TRANSIENT_CH_CODES = new Set([159, 160, 202, 209, 210, 241, 394]);

/** The event store does not answer (down, unreachable, overloaded, too slow): 503 with Retry-After. */
const unavailable = () =>
  new ApiError('service_unavailable', 'The event store is unavailable; nothing was read. Retry shortly.', undefined, [
    ['Retry-After', '5'],
  ]);

/** Stored ids are lower case: an upper-case one would compare wrongly in the keyset condition. */
const isStoredUuid = (s: string) => isUuid(s) && s === s.toLowerCase();
const SNAKE_RE = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$/;

/**
 * The debug query of GET /v1/events over ClickHouse's HTTP interface (read-only, the SQL in a
 * POST body). ClickHouse 18.16 has no query parameters, so every value placed in
 * the SQL is validated to a UUID, a snake_case name or an integer first. Newest events first.
 */
export class EventQuery {
  private readonly endpoints: ClickHouseEndpoints;

  /** `url`: one endpoint or several, comma-separated, tried in order (lib/clickhouse-endpoints.ts). */
  constructor(
    url: string,
    private readonly database: string,
    private readonly timeoutMs: number,
  ) {
    this.endpoints = new ClickHouseEndpoints(url);
  }

  async page(f: EventFilter): Promise<{ data: unknown[]; next_cursor: string | null; has_more: boolean }> {
    if (
      !isStoredUuid(f.tenantId) ||
      (f.customerId !== undefined && !isStoredUuid(f.customerId)) ||
      (f.eventName !== undefined && !SNAKE_RE.test(f.eventName))
    ) {
      throw new Error('unvalidated filter value');
    }
    // Any date-time the query string may carry, held to the range a DateTime can take.
    const clamp = (ms: number) => Math.min(Math.max(Math.floor(ms), 0), MAX_DATETIME_S * 1000);
    const from = clamp(f.fromMs);
    const to = clamp(f.toMs);
    const where = [
      chTenant(f.tenantId),
      `ts >= toDateTime(${Math.floor(from / 1000)})`,
      `ts <= toDateTime(${Math.floor(to / 1000)})`,
      `toUInt64(ts) * 1000 + ts_ms >= ${from}`,
      `toUInt64(ts) * 1000 + ts_ms < ${to}`,
    ];
    if (f.customerId) where.push(`customer_id = toUUID('${f.customerId}')`);
    if (f.eventName) where.push(`event_name = '${f.eventName}'`);
    if (f.cursor) {
      const p = decodeEventCursor(f.cursor);
      where.push(
        `(ts < toDateTime(${p.ts}) OR (ts = toDateTime(${p.ts}) AND ` +
          `(ts_ms < ${p.ms} OR (ts_ms = ${p.ms} AND toString(event_id) < '${p.id}'))))`,
      );
    }
    // Aliases differ from column names: ClickHouse resolves aliases in WHERE too.
    const query = `SELECT toString(event_id) AS eid, toString(customer_id) AS cid, event_name, toUInt32(ts) AS t, ts_ms,
        toUInt32(received_at) AS r, surface, external_id, user_id, user_email, user_external_id,
        properties, prop_keys, prop_values, prop_kinds
      FROM ${this.database}.events WHERE ${where.join(' AND ')}
      ORDER BY ts DESC, ts_ms DESC, eid DESC LIMIT ${f.limit + 1} FORMAT JSONEachRow`;
    let res: ChAnswer;
    let text: string;
    try {
      [res, text] = await this.endpoints.read(query, {}, this.timeoutMs);
    } catch {
      throw unavailable();
    }
    if (!res.ok) {
      // Overload and timeouts pass; anything else is a fault of the query, not of the store.
      if (res.status === 503 || TRANSIENT_CH_CODES.has(Number(/Code: (\d+)/.exec(text)?.[1]))) throw unavailable();
      throw new Error(`ClickHouse answered ${res.status}: ${text.slice(0, 300)}`);
    }
    const rows = text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Row);
    const hasMore = rows.length > f.limit;
    const shown = hasMore ? rows.slice(0, f.limit) : rows;
    const last = shown[shown.length - 1];
    return {
      data: shown.map((r) => ({
        event_id: r.eid,
        customer_id: r.cid,
        event_name: r.event_name,
        timestamp: new Date(r.t * 1000 + r.ts_ms).toISOString(),
        received_at: new Date(r.r * 1000).toISOString(),
        surface: r.surface,
        external_id: r.external_id || null,
        user_id: r.user_id || null,
        user_email: r.user_email || null,
        user_external_id: r.user_external_id || null,
        properties: safeJson(propertiesJson(r.properties, r.prop_keys, r.prop_values, r.prop_kinds)),
      })),
      next_cursor: hasMore && last ? encodeEventCursor({ ts: last.t, ms: last.ts_ms, id: last.eid }) : null,
      has_more: hasMore,
    };
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return {};
  }
}
