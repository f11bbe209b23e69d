import type { TransactionSql } from 'postgres';
import { type ActivityEvent, storeActivityEvents } from '../../../lib/integrations/activities.js';
import { inTenant, type Sql } from '../../../lib/pg.js';

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
 * (storeActivityEvents), in ONE transaction: a re-sync, a resync after an expired cursor or an
 * overlap between a full listing and the history stores nothing twice (an id listed twice in one
 * call counts once). An activity with external participants that match no customer is unmatched;
 * one with none (internal mail) is neither. `also` runs in the same transaction (the calendar's
 * pending meetings). The event's properties: activity_id, integration, participants (external
 * addresses) and `extra`; never a subject, a snippet or a body.
 */
export async function storeSynced(
  sql: Sql,
  tenantId: string,
  name: string,
  activities: SyncedActivity[],
  also?: (tx: TransactionSql) => Promise<unknown>,
): Promise<Stored> {
  if (!activities.length && !also) return { fresh: 0, events: 0, unmatched: 0 };
  const ids = new Set<string>();
  const events: ActivityEvent[] = [];
  for (const a of activities) {
    if (ids.has(a.id)) continue;
    ids.add(a.id);
    events.push({
      id: a.id,
      type: a.type,
      occurredAt: a.occurredAt.toISOString(),
      participants: a.participants,
      properties: a.extra,
    });
  }
  return (await sql.begin(async (tx) => {
    await also?.(tx);
    return storeActivityEvents(tx, tenantId, name, events, { withoutParticipants: 'uncounted' });
  })) as Stored;
}

/** Which of these provider ids were turned into events (or found internal) before: not fetched again. */
export async function seenIds(sql: Sql, tenantId: string, name: string, ids: string[]): Promise<Set<string>> {
  if (!ids.length) return new Set();
  const rows = await sql<Array<{ activity_id: string }>>`
    SELECT activity_id FROM integration_activities
    WHERE ${inTenant(tenantId)} AND name = ${name} AND activity_id = ANY(${ids}::text[])`;
  return new Set(rows.map((r) => r.activity_id));
}
