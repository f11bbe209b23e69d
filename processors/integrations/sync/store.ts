import type { TransactionSql } from 'postgres';
import type { Sql } from '../../../lib/pg.js';

/** One message or meeting read from a provider, reduced to what becomes an event. */
export interface SyncedActivity {
  /** The provider's id (Gmail message id, Graph immutable id, calendar event id): the deduplication key. */
  id: string;
  type: 'email_sent' | 'email_received' | 'meeting_held';
  occurredAt: Date;
  /** External participants only (lower-case; the workspace's own domains already removed). */
  participants: string[];
  /** More properties of the event (e.g. a meeting's duration); never a subject or a body. */
  extra?: Record<string, unknown>;
}

export interface Stored {
  /** New activities (not seen before). */
  fresh: number;
  events: number;
  unmatched: number;
}

/**
 * Synced activity into the service's own events, as the push endpoint does it
 * (core-api/integrations/activities.ts), in ONE transaction:
 * 1. the activity ids are recorded in integration_activities; only those not seen before go on,
 *    so a re-sync, a resync after an expired cursor or an overlap between a full listing and the
 *    history stores nothing twice;
 * 2. each participant resolves to customers of the workspace: the customer of a contact with that
 *    exact address first, else the customers whose email_domain is the address's domain (trashed
 *    customers never);
 * 3. one event per new activity and distinct customer goes to event_outbox (surface
 *    `integration`), which the processors relay into the event stream and csp.events;
 * 4. the integration's counters (activities, unmatched_activities): an activity with external
 *    participants that match no customer is unmatched; one with none (internal mail) is neither.
 * `also` runs in the same transaction (the calendar's pending meetings).
 * The event's properties: activity_id, integration, participants (external addresses) and `extra`;
 * never a subject, a snippet or a body.
 */
export async function storeSynced(
  sql: Sql,
  tenantId: string,
  name: string,
  activities: SyncedActivity[],
  also?: (tx: TransactionSql) => Promise<unknown>,
): Promise<Stored> {
  if (!activities.length && !also) return { fresh: 0, events: 0, unmatched: 0 };
  return (await sql.begin(async (tx) => {
    await also?.(tx);
    if (!activities.length) return { fresh: 0, events: 0, unmatched: 0 };
    const ids = [...new Set(activities.map((a) => a.id))];
    const fresh = await tx<Array<{ activity_id: string }>>`
      INSERT INTO integration_activities (tenant_id, name, activity_id)
      SELECT ${tenantId}, ${name}, id FROM unnest(${ids}::text[]) AS id
      ORDER BY id
      ON CONFLICT DO NOTHING
      RETURNING activity_id`;
    const isNew = new Set(fresh.map((r) => r.activity_id));
    const kept = activities.filter((a) => isNew.delete(a.id));
    const idx: number[] = [];
    const emails: string[] = [];
    kept.forEach((a, i) => {
      for (const p of a.participants) {
        idx.push(i);
        emails.push(p);
      }
    });
    const matches = idx.length
      ? await tx<Array<{ idx: number; customer_id: string }>>`
      WITH p AS (SELECT * FROM unnest(${idx}::int[], ${emails}::text[]) AS p (idx, email)),
      by_contact AS (
        SELECT DISTINCT p.idx, p.email, k.customer_id FROM p
        JOIN contacts k ON k.tenant_id = ${tenantId} AND lower(k.email) = p.email
        JOIN customers c ON c.id = k.customer_id AND c.deleted_at IS NULL
      ),
      by_domain AS (
        SELECT DISTINCT p.idx, c.id AS customer_id FROM p
        JOIN customers c ON c.tenant_id = ${tenantId} AND c.deleted_at IS NULL
          AND c.email_domain = split_part(p.email, '@', 2)
        WHERE NOT EXISTS (SELECT 1 FROM by_contact b WHERE b.idx = p.idx AND b.email = p.email)
      )
      SELECT DISTINCT idx, customer_id::text FROM (
        SELECT idx, customer_id FROM by_contact UNION ALL SELECT idx, customer_id FROM by_domain) m`
      : [];
    if (matches.length) {
      const rows = matches.map((m) => ({ a: kept[m.idx], customer: m.customer_id }));
      await tx`
        INSERT INTO event_outbox (id, tenant_id, customer_id, event_name, properties, occurred_at, surface)
        SELECT gen_uuid_v7(), ${tenantId}, r.customer_id, r.event_name, r.properties::jsonb, r.occurred_at,
          'integration'
        FROM unnest(${rows.map((r) => r.customer)}::uuid[], ${rows.map((r) => r.a.type)}::text[],
          ${rows.map((r) =>
            JSON.stringify({
              activity_id: r.a.id,
              integration: name,
              participants: r.a.participants,
              ...r.a.extra,
            }),
          )}::text[], ${rows.map((r) => r.a.occurredAt.toISOString())}::timestamptz[])
          AS r (customer_id, event_name, properties, occurred_at)`;
    }
    const matched = new Set(matches.map((m) => m.idx));
    const external = kept.filter((a) => a.participants.length).length;
    const unmatched = kept.filter((a, i) => a.participants.length && !matched.has(i)).length;
    if (external)
      await tx`
        UPDATE integrations SET activities = activities + ${external - unmatched},
          unmatched_activities = unmatched_activities + ${unmatched}, updated_at = now()
        WHERE tenant_id = ${tenantId} AND name = ${name}`;
    return { fresh: kept.length, events: matches.length, unmatched };
  })) as Stored;
}

/** Which of these provider ids were turned into events (or found internal) before: not fetched again. */
export async function seenIds(sql: Sql, tenantId: string, name: string, ids: string[]): Promise<Set<string>> {
  if (!ids.length) return new Set();
  const rows = await sql<Array<{ activity_id: string }>>`
    SELECT activity_id FROM integration_activities
    WHERE tenant_id = ${tenantId} AND name = ${name} AND activity_id = ANY(${ids}::text[])`;
  return new Set(rows.map((r) => r.activity_id));
}
