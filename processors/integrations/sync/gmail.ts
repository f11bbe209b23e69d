import { externalParticipants, headerAddresses } from './addresses.js';
import { mapLimit } from '../../../lib/map-limit.js';
import { SyncError } from './http.js';
import { type Connector, ownAddress, type SyncRun, store } from './run.js';
import { seenIds, type SyncedActivity } from './store.js';

/**
 * Gmail (https://developers.google.com/gmail/api/reference/rest): the cursor is the mailbox's
 * historyId.
 * - First sync (and resync): users.getProfile gives the address and the current historyId, taken
 *   BEFORE the listing so that nothing arriving meanwhile falls between the two; users.messages.list
 *   with `q=after:<epoch s>` (the lookback), page by page (nextPageToken).
 * - Then users.history.list from the stored historyId (historyTypes=messageAdded, page by page),
 *   whose last page's historyId is the next cursor. A 404 means the startHistoryId is too old (Gmail
 *   keeps about a week of history): a resync from getProfile follows, duplicates dropped by id.
 * - Each message not seen before: users.messages.get?format=metadata with only the From, To, Cc and
 *   Date headers, and `fields` without the snippet (the subject, the snippet and the body are never
 *   asked for or kept); label SENT → email_sent, otherwise email_received; drafts, spam and chats
 *   skipped; timestamped by the Date header (internalDate when it cannot be read).
 */

const SKIPPED_LABELS = ['DRAFT', 'SPAM', 'CHAT'];
const HEADERS = ['From', 'To', 'Cc', 'Date'];

const base = (run: SyncRun) => `${run.apiUrl}/gmail/v1/users/me`;

export const syncGmail: Connector = async (run) => {
  ownAddress(run, run.cursor.account);
  if (typeof run.cursor.historyId === 'string') {
    try {
      return await incremental(run, run.cursor.historyId);
    } catch (err) {
      if ((err as SyncError).code !== 'SYNC_CURSOR_EXPIRED') throw err;
      run.counts.resyncs++;
      run.log.info({ tenantId: run.tenantId, name: run.name }, 'gmail history expired; resyncing');
    }
  }
  await full(run);
};

async function full(run: SyncRun): Promise<void> {
  const profile = await run.api.get(`${base(run)}/profile`);
  if (profile.status !== 200) throw unexpected('users.getProfile', profile.status);
  ownAddress(run, profile.body.emailAddress);
  const after = Math.floor((run.now - run.lookbackMs) / 1000);
  let pageToken: string | undefined;
  do {
    const q = new URLSearchParams({ q: `after:${after}`, maxResults: '100' });
    if (pageToken) q.set('pageToken', pageToken);
    const r = await run.api.get(`${base(run)}/messages?${q}`);
    if (r.status !== 200) throw unexpected('users.messages.list', r.status);
    const ids = ((r.body.messages ?? []) as Array<{ id: string }>).map((m) => m.id);
    await ingest(run, ids);
    pageToken = r.body.nextPageToken;
  } while (pageToken);
  run.cursor.historyId = String(profile.body.historyId);
}

async function incremental(run: SyncRun, startHistoryId: string): Promise<void> {
  let pageToken: string | undefined;
  let historyId = startHistoryId;
  do {
    const q = new URLSearchParams({ startHistoryId, historyTypes: 'messageAdded', maxResults: '500' });
    if (pageToken) q.set('pageToken', pageToken);
    const r = await run.api.get(`${base(run)}/history?${q}`);
    if (r.status === 404) throw new SyncError('SYNC_CURSOR_EXPIRED', 'the startHistoryId is no longer valid');
    if (r.status !== 200) throw unexpected('users.history.list', r.status);
    const ids: string[] = [];
    for (const h of (r.body.history ?? []) as Array<{
      messagesAdded?: Array<{ message: { id: string; labelIds?: string[] } }>;
    }>)
      for (const a of h.messagesAdded ?? [])
        if (!a.message.labelIds?.some((l) => SKIPPED_LABELS.includes(l))) ids.push(a.message.id);
    await ingest(run, [...new Set(ids)]);
    if (r.body.historyId) historyId = String(r.body.historyId);
    pageToken = r.body.nextPageToken;
  } while (pageToken);
  run.cursor.historyId = historyId;
}

interface GmailMessage {
  id: string;
  labelIds?: string[];
  internalDate?: string;
  payload?: { headers?: Array<{ name: string; value: string }> };
}

/** The messages of one page not seen before: fetched (metadata only), stored in one transaction. */
async function ingest(run: SyncRun, ids: string[]): Promise<void> {
  const seen = await seenIds(run.sql, run.tenantId, run.name, ids);
  const todo = ids.filter((id) => !seen.has(id));
  const since = run.now - run.lookbackMs;
  const got = await mapLimit(todo, run.fetchConcurrency, async (id) => {
    // `fields` (Google's partial response) leaves the snippet out of the answer too.
    const q = new URLSearchParams({ format: 'metadata', fields: 'id,labelIds,internalDate,payload/headers' });
    for (const h of HEADERS) q.append('metadataHeaders', h);
    const r = await run.api.get(`${base(run)}/messages/${encodeURIComponent(id)}?${q}`);
    if (r.status === 404) return undefined; // deleted since it was listed
    if (r.status !== 200) throw unexpected('users.messages.get', r.status);
    return r.body as GmailMessage;
  });
  const activities: SyncedActivity[] = [];
  for (const m of got) {
    if (!m) continue;
    run.counts.fetched++;
    const labels = m.labelIds ?? [];
    if (labels.some((l) => SKIPPED_LABELS.includes(l))) continue;
    const header = (name: string) =>
      m.payload?.headers?.filter((h) => h.name.toLowerCase() === name.toLowerCase()).map((h) => h.value) ?? [];
    const dated = Date.parse(header('Date')[0] ?? '');
    const at = Number.isNaN(dated) ? Number(m.internalDate ?? run.now) : dated;
    const participants = externalParticipants(
      ['From', 'To', 'Cc'].flatMap((h) => header(h).flatMap(headerAddresses)),
      run.ownDomains,
    );
    activities.push({
      id: m.id,
      type: labels.includes('SENT') ? 'email_sent' : 'email_received',
      occurredAt: new Date(at),
      // Older than the lookback (a message listed late): recorded, so never fetched again, not counted.
      participants: at < since ? [] : participants,
    });
  }
  await store(run, activities);
}

const unexpected = (call: string, status: number) =>
  new SyncError('SYNC_UNAVAILABLE', `gmail ${call} answered HTTP ${status}`);
