import { randomBytes } from 'node:crypto';
import { type FakeAnswer, type FakeRequest, ScopedOAuth } from './http.js';

/**
 * Google as its references describe it, on loopback: OAuth 2.0 for web server apps
 * (developers.google.com/identity/protocols/oauth2/web-server: `/o/oauth2/v2/auth`, the `/token`
 * endpoint with PKCE, a refresh token only with `access_type=offline`, an id_token with the
 * `email` claim, `/revoke`), the Gmail API v1 (developers.google.com/gmail/api/reference/rest:
 * users.getProfile, users.messages.list with `q=after:<epoch s>` and nextPageToken,
 * users.messages.get with format=metadata and metadataHeaders, users.history.list with
 * startHistoryId, historyTypes and nextPageToken, 404 on a startHistoryId too old,
 * users.messages.send with a base64url RFC 5322 message in `raw` and the gmail.send scope) and the
 * Calendar API v3 (developers.google.com/calendar/api/v3/reference/events/list: calendars.get,
 * events.list with singleEvents, timeMin (on the end time), pageToken / nextPageToken and
 * syncToken / nextSyncToken on the last page only, cancelled events in incremental answers, 410
 * fullSyncRequired for an expired token). Errors use Google's JSON error shape; an access token
 * that is not live answers 401 (`WWW-Authenticate: Bearer … error="invalid_token"`), a token
 * without the API's scope 403 ACCESS_TOKEN_SCOPE_INSUFFICIENT (`error="insufficient_scope"`).
 * Partial responses (`fields`) are honoured. Messages and events carry a subject, a snippet and a
 * description, so a test can check that none of them is asked for or kept.
 */

export const GMAIL_READ = 'https://www.googleapis.com/auth/gmail.readonly';
export const GMAIL_SEND = 'https://www.googleapis.com/auth/gmail.send';
export const CALENDAR_READ = 'https://www.googleapis.com/auth/calendar.readonly';

export interface GmailMessageInput {
  from: string;
  to?: string[];
  cc?: string[];
  date: Date;
  labels?: string[];
  subject?: string;
  snippet?: string;
}

export interface CalendarEventInput {
  id?: string;
  start: Date;
  end: Date;
  attendees: Array<string | { email: string; responseStatus?: string; resource?: boolean }>;
  organizer?: string;
  summary?: string;
  description?: string;
  allDay?: boolean;
}

export interface FakeGoogle {
  url: string;
  /** The mailbox / calendar owner. */
  account: string;
  /** The INTEGRATION_<NAME>_* variables of gmail or google_calendar pointing here. */
  env(name: 'gmail' | 'google_calendar'): Record<string, string>;
  /** Scopes the user does not grant at the consent screen (the token answer's `scope` lacks them). */
  withhold: Set<string>;
  /** Every API request (not OAuth) with the answer's status. */
  calls: Array<{ path: string; query: string; status: number; at: number }>;
  refreshes: number;
  /** The next API requests whose path starts with `prefix` get `answer` (before any other check), `times` times. */
  fail(prefix: string, answer: FakeAnswer, times?: number): void;
  /** Like `fail`, once, for the request after the next `skip` ones under `prefix` (a page amid a listing). */
  failLater(prefix: string, skip: number, answer: FakeAnswer): void;
  /** Access tokens issued so far stop working (as when Google revokes them). */
  invalidateAccessTokens(): void;
  /** Items per page at most, whatever maxResults asks (to make pages in tests). */
  pageSize: number;
  /** The messages users.messages.send accepted, decoded from `raw`. */
  sent: Array<{ id: string; mail: string }>;
  gmail: {
    /** A message arrives (or is sent): a new historyId with its messageAdded record. */
    add(m: GmailMessageInput): string;
    /** Gmail forgets the history up to now: a startHistoryId older than the current one answers 404. */
    expireHistory(): void;
    historyId(): number;
  };
  calendar: {
    /** Creates or changes (moves, re-invites) an event; its id. */
    put(e: CalendarEventInput): string;
    cancel(id: string): void;
    /** The sync tokens issued so far answer 410 fullSyncRequired. */
    expireSyncTokens(): void;
  };
}

const googleError = (code: number, status: string, message: string, reason: string, extra: object = {}) => ({
  error: { code, message, errors: [{ message, domain: 'global', reason }], status, ...extra },
});

/**
 * Google's partial response (`fields`, developers.google.com/workspace/gmail/api/guides/performance):
 * a comma-separated list of paths (`payload/headers`) and sub-selections (`items(id,start)`),
 * applied to arrays element by element.
 */
export function partial(value: unknown, fields: string | null): unknown {
  if (!fields) return value;
  const split = (s: string) => {
    const out: string[] = [];
    let depth = 0;
    let cur = '';
    for (const ch of s) {
      if (ch === ',' && depth === 0) {
        out.push(cur);
        cur = '';
        continue;
      }
      if (ch === '(') depth++;
      if (ch === ')') depth--;
      cur += ch;
    }
    if (cur) out.push(cur);
    return out.map((x) => x.trim()).filter(Boolean);
  };
  const pick = (v: unknown, mask: string): unknown => {
    if (Array.isArray(v)) return v.map((x) => pick(x, mask));
    if (typeof v !== 'object' || v === null) return v;
    const o = v as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const f of split(mask)) {
      const sub = /^([^(/]+)\((.*)\)$/.exec(f);
      const [key, rest] = sub ? [sub[1], sub[2]] : [f.split('/')[0], f.split('/').slice(1).join('/')];
      if (!(key in o)) continue;
      const picked = rest ? pick(o[key], rest) : o[key];
      out[key] =
        rest && typeof out[key] === 'object' && out[key] !== null && !Array.isArray(out[key])
          ? { ...(out[key] as object), ...(picked as object) }
          : picked;
    }
    return out;
  };
  return pick(value, fields);
}

interface Message {
  id: string;
  threadId: string;
  labelIds: string[];
  internalDate: number;
  historyId: number;
  headers: Array<{ name: string; value: string }>;
  snippet: string;
}

interface CalEvent {
  id: string;
  status: 'confirmed' | 'cancelled';
  seq: number;
  input: CalendarEventInput;
  updated: string;
}

export async function startFakeGoogle(
  t: { teardown(f: () => unknown): void },
  account = 'me@vendor.test',
): Promise<FakeGoogle> {
  const f = new ScopedOAuth<FakeGoogle['calls'][number]>();
  const { refreshTokens } = f;
  const messages = new Map<string, Message>();
  const history: Array<{
    id: number;
    messagesAdded: Array<{ message: { id: string; threadId: string; labelIds: string[] } }>;
  }> = [];
  let historyId = 4_000_000 + Math.floor(Math.random() * 1000);
  let oldestHistory = 0;
  const events = new Map<string, CalEvent>();
  let calSeq = 0;
  const syncTokens = new Map<string, number>();
  const sent: FakeGoogle['sent'] = [];
  const rand = (n = 12) => randomBytes(n).toString('hex');
  const idToken = () =>
    [
      Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT' })).toString('base64url'),
      Buffer.from(
        JSON.stringify({ iss: 'https://accounts.google.com', email: account, email_verified: true, sub: '1098' }),
      ).toString('base64url'),
      rand(16),
    ].join('.');
  const issue = (scope: string) => f.issue(`ya29.${rand()}`, scope);

  function oauth(r: FakeRequest): FakeAnswer | undefined {
    if (r.path === '/o/oauth2/v2/auth') return f.approve(r, `4/0${rand()}`);
    if (r.path === '/token') {
      const bad = (description: string) => ({
        status: 400,
        body: { error: 'invalid_grant', error_description: description },
      });
      if (r.body.client_id !== 'google-client.apps.googleusercontent.com' || r.body.client_secret !== 'google-secret')
        return { status: 401, body: { error: 'invalid_client', error_description: 'Unauthorized' } };
      if (r.body.grant_type === 'authorization_code') {
        const c = f.redeem(r.body);
        if (c === 'invalid_code') return bad('Bad Request');
        if (c === 'invalid_verifier') return bad('Invalid code verifier.');
        const refresh = `1//0${rand()}`;
        if (c.offline) refreshTokens.set(refresh, c.scope);
        return {
          status: 200,
          body: {
            access_token: issue(c.scope),
            expires_in: 3599,
            ...(c.offline ? { refresh_token: refresh } : {}),
            scope: c.scope,
            token_type: 'Bearer',
            id_token: idToken(),
          },
        };
      }
      if (r.body.grant_type === 'refresh_token') {
        const scope = refreshTokens.get(r.body.refresh_token);
        if (scope === undefined) return bad('Token has been expired or revoked.');
        f.refreshes++;
        // Google keeps the refresh token: no new one in the answer.
        return { status: 200, body: { access_token: issue(scope), expires_in: 3599, scope, token_type: 'Bearer' } };
      }
      return { status: 400, body: { error: 'unsupported_grant_type' } };
    }
    if (r.path === '/revoke') {
      f.revoke(r.body.token);
      return { status: 200, body: {} };
    }
    return undefined;
  }

  /** The token check of every API call: 401 when not live, 403 without the scope. */
  function authorize(r: FakeRequest, scope: string, service: string): FakeAnswer | undefined {
    const refusal = f.refusal(r.token, scope);
    if (refusal === 'invalid_token')
      return {
        status: 401,
        headers: { 'www-authenticate': 'Bearer realm="https://accounts.google.com/", error="invalid_token"' },
        body: googleError(
          401,
          'UNAUTHENTICATED',
          'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other ' +
            'valid authentication credential.',
          'authError',
        ),
      };
    if (refusal === 'insufficient_scope')
      return {
        status: 403,
        headers: {
          'www-authenticate': `Bearer realm="https://accounts.google.com/", error="insufficient_scope", scope="${scope}"`,
        },
        body: googleError(
          403,
          'PERMISSION_DENIED',
          'Request had insufficient authentication scopes.',
          'insufficientPermissions',
          {
            details: [
              {
                '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
                reason: 'ACCESS_TOKEN_SCOPE_INSUFFICIENT',
                domain: 'googleapis.com',
                metadata: { service },
              },
            ],
          },
        ),
      };
    return undefined;
  }

  const page = <T>(items: T[], r: FakeRequest, max: number) => {
    const size = Math.min(Number(r.query.get('maxResults') ?? max) || max, f.pageSize);
    const from = Number(r.query.get('pageToken') ?? 0);
    const slice = items.slice(from, from + size);
    return { slice, next: from + size < items.length ? String(from + size) : undefined };
  };

  /** users.messages.send: `{raw}`, the message base64url-encoded; answers the new message's ids and labels. */
  function send(r: FakeRequest): FakeAnswer {
    const denied = authorize(r, GMAIL_SEND, 'gmail.googleapis.com');
    if (denied) return denied;
    const mail = typeof r.body.raw === 'string' ? Buffer.from(r.body.raw, 'base64url').toString() : '';
    if (!mail)
      return {
        status: 400,
        body: googleError(
          400,
          'INVALID_ARGUMENT',
          "'raw' RFC822 payload message string or uploading message via " + '/upload/* URL required',
          'invalidArgument',
        ),
      };
    if (!/^To: \S/im.test(mail.split('\r\n\r\n')[0]))
      return {
        status: 400,
        body: googleError(400, 'INVALID_ARGUMENT', 'Recipient address required', 'invalidArgument'),
      };
    const id = rand(8);
    sent.push({ id, mail });
    return { status: 200, body: { id, threadId: id, labelIds: ['SENT'] } };
  }

  function gmail(r: FakeRequest): FakeAnswer {
    const p = r.path.replace('/gmail/v1/users/me', '');
    if (p === '/messages/send' && r.method === 'POST') return send(r);
    const denied = authorize(r, GMAIL_READ, 'gmail.googleapis.com');
    if (denied) return denied;
    if (p === '/profile')
      return {
        status: 200,
        body: {
          emailAddress: account,
          messagesTotal: messages.size,
          threadsTotal: messages.size,
          historyId: String(historyId),
        },
      };
    if (p === '/messages') {
      const after = /after:(\d+)/.exec(r.query.get('q') ?? '')?.[1];
      const all = [...messages.values()]
        .filter((m) => !m.labelIds.some((l) => l === 'SPAM' || l === 'TRASH'))
        .filter((m) => after === undefined || m.internalDate >= Number(after) * 1000)
        .sort((a, b) => b.internalDate - a.internalDate);
      const { slice, next } = page(all, r, 100);
      return {
        status: 200,
        body: {
          ...(slice.length ? { messages: slice.map((m) => ({ id: m.id, threadId: m.threadId })) } : {}),
          ...(next ? { nextPageToken: next } : {}),
          resultSizeEstimate: all.length,
        },
      };
    }
    const one = /^\/messages\/([^/]+)$/.exec(p);
    if (one) {
      const m = messages.get(decodeURIComponent(one[1]));
      if (!m)
        return { status: 404, body: googleError(404, 'NOT_FOUND', 'Requested entity was not found.', 'notFound') };
      const format = r.query.get('format') ?? 'full';
      const wanted = r.query.getAll('metadataHeaders').map((h) => h.toLowerCase());
      const headers =
        format === 'metadata' && wanted.length
          ? m.headers.filter((h) => wanted.includes(h.name.toLowerCase()))
          : m.headers;
      return {
        status: 200,
        body: partial(
          {
            id: m.id,
            threadId: m.threadId,
            labelIds: m.labelIds,
            snippet: m.snippet,
            sizeEstimate: 2048,
            historyId: String(m.historyId),
            internalDate: String(m.internalDate),
            payload: { partId: '', mimeType: 'multipart/alternative', filename: '', headers },
          },
          r.query.get('fields'),
        ),
      };
    }
    if (p === '/history') {
      const start = Number(r.query.get('startHistoryId'));
      if (!start || start < oldestHistory)
        return { status: 404, body: googleError(404, 'NOT_FOUND', 'Requested entity was not found.', 'notFound') };
      const records = history.filter((h) => h.id > start);
      const { slice, next } = page(records, r, 100);
      return {
        status: 200,
        body: {
          ...(slice.length ? { history: slice.map((h) => ({ ...h, id: String(h.id) })) } : {}),
          ...(next ? { nextPageToken: next } : {}),
          historyId: String(historyId),
        },
      };
    }
    return { status: 404, body: googleError(404, 'NOT_FOUND', 'Not Found', 'notFound') };
  }

  const when = (d: Date, allDay?: boolean) =>
    allDay ? { date: d.toISOString().slice(0, 10) } : { dateTime: d.toISOString(), timeZone: 'UTC' };
  const eventBody = (e: CalEvent) =>
    e.status === 'cancelled'
      ? { kind: 'calendar#event', id: e.id, status: 'cancelled' }
      : {
          kind: 'calendar#event',
          etag: `"${e.seq}"`,
          id: e.id,
          status: 'confirmed',
          htmlLink: `https://www.google.com/calendar/event?eid=${e.id}`,
          created: e.updated,
          updated: e.updated,
          summary: e.input.summary ?? 'Quarterly review',
          description: e.input.description ?? 'Agenda: renewal, pricing',
          organizer: { email: e.input.organizer ?? account, self: (e.input.organizer ?? account) === account },
          start: when(e.input.start, e.input.allDay),
          end: when(e.input.end, e.input.allDay),
          iCalUID: `${e.id}@google.com`,
          sequence: e.seq,
          attendees: e.input.attendees.map((a) => {
            const x = typeof a === 'string' ? { email: a } : a;
            return {
              email: x.email,
              responseStatus: x.responseStatus ?? 'accepted',
              ...(x.resource ? { resource: true } : {}),
              ...(x.email === account ? { self: true } : {}),
            };
          }),
        };

  function calendar(r: FakeRequest): FakeAnswer {
    const denied = authorize(r, CALENDAR_READ, 'calendar-json.googleapis.com');
    if (denied) return denied;
    const p = r.path.replace('/calendar/v3', '');
    if (p === '/calendars/primary')
      return { status: 200, body: { kind: 'calendar#calendar', id: account, summary: account, timeZone: 'UTC' } };
    if (p !== '/calendars/primary/events')
      return { status: 404, body: googleError(404, 'NOT_FOUND', 'Not Found', 'notFound') };
    const token = r.query.get('syncToken');
    if (token && (r.query.has('timeMin') || r.query.has('timeMax')))
      return { status: 400, body: googleError(400, 'INVALID_ARGUMENT', 'Invalid parameters', 'invalid') };
    let items: CalEvent[];
    if (token) {
      const since = syncTokens.get(token);
      if (since === undefined)
        return {
          status: 410,
          body: {
            error: {
              errors: [
                {
                  domain: 'global',
                  reason: 'fullSyncRequired',
                  message: 'Sync token is no longer valid, a full sync is required.',
                },
              ],
              code: 410,
              message: 'Sync token is no longer valid, a full sync is required.',
            },
          },
        };
      items = [...events.values()].filter((e) => e.seq > since);
    } else {
      const min = r.query.get('timeMin');
      items = [...events.values()].filter(
        (e) => e.status !== 'cancelled' && (!min || e.input.end.getTime() > Date.parse(min)),
      );
    }
    items.sort((a, b) => a.seq - b.seq);
    const { slice, next } = page(items, r, 250);
    const body: Record<string, unknown> = {
      kind: 'calendar#events',
      etag: `"${calSeq}"`,
      summary: account,
      updated: new Date().toISOString(),
      timeZone: 'UTC',
      accessRole: 'owner',
      defaultReminders: [],
      items: slice.map(eventBody),
    };
    if (next) body.nextPageToken = next;
    else {
      const sync = `CPDAlvWDx${rand(8)}`;
      syncTokens.set(sync, calSeq);
      body.nextSyncToken = sync;
    }
    return { status: 200, body: partial(body, r.query.get('fields')) };
  }

  const url = await f.serve(
    t,
    oauth,
    (r) =>
      r.path.startsWith('/gmail/v1/users/me')
        ? gmail(r)
        : r.path.startsWith('/calendar/v3/')
          ? calendar(r)
          : { status: 404, body: googleError(404, 'NOT_FOUND', 'Not Found', 'notFound') },
    (r, answer) => ({ path: r.path, query: r.query.toString(), status: answer.status, at: Date.now() }),
  );

  return Object.assign(f, {
    url,
    account,
    sent,
    env: (name: 'gmail' | 'google_calendar') => {
      const n = `INTEGRATION_${name.toUpperCase()}_`;
      return {
        [`${n}CLIENT_ID`]: 'google-client.apps.googleusercontent.com',
        [`${n}CLIENT_SECRET`]: 'google-secret',
        [`${n}AUTHORIZE_URL`]: `${url}/o/oauth2/v2/auth`,
        [`${n}TOKEN_URL`]: `${url}/token`,
        [`${n}REVOKE_URL`]: `${url}/revoke`,
        [`${n}API_URL`]: name === 'gmail' ? url : `${url}/calendar/v3`,
      };
    },
    gmail: {
      add(m: GmailMessageInput) {
        const id = rand(8);
        historyId += 1 + Math.floor(Math.random() * 5);
        const labelIds = m.labels ?? ['INBOX', 'UNREAD', 'CATEGORY_PERSONAL'];
        const headers = [
          { name: 'Delivered-To', value: account },
          { name: 'From', value: m.from },
          ...(m.to?.length ? [{ name: 'To', value: m.to.join(', ') }] : []),
          ...(m.cc?.length ? [{ name: 'Cc', value: m.cc.join(', ') }] : []),
          { name: 'Subject', value: m.subject ?? 'Renewal terms' },
          { name: 'Date', value: m.date.toUTCString().replace('GMT', '+0000') },
          { name: 'Message-ID', value: `<${id}@mail.gmail.com>` },
        ];
        messages.set(id, {
          id,
          threadId: id,
          labelIds,
          internalDate: m.date.getTime(),
          historyId,
          headers,
          snippet: m.snippet ?? 'Hi, about the renewal…',
        });
        history.push({ id: historyId, messagesAdded: [{ message: { id, threadId: id, labelIds } }] });
        return id;
      },
      expireHistory() {
        oldestHistory = historyId;
      },
      historyId: () => historyId,
    },
    calendar: {
      put(e: CalendarEventInput) {
        const id = e.id ?? `${rand(6)}evt`;
        calSeq++;
        events.set(id, { id, status: 'confirmed', seq: calSeq, input: e, updated: new Date().toISOString() });
        return id;
      },
      cancel(id: string) {
        const e = events.get(id);
        if (!e) return;
        calSeq++;
        events.set(id, { ...e, status: 'cancelled', seq: calSeq, updated: new Date().toISOString() });
      },
      expireSyncTokens: () => syncTokens.clear(),
    },
  });
}
