import type { Position } from '../../lib/cursor.js';
import { inTenant, type Sql } from '../../lib/pg.js';

/** SQL of the webhook endpoints (PostgreSQL). Every query is scoped by tenant_id. */

export interface SubscriptionRow {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  disabled_reason: string | null;
  secret: string;
  created_at: Date;
  updated_at: Date;
  cursor_ts: string;
}

export interface AttemptRow {
  id: string;
  message_id: string;
  event_type: string;
  attempt: number;
  status: 'succeeded' | 'failed' | 'pending';
  response_status: number | null;
  duration_ms: number | null;
  error: string | null;
  created_at: Date;
  next_attempt_at: Date | null;
  cursor_ts: string;
}

const COLUMNS = `id::text, url, events, description, enabled, disabled_reason, secret, created_at, updated_at,
  created_at::text AS cursor_ts`;

export async function insertSubscription(
  sql: Sql,
  tenantId: string,
  s: { url: string; events: string[]; description: string | null; enabled: boolean; secret: string },
): Promise<SubscriptionRow> {
  const [row] = await sql<SubscriptionRow[]>`
    INSERT INTO webhook_subscriptions (tenant_id, url, events, description, enabled, secret)
    VALUES (${tenantId}, ${s.url}, ${s.events}::text[], ${s.description}, ${s.enabled}, ${s.secret})
    RETURNING ${sql.unsafe(COLUMNS)}`;
  return row;
}

export async function getSubscription(
  sql: Sql,
  tenantId: string,
  id: string,
  lock = false,
): Promise<SubscriptionRow | undefined> {
  const [row] = await sql<SubscriptionRow[]>`
    SELECT ${sql.unsafe(COLUMNS)} FROM webhook_subscriptions WHERE ${inTenant(tenantId)} AND id = ${id}
    ${lock ? sql`FOR UPDATE` : sql``}`;
  return row;
}

/** Oldest first, keyset on (created_at, id). */
export async function listSubscriptions(
  sql: Sql,
  tenantId: string,
  f: { after: Position | null; limit: number },
): Promise<SubscriptionRow[]> {
  return sql<SubscriptionRow[]>`
    SELECT ${sql.unsafe(COLUMNS)} FROM webhook_subscriptions
    WHERE ${inTenant(tenantId)}
      ${f.after ? sql`AND (created_at, id) > (${f.after.t}::text::timestamptz, ${f.after.id}::uuid)` : sql``}
    ORDER BY created_at, id LIMIT ${f.limit + 1}`;
}

/**
 * Enabling clears why the service had disabled it and its failure streak: the endpoint gets a
 * fresh five days, and its deliveries still pending resume.
 */
export async function updateSubscription(
  sql: Sql,
  tenantId: string,
  id: string,
  p: { url: string; events: string[]; description: string | null; enabled: boolean },
): Promise<SubscriptionRow | undefined> {
  const [row] = await sql<SubscriptionRow[]>`
    UPDATE webhook_subscriptions SET url = ${p.url}, events = ${p.events}::text[], description = ${p.description},
      enabled = ${p.enabled},
      disabled_reason = CASE WHEN ${p.enabled} THEN NULL ELSE disabled_reason END,
      failing_since = CASE WHEN ${p.enabled} AND NOT enabled THEN NULL ELSE failing_since END,
      updated_at = now()
    WHERE ${inTenant(tenantId)} AND id = ${id}
    RETURNING ${sql.unsafe(COLUMNS)}`;
  return row;
}

export async function deleteSubscription(sql: Sql, tenantId: string, id: string): Promise<boolean> {
  const r = await sql`DELETE FROM webhook_subscriptions WHERE ${inTenant(tenantId)} AND id = ${id} RETURNING 1`;
  return r.length > 0;
}

/** The new secret signs from now on; the one it replaces keeps signing beside it for `graceMs`. */
export async function rotateSecret(
  sql: Sql,
  tenantId: string,
  id: string,
  secret: string,
  graceMs: number,
): Promise<boolean> {
  const r = await sql`
    UPDATE webhook_subscriptions SET previous_secret = secret, secret = ${secret},
      previous_until = now() + ${graceMs}::float8 * interval '1 ms', updated_at = now()
    WHERE ${inTenant(tenantId)} AND id = ${id} RETURNING 1`;
  return r.length > 0;
}

/** Newest first, keyset on (created_at, id) descending. */
export async function listAttempts(
  sql: Sql,
  tenantId: string,
  subscriptionId: string,
  f: { after: Position | null; limit: number },
): Promise<AttemptRow[]> {
  return sql<AttemptRow[]>`
    SELECT id::text, message_id::text, event_type, attempt, status, response_status, duration_ms, error, created_at,
      next_attempt_at, created_at::text AS cursor_ts
    FROM webhook_attempts
    WHERE ${inTenant(tenantId)} AND subscription_id = ${subscriptionId}
      ${f.after ? sql`AND (created_at, id) < (${f.after.t}::text::timestamptz, ${f.after.id}::uuid)` : sql``}
    ORDER BY created_at DESC, id DESC LIMIT ${f.limit + 1}`;
}

/**
 * A ping for one subscription, queued as a delivery due now (it goes to this subscription only,
 * not through the outbox and the fan-out); the dispatcher sends it within its poll interval.
 */
export async function queuePing(sql: Sql, tenantId: string, subscriptionId: string): Promise<string> {
  const [r] = await sql<Array<{ message_id: string }>>`
    WITH m AS (SELECT gen_uuid_v7() AS id, now() AS at)
    INSERT INTO webhook_deliveries (tenant_id, subscription_id, message_id, event_type, body, next_attempt_at)
    SELECT ${tenantId}, ${subscriptionId}, m.id, 'ping',
      jsonb_build_object('type', 'ping', 'timestamp', webhook_ts(m.at),
        'data', jsonb_build_object('subscription_id', ${subscriptionId}::uuid, 'message', 'ping'))::text, m.at
    FROM m
    RETURNING message_id::text`;
  return r.message_id;
}
