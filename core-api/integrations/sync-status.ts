import { ACTIVITY_TYPES, CONNECTORS, type ConnectorName } from '../../lib/integrations/connectors.js';
import type { TransactionSql } from 'postgres';
import { inTenant, type Sql } from '../../lib/pg.js';
import { ApiError } from '../../lib/problem.js';
import { SyncAnswer } from '../../schemas/core/integration-sync.js';
import { IntegrationParams } from '../../schemas/core/integrations.js';
import { type Ctx, json, type Reply } from '../http/context.js';
import type { Route } from '../http/router.js';
import type { Notifier } from '../notify.js';

/** The connectors the processors sync on a schedule (processors/integrations/sync/). */
export const SYNCED: readonly ConnectorName[] = ['gmail', 'outlook', 'google_calendar', 'outlook_calendar'];

const DAY_MS = 24 * 3600_000;

/** The smallest UUIDv7 of a millisecond: outbox ids (UUIDv7) at or after it were made at or after it. */
export function uuidV7Floor(ms: number): string {
  const h = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-0000-0000-000000000000`;
}

export interface SyncStatusRow {
  last_synced_at: Date | null;
  last_error: string | null;
  last_error_at: Date | null;
}

/** What GET /v1/integrations adds per connector: the sync's status and the events of the last 24 hours. */
export interface SyncStatus {
  sync: Map<string, SyncStatusRow>;
  counts: Map<string, Map<string, number>>;
}

export async function loadSyncStatus(sql: Sql | TransactionSql, tenantId: string): Promise<SyncStatus> {
  const [syncs, counts] = await Promise.all([
    sql<Array<SyncStatusRow & { name: string }>>`
      SELECT name, last_synced_at, last_error, last_error_at FROM integration_syncs WHERE ${inTenant(tenantId)}`,
    sql<Array<{ name: string; event_name: string; n: number }>>`
      SELECT properties->>'integration' AS name, event_name, count(*)::int AS n FROM event_outbox
      WHERE ${inTenant(tenantId)} AND surface = 'integration' AND id >= ${uuidV7Floor(Date.now() - DAY_MS)}::uuid
      GROUP BY 1, 2`,
  ]);
  const byName = new Map<string, Map<string, number>>();
  for (const c of counts) {
    if (!byName.has(c.name)) byName.set(c.name, new Map());
    byName.get(c.name)?.set(c.event_name, c.n);
  }
  return { sync: new Map(syncs.map((s) => [s.name, s])), counts: byName };
}

/**
 * The fields of one connector: last_synced_at; last_error, the latest failure with its time (the
 * sync's, another of the connection such as a notification the provider refused, or the reason of
 * an `error` status); events_24h per event name of its category.
 */
export function syncStatusFields(
  name: ConnectorName,
  s: SyncStatus,
  row:
    | { status: string; error: string | null; updated_at: Date; last_error: string | null; last_error_at: Date | null }
    | undefined,
) {
  const sync = s.sync.get(name);
  const counts = s.counts.get(name);
  const events: Record<string, number> = {};
  for (const type of ACTIVITY_TYPES[CONNECTORS[name].category]) events[type] = counts?.get(type) ?? 0;
  const candidates: Array<[string | null | undefined, Date | null | undefined]> = [
    [sync?.last_error, sync?.last_error_at],
    [row?.last_error, row?.last_error_at],
    [row?.status === 'error' ? row.error : null, row?.updated_at],
  ];
  let lastError: { message: string; at: string } | null = null;
  for (const [message, at] of candidates)
    if (message && at && (!lastError || at.getTime() > Date.parse(lastError.at)))
      lastError = { message, at: at.toISOString() };
  return {
    last_synced_at: sync?.last_synced_at?.toISOString() ?? null,
    last_error: lastError,
    events_24h: events,
  };
}

/**
 * POST /v1/integrations/{name}/sync: the connection is due at once, and the processors are told
 * (core NATS): the sync starts within a second. Without that message (processors down) their next
 * scheduled look finds it due.
 */
export function syncNowRoute(sql: Sql, notify: Notifier, known: (name: string) => ConnectorName): Route {
  async function syncNow(c: Ctx): Promise<Reply> {
    const name = known(c.params.name);
    if (!SYNCED.includes(name))
      throw new ApiError('integration_not_syncable', `${name} does not sync; only ${SYNCED.join(', ')} do.`);
    const [r] = await sql<Array<{ requested_at: Date; running: boolean }>>`
      INSERT INTO integration_syncs AS s (tenant_id, name, requested_at)
      SELECT tenant_id, name, now() FROM integrations WHERE ${c.tenant} AND name = ${name} AND status = 'connected'
      ON CONFLICT (tenant_id, name) DO UPDATE SET requested_at = now()
      RETURNING s.requested_at, s.lease_expires_at > now() AND s.holder IS NOT NULL AS running`;
    if (!r) throw new ApiError('integration_not_connected', `${name} is not connected; connect it first.`);
    notify.integrationWork(c.principal.tenantId, name);
    return json(202, { name, requested_at: r.requested_at.toISOString(), running: r.running });
  }
  return {
    tag: 'Integrations',
    auth: 'bearer',
    scope: null,
    role: 'admin',
    method: 'POST',
    path: '/v1/integrations/{name}/sync',
    summary: 'Sync an e-mail or calendar integration now (admin)',
    description:
      'Makes the connection due at once and tells the processors, which start its sync within a second ' +
      'instead of waiting for INTEGRATION_SYNC_INTERVAL_MS; GET /v1/integrations shows its last_synced_at or ' +
      'last_error afterwards. If no processors instance gets the message (none running), or every one is at ' +
      'INTEGRATION_SYNC_CONCURRENCY, their next scheduled look starts it (every INTEGRATION_SYNC_POLL_MS, 5 s ' +
      'by default, jittered ±50 %). 202 when queued (`running`: a sync was under way; another starts as soon ' +
      'as it ends); unknown name → 404; a connector that does not sync (slack, ' +
      'teams, zendesk, intercom) → 409 `integration_not_syncable`; not connected → 409 ' +
      '`integration_not_connected`.',
    params: IntegrationParams,
    handler: syncNow,
    errors: [404, 409],
    responses: { 202: { description: 'Queued.', schema: SyncAnswer } },
  };
}
