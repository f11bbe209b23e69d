import { call, type client } from '../core-api/_helpers.js';
import { ch, db, waitFor } from '../helpers/stack.js';

/** What the sync tests share: connecting through a fake provider, syncing now, reading what was produced. */

export type Client = ReturnType<typeof client>;

export interface Entry {
  name: string;
  status: string;
  error: string | null;
  last_synced_at: string | null;
  last_error: { message: string; at: string } | null;
  events_24h: Record<string, number>;
  activities: number;
  unmatched_activities: number;
}

export const entry = async (admin: Client, name: string): Promise<Entry> =>
  (await admin.get('/v1/integrations')).body.data.find((i: { name: string }) => i.name === name);

/** Connect as a browser would: connect → the provider's authorize page (302) → the callback. */
export async function connect(admin: Client, name: string): Promise<void> {
  const started = await admin.post(`/v1/integrations/${name}/connect`);
  if (started.status !== 200) throw new Error(started.text);
  const auth = await fetch(started.body.authorization_url, { redirect: 'manual' });
  const back = new URL(auth.headers.get('location') ?? '');
  const page = await call(back.origin, 'GET', back.pathname + back.search);
  if (page.status !== 200) throw new Error(`callback answered ${page.status}: ${page.text}`);
}

/** The first sync of a new connection (it is due at once): its entry once it has synced or failed. */
export const firstSync = (admin: Client, name: string) =>
  waitFor(
    `the first ${name} sync`,
    async () => {
      const e = await entry(admin, name);
      return e.last_synced_at || e.last_error ? e : undefined;
    },
    30_000,
  );

/**
 * POST /v1/integrations/{name}/sync (202), then the entry once a sync that started after the request
 * finished or failed (its lease released). Not merely the next change of the entry: a sync under way when the request
 * came (a new connection's first one starts at once) ends first, and the requested one follows it.
 */
export async function syncNow(admin: Client, name: string): Promise<Entry> {
  const r = await admin.post(`/v1/integrations/${name}/sync`);
  if (r.status !== 202) throw new Error(`sync answered ${r.status}: ${r.text}`);
  const requested = new Date(r.body.requested_at as string);
  await waitFor(
    `a ${name} sync started after the request`,
    async () => {
      const [s] = await db()<Array<{ done: boolean }>>`
        SELECT last_started_at >= requested_at AND holder IS NULL AS done
        FROM integration_syncs WHERE name = ${name} AND date_trunc('milliseconds', requested_at) = ${requested}`;
      return s?.done;
    },
    30_000,
  );
  return entry(admin, name);
}

export interface Produced {
  event_name: string;
  customer_id: string;
  activity_id: string;
  occurred_at: Date;
  properties: Record<string, unknown>;
}

/** The events the workspace's integrations produced (event_outbox, in the same transaction as the sync). */
export const produced = (tenantId: string) =>
  db()<Produced[]>`
    SELECT event_name, customer_id::text, properties->>'activity_id' AS activity_id, occurred_at, properties
    FROM event_outbox WHERE tenant_id = ${tenantId} AND surface = 'integration'
    ORDER BY occurred_at, event_name, customer_id`;

/** The workspace's integration events in csp.events once there are `n` of them. */
export const stored = (tenantId: string, n: number) =>
  waitFor(
    `${n} integration events in csp.events`,
    async () => {
      const rows = await ch<{ event_name: string; customer_id: string; ts: number; properties: string }>(
        `SELECT event_name, toString(customer_id) AS customer_id, toUnixTimestamp(ts) AS ts, properties
         FROM csp.events WHERE tenant_id = '${tenantId}' AND surface = 'integration' ORDER BY ts, event_name`,
      );
      return rows.length === n ? rows : undefined;
    },
    30_000,
  );

/** Every text the workspace's integration rows hold in PostgreSQL, for privacy checks. */
export async function storedText(tenantId: string): Promise<string> {
  const [a] = await db()<Array<{ t: string }>>`
    SELECT coalesce(string_agg(properties::text, ' '), '') AS t FROM event_outbox
    WHERE tenant_id = ${tenantId} AND surface = 'integration'`;
  const [b] = await db()<Array<{ t: string }>>`
    SELECT coalesce(string_agg(cursor::text || coalesce(last_error, ''), ' '), '') AS t FROM integration_syncs
    WHERE tenant_id = ${tenantId}`;
  const [c] = await db()<Array<{ t: string }>>`
    SELECT coalesce(string_agg(array_to_string(attendees, ' '), ' '), '') AS t FROM integration_pending_meetings
    WHERE tenant_id = ${tenantId}`;
  return `${a.t} ${b.t} ${c.t}`;
}

export const DAY_MS = 24 * 3600_000;
export const ago = (ms: number) => new Date(Math.floor((Date.now() - ms) / 1000) * 1000);
