import { decodeNameCursor, encodeNameCursor } from '../../lib/cursor.js';
import { chTenant, str } from '../../lib/metrics/literal.js';
import { inTenant, type Sql } from '../../lib/pg.js';
import { Page } from '../../schemas/core/common.js';
import { CatalogEntry, CatalogQuery, MAX_PROPERTY_KEYS } from '../../schemas/core/metrics.js';
import type { ClickHouseReader } from '../clickhouse.js';
import { json, type Ctx, type Reply } from '../http/context.js';
import type { Route } from '../http/router.js';

/**
 * GET /v1/event-catalog. Names and first_seen_at come from PostgreSQL (event_catalog, written by
 * the processors on first ingestion), paged by event_name; last_seen_at and the most frequent
 * property keys of the page's names from ClickHouse (csp.event_names; csp.event_property_keysets,
 * counted per key set, plus csp.event_property_keys, per-key counts of events stored before the
 * key sets existed) in one query per page.
 */

interface Seen {
  last: number | null;
  keys: Array<{ key: string; n: number }>;
}

/** last_seen_at (unix seconds) and the top property keys of `names`, in one query. */
export async function seenInClickHouse(ch: ClickHouseReader, tenantId: string, names: string[]) {
  const out = new Map<string, Seen>(names.map((n) => [n, { last: null, keys: [] }]));
  if (!names.length) return out;
  const db = ch.database;
  const t = chTenant(tenantId);
  const list = names.map(str).join(', ');
  const rows = await ch.rows<{ event_name: string; key: string; n: number; kind: number }>(
    `SELECT event_name, '' AS key, toUInt64(toUInt32(maxMerge(last_ts))) AS n, 1 AS kind
     FROM ${db}.event_names WHERE ${t} AND event_name IN (${list}) GROUP BY event_name
     UNION ALL
     SELECT event_name, key, n, 2 AS kind FROM (
       SELECT event_name, key, sum(events) AS n FROM (
         SELECT event_name, key, events
         FROM ${db}.event_property_keysets ARRAY JOIN keys AS key
         WHERE ${t} AND event_name IN (${list})
         UNION ALL
         SELECT event_name, key, events
         FROM ${db}.event_property_keys WHERE ${t} AND event_name IN (${list}))
       GROUP BY event_name, key ORDER BY event_name, n DESC, key LIMIT ${MAX_PROPERTY_KEYS} BY event_name)`,
    'The event store',
  );
  for (const r of rows) {
    const s = out.get(r.event_name);
    if (!s) continue;
    if (Number(r.kind) === 1) s.last = Number(r.n);
    else s.keys.push({ key: r.key, n: Number(r.n) });
  }
  for (const s of out.values()) s.keys.sort((a, b) => b.n - a.n || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return out;
}

export function catalogRoutes(sql: Sql, ch: ClickHouseReader): Route[] {
  async function list(c: Ctx): Promise<Reply> {
    const p = c.principal;
    const limit: number = c.query.limit ?? 50;
    const after = decodeNameCursor(c.query.cursor);
    const rows = await sql<Array<{ event_name: string; first_seen_at: Date }>>`
      SELECT event_name, first_seen_at FROM event_catalog
      WHERE ${inTenant(p.tenantId)} ${after !== null ? sql`AND event_name COLLATE "C" > ${after}` : sql``}
      ORDER BY event_name COLLATE "C" LIMIT ${limit + 1}`;
    const has_more = rows.length > limit;
    const shown = has_more ? rows.slice(0, limit) : rows;
    const seen = await seenInClickHouse(
      ch,
      p.tenantId,
      shown.map((r) => r.event_name),
    );
    const data = shown.map((r) => {
      const s = seen.get(r.event_name)!;
      return {
        event_name: r.event_name,
        first_seen_at: r.first_seen_at.toISOString(),
        last_seen_at: s.last ? new Date(s.last * 1000).toISOString() : null,
        property_keys: s.keys.map((k) => k.key),
      };
    });
    return json(200, {
      data,
      next_cursor: has_more ? encodeNameCursor(shown[shown.length - 1].event_name) : null,
      has_more,
    });
  }

  return [
    {
      tag: 'Metrics',
      auth: 'bearer',
      method: 'GET',
      path: '/v1/event-catalog',
      summary: 'The workspace event catalog',
      description: [
        'Every event name the workspace has sent (both ingestion surfaces and backfills) or the service',
        'generated, listed within seconds of its first ingestion, by name (byte order), cursor-paginated.',
        '`first_seen_at`: when the name was first ingested; `last_seen_at`: the latest event time (seconds)',
        "stored; `property_keys`: the top-level keys of `properties` seen on the name's events, the",
        `${MAX_PROPERTY_KEYS} most frequent, most frequent first.`,
      ].join(' '),
      scope: ['events:read', 'analytics:read'],
      query: CatalogQuery,
      handler: list,
      responses: { 200: { description: 'A page of event names.', schema: Page(CatalogEntry) } },
    },
  ] satisfies Route[];
}
