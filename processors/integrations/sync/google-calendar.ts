import { SyncError } from './http.js';
import { applyChanges, type CalendarChange, produceEnded } from './meetings.js';
import { type Connector, ownAddress, type SyncRun } from './run.js';

/**
 * Google Calendar (https://developers.google.com/calendar/api/v3/reference/events/list), the
 * primary calendar: the cursor is the syncToken.
 * - First sync (and resync): events.list with `singleEvents=true` (each occurrence of a recurring
 *   meeting its own event) and `timeMin` = the lookback, page by page (nextPageToken); the last
 *   page's nextSyncToken is kept.
 * - Then events.list with the syncToken (and the same singleEvents): what changed, cancelled
 *   events included (status `cancelled`). A 410 (fullSyncRequired) means the token expired: a
 *   full sync follows, duplicates dropped by event id.
 * - Attendees who declined and resources (rooms) do not count; all-day events are not meetings.
 * The calendar's own address (its id, GET /calendars/primary) is read once and kept.
 */

interface GoogleEvent {
  id: string;
  status?: string;
  start?: { dateTime?: string; date?: string };
  end?: { dateTime?: string; date?: string };
  attendees?: Array<{ email?: string; responseStatus?: string; resource?: boolean; self?: boolean }>;
  organizer?: { email?: string; self?: boolean };
}

const events = (run: SyncRun) => `${run.apiUrl}/calendars/primary/events`;
/** Google's partial response: the times and the people only, never the title, description or location. */
const FIELDS =
  'nextPageToken,nextSyncToken,items(id,status,start,end,attendees(email,responseStatus,resource),organizer(email))';

export const syncGoogleCalendar: Connector = async (run) => {
  if (typeof run.cursor.account !== 'string') {
    const cal = await run.api.get(`${run.apiUrl}/calendars/primary`);
    if (cal.status !== 200) throw unexpected('calendars.get', cal.status);
    ownAddress(run, cal.body.id);
  } else ownAddress(run, run.cursor.account);
  if (typeof run.cursor.syncToken === 'string') {
    try {
      await list(run, run.cursor.syncToken);
      return await produceEnded(run);
    } catch (err) {
      if ((err as SyncError).code !== 'SYNC_CURSOR_EXPIRED') throw err;
      run.counts.resyncs++;
      run.log.info({ tenantId: run.tenantId, name: run.name }, 'google calendar syncToken expired; resyncing');
    }
  }
  await list(run);
  await produceEnded(run);
};

async function list(run: SyncRun, syncToken?: string): Promise<void> {
  let pageToken: string | undefined;
  for (;;) {
    const q = new URLSearchParams({ singleEvents: 'true', maxResults: '250', fields: FIELDS });
    if (syncToken) q.set('syncToken', syncToken);
    else q.set('timeMin', new Date(run.now - run.lookbackMs).toISOString());
    if (pageToken) q.set('pageToken', pageToken);
    const r = await run.api.get(`${events(run)}?${q}`);
    if (r.status === 410) throw new SyncError('SYNC_CURSOR_EXPIRED', 'the syncToken is no longer valid');
    if (r.status !== 200) throw unexpected('events.list', r.status);
    await applyChanges(run, ((r.body.items ?? []) as GoogleEvent[]).map(change));
    pageToken = r.body.nextPageToken;
    if (pageToken) continue;
    if (typeof r.body.nextSyncToken !== 'string') throw unexpected('events.list (no nextSyncToken)', r.status);
    run.cursor.syncToken = r.body.nextSyncToken;
    return;
  }
}

function change(e: GoogleEvent): CalendarChange {
  const attendees = (e.attendees ?? [])
    .filter((a) => !a.resource && a.responseStatus !== 'declined' && a.email)
    .map((a) => a.email as string);
  if (e.organizer?.email) attendees.push(e.organizer.email);
  const start = e.start?.dateTime ? new Date(e.start.dateTime) : undefined;
  const end = e.end?.dateTime ? new Date(e.end.dateTime) : undefined;
  return {
    id: e.id,
    cancelled: e.status === 'cancelled',
    start: start && !Number.isNaN(start.getTime()) ? start : undefined,
    end: end && !Number.isNaN(end.getTime()) ? end : undefined,
    attendees,
  };
}

const unexpected = (call: string, status: number) =>
  new SyncError('SYNC_UNAVAILABLE', `google calendar ${call} answered HTTP ${status}`);
