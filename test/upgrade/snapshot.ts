import http from 'node:http';
import type postgres from 'postgres';
import { client } from '../core-api/_helpers.js';
import type { Written } from './workspace.js';

/**
 * A workspace as its users and the stores see it: every resource the core API lists or shows,
 * read page by page, and the rows each store holds for it. Taken before the upgrade and after it,
 * then compared field by field (`differences`): what the old version answered must come back the
 * same, except the fields a newer version adds and the few that move with the clock.
 */

export type Snapshot = Record<string, unknown>;

/** Fields that move with the clock or with use, not with the data: left out of the comparison. */
const VOLATILE = new Set([
  'last_used_at',
  'calculated_at',
  'days_to_renewal',
  'expires_in',
  'generated_at',
  'as_of',
  'last_sync_at',
  'next_sync_at',
  'token_expires_at',
]);

export async function readWorkspace(api: string, w: Written): Promise<Snapshot> {
  const admin = client(api, w.ws.api_key);
  const get = async (p: string) => {
    const r = await admin.get(p);
    if (r.status !== 200) throw new Error(`GET ${p}: ${r.status} ${r.text}`);
    return r.body;
  };
  const all = async (p: string) => {
    const out: unknown[] = [];
    let cursor = '';
    for (;;) {
      const page = await get(`${p}${p.includes('?') ? '&' : '?'}limit=100${cursor}`);
      out.push(...page.data);
      if (!page.has_more) return out;
      cursor = `&cursor=${encodeURIComponent(page.next_cursor)}`;
    }
  };
  const byId = (rows: unknown[]) =>
    Object.fromEntries((rows as Array<{ id: string }>).map((r) => [r.id, r])) as Record<string, unknown>;
  const s: Snapshot = {};
  const customers = (await all('/v1/customers')) as Array<{ id: string }>;
  s.customers = byId(customers);
  s.trash = byId(await all('/v1/customers/trash'));
  const details: Record<string, unknown> = {};
  for (const c of customers) {
    details[c.id] = {
      detail: await get(`/v1/customers/${c.id}`),
      contacts: byId(await all(`/v1/customers/${c.id}/contacts`)),
      health: await get(`/v1/customers/${c.id}/health`),
      // A widget's value over its period; the period itself ends now.
      widgets: Object.fromEntries(
        await Promise.all(
          w.widgetIds.map(async (id) => {
            const { period: _, ...value } = await get(`/v1/usage-widgets/${id}/value?customer_id=${c.id}`);
            return [id, value];
          }),
        ),
      ),
    };
  }
  s.customerDetails = details;
  s.users = byId(await all('/v1/users'));
  s.apiKeys = byId((await get('/v1/api-keys')).data);
  s.oauthApps = Object.fromEntries(
    ((await get('/v1/oauth/apps')).data as Array<{ client_id: string }>).map((a) => [a.client_id, a]),
  );
  s.webhooks = byId(await all('/v1/webhook-subscriptions'));
  s.integrations = Object.fromEntries(
    ((await get('/v1/integrations')).data as Array<{ name: string }>).map((i) => [i.name, i]),
  );
  s.metrics = byId(await all('/v1/metrics'));
  s.widgets = byId(await all('/v1/usage-widgets'));
  s.healthModel = await get('/v1/health/model');
  const segments = (await all('/v1/segments')) as Array<{ id: string }>;
  s.segments = byId(segments);
  s.segmentMembers = Object.fromEntries(
    await Promise.all(
      segments.map(async (g) => [
        g.id,
        ((await all(`/v1/customers?segment_id=${g.id}`)) as Array<{ id: string }>).map((c) => c.id).sort(),
      ]),
    ),
  );
  const playbooks = (await all('/v1/playbooks')) as Array<{ id: string }>;
  s.playbooks = byId(playbooks);
  s.playbookRuns = Object.fromEntries(
    await Promise.all(playbooks.map(async (p) => [p.id, byId(await all(`/v1/playbooks/${p.id}/runs`))])),
  );
  s.tasks = byId(await all('/v1/tasks'));
  s.alerts = byId(await all('/v1/alerts'));
  s.backfillJob = await get(`/v1/jobs/${w.backfillJob}`);
  s.eventCatalog = Object.fromEntries(
    ((await all('/v1/event-catalog')) as Array<{ event_name: string }>).map((e) => [e.event_name, e]),
  );
  return s;
}

/** Rows per table of a workspace in PostgreSQL (every table with a tenant_id column). */
export async function pgCounts(sql: postgres.Sql, tenantId: string): Promise<Record<string, number>> {
  const tables = await sql<Array<{ table_name: string }>>`
    SELECT table_name FROM information_schema.columns
    WHERE table_schema = 'public' AND column_name = 'tenant_id'
      AND table_name IN (SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE')
    ORDER BY table_name`;
  const out: Record<string, number> = {};
  for (const { table_name } of tables) {
    const [r] = await sql.unsafe<Array<{ n: string }>>(
      `SELECT count(*)::text AS n FROM "${table_name}" WHERE tenant_id = $1`,
      [tenantId],
    );
    out[table_name] = Number(r.n);
  }
  return out;
}

/**
 * Tables that background work and the checks' own requests add rows to after the snapshot: they may
 * grow, never shrink. Every other table of the workspace must hold as many rows after as before.
 */
export const GROWING: Readonly<Record<string, string>> = {
  credential_audit: 'every authenticated request is audited',
  rate_windows: "the rate limiter's windows",
  job_leases: 'scheduled jobs take leases',
  playbook_runs: 'playbooks are evaluated after each health run (every 15 s here) and on request',
  webhook_outbox: 'each run sends playbook.run.completed',
  webhook_deliveries: 'each run sends playbook.run.completed',
  webhook_attempts: 'each run sends playbook.run.completed',
};

/** `table: before → after` for every table that lost rows, or gained some and is not GROWING. */
export function countChanges(before: Record<string, number>, after: Record<string, number>): string[] {
  return Object.entries(before)
    .filter(([k, n]) => (after[k] ?? 0) < n || ((after[k] ?? 0) > n && GROWING[k] === undefined))
    .map(([k, n]) => `${k}: ${n} → ${after[k]}`);
}

/**
 * A request on a connection of its own, closed after it: a kept-alive client connection holds
 * clickhouse-server 18.16's shutdown for up to 20 s, and the test stops its servers twice.
 */
export function httpText(url: string, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: body === undefined ? 'GET' : 'POST', agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A ClickHouse statement that answers no rows (an INSERT, a CREATE). */
export async function chExec(chUrl: string, statement: string): Promise<void> {
  const res = await httpText(`${chUrl}/?database=csp`, statement);
  if (res.status !== 200) throw new Error(`ClickHouse ${res.status}: ${res.text.slice(0, 500)}`);
}

/** A ClickHouse query's rows (JSONEachRow) over HTTP. */
export async function chRows<T = Record<string, unknown>>(chUrl: string, query: string): Promise<T[]> {
  const res = await httpText(`${chUrl}/?database=csp`, `${query} FORMAT JSONEachRow`);
  if (res.status !== 200) throw new Error(`ClickHouse ${res.status}: ${res.text.slice(0, 500)}`);
  return res.text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as T);
}

/** What ClickHouse holds for a workspace: rows, distinct events and keys per table and surface. */
export async function chCounts(chUrl: string, tenantId: string): Promise<Record<string, number>> {
  const t = `tenant_id = toUUID('${tenantId}')`;
  const out: Record<string, number> = {};
  for (const r of await chRows<{ surface: string; n: string; ids: string; keys: string }>(
    chUrl,
    `SELECT surface, toString(count()) AS n, toString(uniqExact(event_id)) AS ids,
            toString(uniqExact(customer_id, external_id)) AS keys
     FROM csp.events WHERE ${t} GROUP BY surface ORDER BY surface`,
  )) {
    out[`events.${r.surface}.rows`] = Number(r.n);
    out[`events.${r.surface}.event_ids`] = Number(r.ids);
    out[`events.${r.surface}.keys`] = Number(r.keys);
  }
  const [b] = await chRows<{ n: string; ids: string }>(
    chUrl,
    `SELECT toString(count()) AS n, toString(uniqExact(event_id)) AS ids FROM csp.billing_events WHERE ${t}`,
  );
  out['billing_events.rows'] = Number(b.n);
  out['billing_events.event_ids'] = Number(b.ids);
  // The rollups the materialized views fed from those rows.
  for (const [name, query] of [
    ['usage_daily.events', `SELECT toString(countMerge(events)) AS n FROM csp.usage_daily WHERE ${t}`],
    ['usage_daily_names.events', `SELECT toString(sum(events)) AS n FROM csp.usage_daily_names WHERE ${t}`],
    ['billing_daily.events', `SELECT toString(countMerge(events)) AS n FROM csp.billing_daily WHERE ${t}`],
  ]) {
    const [r] = await chRows<{ n: string }>(chUrl, query);
    out[name] = Number(r.n);
  }
  const [names] = await chRows<{ n: string }>(
    chUrl,
    `SELECT toString(count()) AS n FROM (SELECT DISTINCT event_name FROM csp.event_names WHERE ${t})`,
  );
  out['event_names.names'] = Number(names.n);
  return out;
}

/**
 * Where `after` differs from `before`, as `path: before → after` lines. Only what `before` holds is
 * compared (a newer version may add fields, never drop or change one); VOLATILE fields are skipped.
 */
export function differences(before: unknown, after: unknown, at = ''): string[] {
  if (before === after) return [];
  if (Array.isArray(before)) {
    if (!Array.isArray(after)) return [`${at}: ${short(before)} → ${short(after)}`];
    if (before.length !== after.length) return [`${at}: ${before.length} items → ${after.length}`];
    return before.flatMap((b, i) => differences(b, after[i], `${at}[${i}]`));
  }
  if (before && typeof before === 'object') {
    if (!after || typeof after !== 'object') return [`${at}: ${short(before)} → ${short(after)}`];
    return Object.entries(before as Record<string, unknown>).flatMap(([k, v]) =>
      VOLATILE.has(k) ? [] : differences(v, (after as Record<string, unknown>)[k], at ? `${at}.${k}` : k),
    );
  }
  return [`${at}: ${short(before)} → ${short(after)}`];
}

const short = (v: unknown) => {
  const s = JSON.stringify(v) ?? 'undefined';
  return s.length > 120 ? `${s.slice(0, 117)}...` : s;
};
