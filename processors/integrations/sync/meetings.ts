import { inTenant } from '../../../lib/pg.js';
import { externalParticipants } from './addresses.js';
import type { SyncRun } from './run.js';
import { type SyncedActivity, storeSynced } from './store.js';

/** A calendar event as a provider reported it (created, changed, moved or cancelled). */
export interface CalendarChange {
  id: string;
  /** Cancelled or deleted: whatever was pending for it is dropped, nothing is produced. */
  cancelled: boolean;
  /** Undefined for an all-day event (no time: not a meeting). */
  start?: Date;
  end?: Date;
  /** Attendees and organizer who did not decline, resources excluded. */
  attendees: string[];
}

/**
 * meeting_held from calendar changes, one per (event id, customer), once the meeting has ended:
 * - an event that has ended (and started within the lookback) with at least one external attendee
 *   is stored now, timestamped at its start, with its duration;
 * - one that has not ended is kept in integration_pending_meetings (a later change replaces the
 *   row: a moved meeting is counted once, at its final time; a cancelled one deletes it) and is
 *   stored by the first sync after its end (`due`);
 * - the event id is the deduplication key: a change to a meeting already produced, or the same
 *   event listed again by a resync, stores nothing.
 * Each page is applied in one transaction with its events.
 */
export async function applyChanges(run: SyncRun, changes: CalendarChange[]): Promise<void> {
  const since = run.now - run.lookbackMs;
  const held: SyncedActivity[] = [];
  const drop: string[] = [];
  const pending: Array<{ id: string; start: Date; end: Date; attendees: string[] }> = [];
  for (const c of changes) {
    run.counts.fetched++;
    const attendees = externalParticipants(c.attendees, run.ownDomains);
    if (c.cancelled || !c.start || !c.end || !attendees.length || c.start.getTime() < since) {
      drop.push(c.id);
      continue;
    }
    if (c.end.getTime() <= run.now) {
      drop.push(c.id);
      held.push(meeting(c.id, c.start, c.end, attendees));
    } else pending.push({ id: c.id, start: c.start, end: c.end, attendees });
  }
  const r = await storeSynced(run.sql, run.tenantId, run.name, held, async (tx) => {
    if (drop.length)
      await tx`
        DELETE FROM integration_pending_meetings
        WHERE ${inTenant(run.tenantId)} AND name = ${run.name} AND event_id = ANY(${drop}::text[])`;
    if (pending.length)
      await tx`
        INSERT INTO integration_pending_meetings (tenant_id, name, event_id, starts_at, ends_at, attendees)
        SELECT ${run.tenantId}, ${run.name}, p.id, p.starts_at, p.ends_at, string_to_array(p.attendees, ' ')
        FROM unnest(${pending.map((p) => p.id)}::text[],
          ${pending.map((p) => p.start.toISOString())}::timestamptz[],
          ${pending.map((p) => p.end.toISOString())}::timestamptz[],
          ${pending.map((p) => p.attendees.join(' '))}::text[])
          AS p (id, starts_at, ends_at, attendees)
        ORDER BY p.id
        ON CONFLICT (tenant_id, name, event_id) DO UPDATE SET starts_at = EXCLUDED.starts_at,
          ends_at = EXCLUDED.ends_at, attendees = EXCLUDED.attendees`;
  });
  run.counts.events += r.events;
  run.counts.unmatched += r.unmatched;
}

/** The pending meetings that have ended by the run's start: produced, and forgotten in the same transaction. */
export async function produceEnded(run: SyncRun): Promise<void> {
  const rows = await run.sql<Array<{ event_id: string; starts_at: Date; ends_at: Date; attendees: string[] }>>`
    SELECT event_id, starts_at, ends_at, attendees FROM integration_pending_meetings
    WHERE ${inTenant(run.tenantId)} AND name = ${run.name} AND ends_at <= ${new Date(run.now)}
    ORDER BY ends_at LIMIT 1000`;
  if (!rows.length) return;
  const held = rows.map((p) => meeting(p.event_id, p.starts_at, p.ends_at, p.attendees));
  const ids = rows.map((p) => p.event_id);
  const r = await storeSynced(run.sql, run.tenantId, run.name, held, async (tx) => {
    await tx`
      DELETE FROM integration_pending_meetings
      WHERE ${inTenant(run.tenantId)} AND name = ${run.name} AND event_id = ANY(${ids}::text[])`;
  });
  run.counts.events += r.events;
  run.counts.unmatched += r.unmatched;
}

const meeting = (id: string, start: Date, end: Date, attendees: string[]): SyncedActivity => ({
  id,
  type: 'meeting_held',
  occurredAt: start,
  participants: attendees,
  extra: { duration_minutes: Math.round((end.getTime() - start.getTime()) / 60_000) },
});
