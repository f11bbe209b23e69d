import type { TransactionSql } from 'postgres';
import type { ActivityPush } from '../../schemas/core/integrations.js';
import { inTenant, type Sql } from '../pg.js';
import { fitsDateTime } from '../row-binary.js';

/** One provider activity, reduced to what becomes an event. */
export interface ActivityEvent {
  /** The provider's id: the deduplication key. */
  id: string;
  /** The event's name. */
  type: string;
  /** When it happened (ISO 8601). */
  occurredAt: string;
  /** The addresses matched to customers. */
  participants: string[];
  /** The event's properties beside activity_id, integration and participants. */
  properties?: Record<string, unknown>;
}

export interface ActivityEventsOptions {
  /**
   * What an activity without participants counts as: `unmatched` (an activity pushed or delivered
   * without a known address), or `uncounted` (internal mail or meetings, read by the sync).
   */
  withoutParticipants: 'unmatched' | 'uncounted';
}

/**
 * Provider activity into the service's own events, inside the caller's transaction (the push
 * endpoint of the custom path, the Zendesk and Intercom webhooks, the Zendesk backfill, the e-mail
 * and calendar sync):
 * 1. the activity ids are recorded (integration_activities); only the ones not seen before go on,
 *    so a provider that delivers again (a retry) stores nothing twice, and an id named twice in one
 *    call goes on once (its first activity); an activity whose time the event store cannot hold
 *    (before 1970, after 2106-02-07) is passed over;
 * 2. each participant resolves to a customer of the workspace: the customer of a contact with that
 *    e-mail address (case-insensitive) first, else the customers whose email_domain is the
 *    address's domain; trashed customers never;
 * 3. one event per new activity and distinct customer goes to event_outbox (surface
 *    `integration`), which the processors relay into the event stream and csp.events;
 * 4. the integration's counters: activities, and unmatched_activities (new ones with no customer;
 *    those without participants as `withoutParticipants` says).
 * The event is named by the activity's type; its properties are the activity id, the integration,
 * the participants and the activity's own `properties`.
 */
export async function storeActivityEvents(
  tx: TransactionSql,
  tenantId: string,
  name: string,
  activities: ActivityEvent[],
  o: ActivityEventsOptions,
): Promise<{ fresh: number; events: number; unmatched: number }> {
  // A time the event store cannot hold (a provider's placeholder date, a clock gone wrong) would be an
  // event the relay can never publish: such an activity is passed over, and found again next time.
  activities = activities.filter((a) => fitsDateTime(Date.parse(a.occurredAt)));
  if (!activities.length) return { fresh: 0, events: 0, unmatched: 0 };
  const fresh = await tx<Array<{ activity_id: string }>>`
    INSERT INTO integration_activities (tenant_id, name, activity_id)
    SELECT ${tenantId}, ${name}, id FROM unnest(${[...new Set(activities.map((a) => a.id))]}::text[]) AS id
    ORDER BY id
    ON CONFLICT DO NOTHING
    RETURNING activity_id`;
  // An id named twice in one call is new once: its first activity goes on, the others are duplicates.
  const isNew = new Set(fresh.map((r) => r.activity_id));
  const kept = activities.filter((a) => isNew.delete(a.id));
  if (!kept.length) return { fresh: 0, events: 0, unmatched: 0 };
  const idx: number[] = [];
  const emails: string[] = [];
  kept.forEach((a, i) => {
    for (const p of new Set(a.participants.map((e) => e.toLowerCase()))) {
      idx.push(i);
      emails.push(p);
    }
  });
  const matches = idx.length
    ? await tx<Array<{ idx: number; customer_id: string }>>`
      WITH p AS (SELECT * FROM unnest(${idx}::int[], ${emails}::text[]) AS p (idx, email)),
      by_contact AS (
        SELECT DISTINCT p.idx, p.email, k.customer_id FROM p
        JOIN contacts k ON ${inTenant(tenantId, 'k')} AND lower(k.email) = p.email
        JOIN customers c ON c.id = k.customer_id AND c.deleted_at IS NULL
      ),
      by_domain AS (
        SELECT DISTINCT p.idx, c.id AS customer_id FROM p
        JOIN customers c ON ${inTenant(tenantId, 'c')} AND c.deleted_at IS NULL
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
            ...r.a.properties,
          }),
        )}::text[], ${rows.map((r) => r.a.occurredAt)}::timestamptz[])
        AS r (customer_id, event_name, properties, occurred_at)`;
  }
  const matched = new Set(matches.map((m) => m.idx));
  const counted = kept
    .map((a, i) => ({ a, i }))
    .filter(({ a }) => o.withoutParticipants === 'unmatched' || a.participants.length);
  const unmatched = counted.filter(({ i }) => !matched.has(i)).length;
  if (counted.length)
    await tx`
      UPDATE integrations SET activities = activities + ${counted.length - unmatched},
        unmatched_activities = unmatched_activities + ${unmatched}, updated_at = now()
      WHERE ${inTenant(tenantId)} AND name = ${name}`;
  return { fresh: kept.length, events: matches.length, unmatched };
}

/**
 * Pushed or delivered activity (the push endpoint, the Zendesk and Intercom webhooks, the Zendesk
 * backfill) into events, in ONE transaction (storeActivityEvents). The event's properties also
 * carry the activity's subject.
 */
export async function storeActivities(
  sql: Sql,
  tenantId: string,
  name: string,
  activities: ActivityPush['activities'],
): Promise<{ received: number; duplicates: number; unmatched: number; events: number }> {
  const events: ActivityEvent[] = activities.map((a) => ({
    id: a.id,
    type: a.type,
    occurredAt: a.occurred_at,
    participants: a.participants,
    properties: { subject: a.subject ?? null },
  }));
  const r = (await sql.begin((tx) =>
    storeActivityEvents(tx, tenantId, name, events, { withoutParticipants: 'unmatched' }),
  )) as { fresh: number; events: number; unmatched: number };
  return {
    received: activities.length,
    duplicates: activities.length - r.fresh,
    unmatched: r.unmatched,
    events: r.events,
  };
}
