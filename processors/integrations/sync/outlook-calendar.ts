import { SyncError } from './http.js';
import { applyChanges, type CalendarChange, produceEnded } from './meetings.js';
import { deltaExpired, GRAPH_PREFER, graphAccount } from './outlook-mail.js';
import type { Connector } from './run.js';

/**
 * Outlook calendar through Microsoft Graph (https://learn.microsoft.com/graph/api/event-delta):
 * GET /me/calendarView/delta over a window, `@odata.deltaLink` kept in the cursor with the window.
 * - A calendarView delta only ever reports events inside the window of its first request, so the
 *   window runs from the lookback to WINDOW_AHEAD_MS ahead and a new round (a new window) starts
 *   when it was opened more than RENEW_AFTER_MS ago; duplicates are dropped by event id.
 * - Pages are followed by `@odata.nextLink`; a 410 or syncStateNotFound starts a new round.
 * - `@removed` and `isCancelled` events are cancellations; all-day events are not meetings;
 *   attendees who declined and resources (rooms) do not count. Times are asked for in UTC
 *   (`Prefer: outlook.timezone="UTC"`).
 */

const DAY_MS = 24 * 3600_000;
const WINDOW_AHEAD_MS = 90 * DAY_MS;
const RENEW_AFTER_MS = 30 * DAY_MS;
const PREFER = { prefer: `${GRAPH_PREFER.prefer}, outlook.timezone="UTC"` };

interface GraphAttendee {
  type?: string;
  status?: { response?: string };
  emailAddress?: { address?: string };
}
interface GraphEvent {
  id: string;
  '@removed'?: unknown;
  isCancelled?: boolean;
  isAllDay?: boolean;
  start?: { dateTime?: string; timeZone?: string };
  end?: { dateTime?: string; timeZone?: string };
  attendees?: GraphAttendee[];
  organizer?: { emailAddress?: { address?: string } };
}

export const syncOutlookCalendar: Connector = async (run) => {
  await graphAccount(run);
  const opened = typeof run.cursor.windowOpenedAt === 'number' ? run.cursor.windowOpenedAt : 0;
  const stale = run.now - opened > RENEW_AFTER_MS;
  const first = () => {
    const q = new URLSearchParams({
      startDateTime: new Date(run.now - run.lookbackMs).toISOString(),
      endDateTime: new Date(run.now + WINDOW_AHEAD_MS).toISOString(),
    });
    return `${run.apiUrl}/me/calendarView/delta?${q}`;
  };
  let url = typeof run.cursor.deltaLink === 'string' && !stale ? run.cursor.deltaLink : first();
  let fresh = url !== run.cursor.deltaLink;
  for (;;) {
    const r = await run.api.get(url, PREFER);
    if (deltaExpired(r.status, r.body)) {
      if (fresh) throw new SyncError('SYNC_UNAVAILABLE', 'graph refused a new calendarView delta round');
      run.log.info({ tenantId: run.tenantId, name: run.name }, 'graph calendar delta expired; resyncing');
      run.counts.resyncs++;
      url = first();
      fresh = true;
      continue;
    }
    if (r.status !== 200) throw new SyncError('SYNC_UNAVAILABLE', `graph calendarView delta answered HTTP ${r.status}`);
    await applyChanges(run, ((r.body.value ?? []) as GraphEvent[]).map(change));
    if (r.body['@odata.nextLink']) {
      url = r.body['@odata.nextLink'];
      continue;
    }
    if (!r.body['@odata.deltaLink'])
      throw new SyncError('SYNC_UNAVAILABLE', 'graph calendarView delta answered neither nextLink nor deltaLink');
    run.cursor.deltaLink = r.body['@odata.deltaLink'];
    if (fresh) run.cursor.windowOpenedAt = run.now;
    break;
  }
  await produceEnded(run);
};

/** Graph's dateTime has no zone ("2026-11-20T10:00:00.0000000"); it is in `timeZone`, UTC as asked. */
function utc(t: { dateTime?: string; timeZone?: string } | undefined): Date | undefined {
  if (!t?.dateTime) return undefined;
  const zoned = /[zZ]|[+-]\d\d:\d\d$/.test(t.dateTime) ? t.dateTime : `${t.dateTime}Z`;
  const d = new Date(zoned);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

function change(e: GraphEvent): CalendarChange {
  const attendees = (e.attendees ?? [])
    .filter((a) => a.type !== 'resource' && a.status?.response !== 'declined')
    .map((a) => a.emailAddress?.address)
    .filter((a): a is string => typeof a === 'string');
  const organizer = e.organizer?.emailAddress?.address;
  if (organizer) attendees.push(organizer);
  return {
    id: e.id,
    cancelled: e['@removed'] !== undefined || e.isCancelled === true,
    start: e.isAllDay ? undefined : utc(e.start),
    end: e.isAllDay ? undefined : utc(e.end),
    attendees,
  };
}
