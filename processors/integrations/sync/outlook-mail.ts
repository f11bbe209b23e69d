import { externalParticipants } from './addresses.js';
import { googleReason, SyncError } from './http.js';
import { type Connector, ownAddress, type SyncRun, store } from './run.js';
import type { SyncedActivity } from './store.js';

/**
 * Outlook mail through Microsoft Graph (https://learn.microsoft.com/graph/api/message-delta): one
 * delta query per folder, Inbox (email_received) and Sent Items (email_sent), each with its own
 * `@odata.deltaLink` in the cursor.
 * - First round (and after an expired link): GET /me/mailFolders/{folder}/messages/delta with
 *   `$filter=receivedDateTime ge <lookback>` and `$select` of the addresses and dates only (never
 *   the subject, the preview or the body), pages followed by `@odata.nextLink` to the deltaLink.
 * - Then GET the stored deltaLink: only what changed. A 410, or an error code syncStateNotFound /
 *   syncStateInvalid / resyncRequired, means Graph dropped the state: the folder starts a new round
 *   (duplicates dropped by id).
 * - `Prefer: IdType="ImmutableId"`: a message keeps its id when it moves between folders, so it
 *   is deduplicated as one. Removed items (`@removed`) and drafts produce nothing.
 * The mailbox's address (GET /me: mail, else userPrincipalName) is read once and kept.
 */

const FOLDERS = [
  { folder: 'inbox', type: 'email_received' },
  { folder: 'sentitems', type: 'email_sent' },
] as const;
const SELECT = 'from,toRecipients,ccRecipients,receivedDateTime,sentDateTime,isDraft';
export const GRAPH_PREFER = { prefer: 'odata.maxpagesize=50, IdType="ImmutableId"' };
const EXPIRED_CODES = new Set(['syncstatenotfound', 'syncstateinvalid', 'resyncrequired']);

/** Whether a Graph answer says the delta state is gone. */
export const deltaExpired = (status: number, body: unknown) =>
  status === 410 || ((status === 400 || status === 404) && EXPIRED_CODES.has(googleReason(body)?.toLowerCase() ?? ''));

export async function graphAccount(run: SyncRun): Promise<void> {
  if (typeof run.cursor.account === 'string') return ownAddress(run, run.cursor.account);
  const me = await run.api.get(`${run.apiUrl}/me?$select=mail,userPrincipalName`);
  if (me.status !== 200) throw new SyncError('SYNC_UNAVAILABLE', `graph GET /me answered HTTP ${me.status}`);
  ownAddress(run, me.body.mail || me.body.userPrincipalName);
}

interface GraphRecipient {
  emailAddress?: { address?: string };
}
interface GraphMessage {
  id: string;
  '@removed'?: unknown;
  isDraft?: boolean;
  from?: GraphRecipient;
  toRecipients?: GraphRecipient[];
  ccRecipients?: GraphRecipient[];
  receivedDateTime?: string;
  sentDateTime?: string;
}

export const syncOutlookMail: Connector = async (run) => {
  await graphAccount(run);
  const links = (run.cursor.deltaLinks ?? {}) as Record<string, string>;
  for (const f of FOLDERS) {
    const since = new Date(run.now - run.lookbackMs).toISOString();
    const first = `${run.apiUrl}/me/mailFolders/${f.folder}/messages/delta?${new URLSearchParams({
      $select: SELECT,
      $filter: `receivedDateTime ge ${since}`,
    })}`;
    let url = links[f.folder] ?? first;
    let restarted = !links[f.folder];
    for (;;) {
      const r = await run.api.get(url, GRAPH_PREFER);
      if (deltaExpired(r.status, r.body)) {
        if (restarted) throw new SyncError('SYNC_UNAVAILABLE', `graph refused a new ${f.folder} delta round`);
        run.log.info({ tenantId: run.tenantId, name: run.name, folder: f.folder }, 'graph delta expired; resyncing');
        run.counts.resyncs++;
        restarted = true;
        url = first;
        continue;
      }
      if (r.status !== 200)
        throw new SyncError('SYNC_UNAVAILABLE', `graph ${f.folder} messages delta answered HTTP ${r.status}`);
      await ingest(run, f.type, (r.body.value ?? []) as GraphMessage[]);
      if (r.body['@odata.nextLink']) {
        url = r.body['@odata.nextLink'];
        continue;
      }
      if (!r.body['@odata.deltaLink'])
        throw new SyncError('SYNC_UNAVAILABLE', `graph ${f.folder} delta answered neither nextLink nor deltaLink`);
      links[f.folder] = r.body['@odata.deltaLink'];
      run.cursor.deltaLinks = links;
      break;
    }
  }
};

async function ingest(run: SyncRun, type: SyncedActivity['type'], messages: GraphMessage[]): Promise<void> {
  const since = run.now - run.lookbackMs;
  const activities: SyncedActivity[] = [];
  for (const m of messages) {
    if (m['@removed'] !== undefined || m.isDraft) continue;
    run.counts.fetched++;
    const at = Date.parse((type === 'email_sent' ? m.sentDateTime : m.receivedDateTime) ?? m.receivedDateTime ?? '');
    const when = Number.isNaN(at) ? run.now : at;
    const addresses = [m.from, ...(m.toRecipients ?? []), ...(m.ccRecipients ?? [])]
      .map((x) => x?.emailAddress?.address)
      .filter((a): a is string => typeof a === 'string');
    activities.push({
      id: m.id,
      type,
      occurredAt: new Date(when),
      participants: when < since ? [] : externalParticipants(addresses, run.ownDomains),
    });
  }
  await store(run, activities);
}
