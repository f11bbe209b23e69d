import type { Sql } from '../pg.js';
import type { ActivityPush } from '../../schemas/core/integrations.js';

/**
 * Provider activity into the service's own events, in ONE transaction (the push endpoint of the
 * custom path, the Zendesk and Intercom webhooks, the Zendesk backfill, the e-mail and calendar sync):
 * 1. the activity ids are recorded (integration_activities); only the ones not seen before go on,
 *    so a provider that delivers again (a retry) stores nothing twice;
 * 2. each participant resolves to a customer of the workspace: the customer of a contact with that
 *    e-mail address (case-insensitive) first, else the customers whose email_domain is the
 *    address's domain; trashed customers never;
 * 3. one event per new activity and distinct customer goes to event_outbox (surface
 *    `integration`), which the processors relay into the event stream and csp.events;
 * 4. the integration's counters: activities, and unmatched_activities (new ones with no customer).
 * The generated event is named by the activity's type; its properties are the activity id, the
 * integration, the subject and the participants.
 */
export async function storeActivities(
  sql: Sql,
  tenantId: string,
  name: string,
  activities: ActivityPush['activities'],
): Promise<{ received: number; duplicates: number; unmatched: number; events: number }> {
  const idx: number[] = [];
  const emails: string[] = [];
  activities.forEach((a, i) => {
    for (const p of new Set(a.participants.map((e) => e.toLowerCase()))) {
      idx.push(i);
      emails.push(p);
    }
  });
  return sql.begin(async (tx) => {
    const fresh = await tx<Array<{ activity_id: string }>>`
      INSERT INTO integration_activities (tenant_id, name, activity_id)
      SELECT ${tenantId}, ${name}, id FROM unnest(${activities.map((a) => a.id)}::text[]) AS id
      ORDER BY id
      ON CONFLICT DO NOTHING
      RETURNING activity_id`;
    const isNew = new Set(fresh.map((r) => r.activity_id));
    const kept = activities.map((a, i) => ({ a, i })).filter(({ a }) => isNew.has(a.id));
    if (!kept.length) return { received: activities.length, duplicates: activities.length, unmatched: 0, events: 0 };
    const keep = new Set(kept.map((k) => k.i));
    const pIdx = idx.filter((i) => keep.has(i));
    const pEmail = emails.filter((_, j) => keep.has(idx[j]));
    const matches = await tx<Array<{ idx: number; customer_id: string }>>`
      WITH p AS (SELECT * FROM unnest(${pIdx}::int[], ${pEmail}::text[]) AS p (idx, email)),
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
        SELECT idx, customer_id FROM by_contact UNION ALL SELECT idx, customer_id FROM by_domain) m`;
    const rows = matches.map((m) => ({ a: activities[m.idx], customer: m.customer_id }));
    if (rows.length) {
      await tx`
        INSERT INTO event_outbox (id, tenant_id, customer_id, event_name, properties, occurred_at, surface)
        SELECT gen_uuid_v7(), ${tenantId}, r.customer_id, r.event_name, r.properties::jsonb, r.occurred_at,
          'integration'
        FROM unnest(${rows.map((r) => r.customer)}::uuid[], ${rows.map((r) => r.a.type)}::text[],
          ${rows.map((r) =>
            JSON.stringify({
              activity_id: r.a.id,
              integration: name,
              subject: r.a.subject ?? null,
              participants: r.a.participants,
            }),
          )}::text[], ${rows.map((r) => r.a.occurred_at)}::timestamptz[])
          AS r (customer_id, event_name, properties, occurred_at)`;
    }
    const matched = new Set(matches.map((m) => m.idx));
    const unmatched = kept.filter(({ i }) => !matched.has(i)).length;
    await tx`
      UPDATE integrations SET activities = activities + ${kept.length - unmatched},
        unmatched_activities = unmatched_activities + ${unmatched}, updated_at = now()
      WHERE tenant_id = ${tenantId} AND name = ${name}`;
    return {
      received: activities.length,
      duplicates: activities.length - kept.length,
      unmatched,
      events: rows.length,
    };
  }) as Promise<{ received: number; duplicates: number; unmatched: number; events: number }>;
}
