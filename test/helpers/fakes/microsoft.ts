import { randomBytes } from 'node:crypto';
import { type FakeAnswer, type FakeRequest, ScopedOAuth } from './http.js';

/**
 * Microsoft as its references describe it, on loopback: the identity platform v2.0
 * (learn.microsoft.com/entra/identity-platform/v2-oauth2-auth-code-flow: `/{tenant}/oauth2/v2.0/
 * authorize` and `/token` with PKCE, a refresh token only with `offline_access`, refresh tokens
 * rotated) and Microsoft Graph v1.0 under `/v1.0`: GET /me; the message delta of a mail folder
 * (learn.microsoft.com/graph/api/message-delta: `/me/mailFolders/{inbox|sentitems}/messages/
 * delta` with `$select` and `$filter=receivedDateTime ge …`, `Prefer: odata.maxpagesize`,
 * `@odata.nextLink` pages ending in an `@odata.deltaLink`, `@removed` items); the calendarView
 * delta (learn.microsoft.com/graph/api/event-delta: `/me/calendarView/delta?startDateTime&
 * endDateTime`, the window kept in the state token, times in UTC without an offset); channel
 * messages (learn.microsoft.com/graph/api/chatmessage-post: `POST /teams/{team-id}/channels/
 * {channel-id}/messages` with ChannelMessage.Send, 201 with the chatMessage, 404 NotFound for a
 * channel that does not exist) and sendMail (learn.microsoft.com/graph/api/user-sendmail: `POST
 * /me/sendMail` with Mail.Send, 202 without content, 400 ErrorInvalidRecipients). An expired
 * state answers 410 with `syncStateNotFound`; a token that is not live 401
 * InvalidAuthenticationToken; a token without the call's permission 403 ErrorAccessDenied.
 * Messages and events carry a subject, a body preview and a body, so a test can check that none
 * of them is kept.
 */

export interface MailInput {
  folder: 'inbox' | 'sentitems';
  from: string;
  to?: string[];
  cc?: string[];
  date: Date;
  subject?: string;
  isDraft?: boolean;
}

export interface GraphEventInput {
  id?: string;
  start: Date;
  end: Date;
  attendees: Array<string | { address: string; response?: string; type?: string }>;
  organizer?: string;
  subject?: string;
  isAllDay?: boolean;
}

export interface FakeMicrosoft {
  url: string;
  account: string;
  env(name: 'outlook' | 'outlook_calendar' | 'teams'): Record<string, string>;
  /** Scopes the user does not consent to. */
  withhold: Set<string>;
  calls: Array<{ path: string; query: string; status: number; prefer: string; at: number }>;
  refreshes: number;
  fail(prefix: string, answer: FakeAnswer, times?: number): void;
  /** Like `fail`, once, for the request after the next `skip` ones under `prefix` (a page amid a round). */
  failLater(prefix: string, skip: number, answer: FakeAnswer): void;
  invalidateAccessTokens(): void;
  /**
   * The user (or a tenant admin) revokes the app's consent: the access tokens issued so far answer
   * 401 and the refresh tokens invalid_grant AADSTS70008.
   */
  revokeConsent(): void;
  /** Items per page at most, whatever Prefer: odata.maxpagesize asks. */
  pageSize: number;
  mail: {
    add(m: MailInput): string;
    remove(id: string): void;
  };
  calendar: {
    put(e: GraphEventInput): string;
    cancel(id: string): void;
    remove(id: string): void;
  };
  /** The delta and skip tokens issued so far answer 410 syncStateNotFound. */
  expireDeltaTokens(): void;
  /** The Teams channels that exist, `team-id/channel-id`. */
  channels: Set<string>;
  /** What Graph accepted: channel messages and mail sent, their request bodies. */
  sent: Array<{ kind: 'channel'; team: string; channel: string; body: any } | { kind: 'mail'; body: any }>;
}

const graphError = (code: string, message: string) => ({
  error: {
    code,
    message,
    innerError: { date: new Date().toISOString(), 'request-id': randomBytes(8).toString('hex') },
  },
});

interface Item {
  id: string;
  seq: number;
  removed: boolean;
  body: Record<string, unknown>;
  /** Messages: the folder and the received time ($filter); events: start and end (the window). */
  folder?: string;
  received?: number;
  start?: number;
  end?: number;
}

/** The state behind a skiptoken (a round in progress) or a deltatoken (a round done). */
interface State {
  kind: 'mail' | 'calendar';
  folder?: string;
  since?: number;
  window?: [number, number];
  select?: string[];
  /** Changes after this sequence number are the next round. */
  seq: number;
  /** The items of the round in progress still to page through. */
  rest?: Item[];
}

const graphTime = (d: Date) => d.toISOString().replace('Z', '0000');

export async function startFakeMicrosoft(
  t: { teardown(f: () => unknown): void },
  account = 'me@vendor.test',
): Promise<FakeMicrosoft> {
  const f = new ScopedOAuth<FakeMicrosoft['calls'][number]>();
  const { refreshTokens } = f;
  const items = new Map<string, Item>();
  const states = new Map<string, State>();
  const channels = new Set<string>();
  const sent: FakeMicrosoft['sent'] = [];
  let seq = 0;
  const rand = (n = 12) => randomBytes(n).toString('hex');
  const issue = (scope: string) => {
    const access = f.issue(`eyJ0eXAiOiJKV1Qi.${rand()}`, scope);
    const refresh = `0.AX${rand()}`;
    refreshTokens.set(refresh, scope);
    return {
      token_type: 'Bearer',
      scope: scope
        .split(' ')
        .filter((s) => s !== 'offline_access')
        .join(' '),
      expires_in: 3599,
      ext_expires_in: 3599,
      access_token: access,
      ...(scope.split(' ').includes('offline_access') ? { refresh_token: refresh } : {}),
    };
  };

  function oauth(r: FakeRequest): FakeAnswer | undefined {
    if (/^\/[^/]+\/oauth2\/v2\.0\/authorize$/.test(r.path)) return f.approve(r, `M.C5${rand()}`);
    if (/^\/[^/]+\/oauth2\/v2\.0\/token$/.test(r.path)) {
      const bad = (description: string) => ({
        status: 400,
        body: { error: 'invalid_grant', error_description: description, error_codes: [70000] },
      });
      if (r.body.client_id !== 'ms-client' || r.body.client_secret !== 'ms-secret')
        return {
          status: 401,
          body: { error: 'invalid_client', error_description: 'AADSTS7000215: Invalid client secret.' },
        };
      if (r.body.grant_type === 'authorization_code') {
        const c = f.redeem(r.body);
        if (c === 'invalid_code') return bad('AADSTS70000: The provided authorization code is invalid.');
        if (c === 'invalid_verifier') return bad('AADSTS501481: The Code_Verifier does not match the code_challenge.');
        return { status: 200, body: issue(c.scope) };
      }
      if (r.body.grant_type === 'refresh_token') {
        const scope = refreshTokens.get(r.body.refresh_token);
        refreshTokens.delete(r.body.refresh_token);
        if (scope === undefined) return bad('AADSTS70008: The refresh token has expired or was revoked.');
        f.refreshes++;
        return { status: 200, body: issue(scope) };
      }
      return { status: 400, body: { error: 'unsupported_grant_type' } };
    }
    return undefined;
  }

  function authorize(r: FakeRequest, scope?: string): FakeAnswer | undefined {
    const refusal = f.refusal(r.token, scope);
    if (refusal === 'invalid_token')
      return {
        status: 401,
        headers: {
          'www-authenticate': 'Bearer realm="", authorization_uri="https://login.microsoftonline.com/common"',
        },
        body: graphError('InvalidAuthenticationToken', 'Access token has expired or is not yet valid.'),
      };
    if (refusal === 'insufficient_scope')
      return {
        status: 403,
        body: graphError('ErrorAccessDenied', 'Access is denied. Check credentials and try again.'),
      };
    return undefined;
  }

  const maxPage = (r: FakeRequest) => {
    const asked = Number(/odata\.maxpagesize=(\d+)/.exec(String(r.headers.prefer ?? ''))?.[1] ?? 10);
    return Math.min(asked, f.pageSize);
  };

  const messageBody = (i: Item, select?: string[]) => {
    const full: Record<string, unknown> = { '@odata.etag': `W/"${i.seq}"`, id: i.id, ...i.body };
    if (!select) return full;
    return Object.fromEntries(
      Object.entries(full).filter(([k]) => k === 'id' || k === '@odata.etag' || select.includes(k)),
    );
  };

  /** One page of a round: the items left, a nextLink while more remain, else a deltaLink. */
  function pageOf(r: FakeRequest, base: string, state: State, rest: Item[]): FakeAnswer {
    const n = maxPage(r);
    const slice = rest.slice(0, n);
    const left = rest.slice(n);
    const value = slice.map((i) =>
      i.removed
        ? {
            '@odata.type': state.kind === 'mail' ? '#microsoft.graph.message' : '#microsoft.graph.event',
            id: i.id,
            '@removed': { reason: 'deleted' },
          }
        : state.kind === 'mail'
          ? messageBody(i, state.select)
          : { '@odata.type': '#microsoft.graph.event', '@odata.etag': `W/"${i.seq}"`, id: i.id, ...i.body },
    );
    const token = rand(16);
    const body: Record<string, unknown> = {
      '@odata.context': `${url}/v1.0/$metadata#Collection(${state.kind})`,
      value,
    };
    if (left.length) {
      states.set(token, { ...state, rest: left });
      body['@odata.nextLink'] = `${base}?$skiptoken=${token}`;
    } else {
      states.set(token, { ...state, rest: undefined, seq });
      body['@odata.deltaLink'] = `${base}?$deltatoken=${token}`;
    }
    return { status: 200, body };
  }

  const expired = (): FakeAnswer => ({
    status: 410,
    body: graphError(
      'syncStateNotFound',
      'The sync state generation is not found. The delta token is expired and data must be synchronized again.',
    ),
  });

  function graph(r: FakeRequest): FakeAnswer {
    const p = r.path.replace('/v1.0', '');
    if (p === '/me') {
      const denied = authorize(r);
      if (denied) return denied;
      return {
        status: 200,
        body: {
          '@odata.context': `${url}/v1.0/$metadata#users/$entity`,
          id: '87d349ed-44d7-43e1-9a83-5f2406dee5bd',
          displayName: 'Me',
          mail: account,
          userPrincipalName: account,
        },
      };
    }
    const post = /^\/teams\/([^/]+)\/channels\/([^/]+)\/messages$/.exec(p);
    if (post && r.method === 'POST') return channelMessage(r, decodeURIComponent(post[1]), decodeURIComponent(post[2]));
    if (p === '/me/sendMail' && r.method === 'POST') return sendMail(r);
    const folder = /^\/me\/mailFolders\/(inbox|sentitems)\/messages\/delta$/.exec(p)?.[1];
    const calendar = p === '/me/calendarView/delta';
    if (!folder && !calendar) return { status: 404, body: graphError('ResourceNotFound', 'Resource not found.') };
    const denied = authorize(r, folder ? 'Mail.Read' : 'Calendars.Read');
    if (denied) return denied;
    const base = `${url}/v1.0${p}`;
    const skip = r.query.get('$skiptoken');
    const delta = r.query.get('$deltatoken');
    if (skip || delta) {
      const s = states.get(skip ?? delta ?? '');
      if (!s) return expired();
      if (skip) return pageOf(r, base, s, s.rest ?? []);
      const changed = [...items.values()].filter((i) => i.seq > s.seq && inScope(i, s));
      return pageOf(r, base, s, changed);
    }
    if (folder) {
      const since = /receivedDateTime ge (\S+)/.exec(r.query.get('$filter') ?? '')?.[1];
      const select = r.query.get('$select')?.split(',');
      const state: State = { kind: 'mail', folder, since: since ? Date.parse(since) : undefined, select, seq: 0 };
      const all = [...items.values()].filter((i) => !i.removed && inScope(i, state)).sort((a, b) => a.seq - b.seq);
      return pageOf(r, base, state, all);
    }
    const start = Date.parse(r.query.get('startDateTime') ?? '');
    const end = Date.parse(r.query.get('endDateTime') ?? '');
    if (Number.isNaN(start) || Number.isNaN(end))
      return {
        status: 400,
        body: graphError(
          'ErrorInvalidParameter',
          'This request requires a time window specified by the query string parameters StartDateTime and EndDateTime.',
        ),
      };
    const state: State = { kind: 'calendar', window: [start, end], seq: 0 };
    const all = [...items.values()].filter((i) => !i.removed && inScope(i, state)).sort((a, b) => a.seq - b.seq);
    return pageOf(r, base, state, all);
  }

  function channelMessage(r: FakeRequest, team: string, channel: string): FakeAnswer {
    const denied = authorize(r, 'ChannelMessage.Send');
    if (denied) return denied;
    if (!channels.has(`${team}/${channel}`))
      return { status: 404, body: graphError('NotFound', `No team found with Group Id ${team}`) };
    const content = r.body.body?.content;
    if (typeof content !== 'string' || !content)
      return { status: 400, body: graphError('BadRequest', 'Missing body content.') };
    sent.push({ kind: 'channel', team, channel, body: r.body });
    const now = new Date().toISOString();
    const id = String(Date.now());
    return {
      status: 201,
      body: {
        '@odata.context': `${url}/v1.0/$metadata#teams('${team}')/channels('${channel}')/messages/$entity`,
        id,
        replyToId: null,
        etag: id,
        messageType: 'message',
        createdDateTime: now,
        lastModifiedDateTime: now,
        deletedDateTime: null,
        subject: null,
        summary: null,
        importance: 'normal',
        locale: 'en-us',
        webUrl: `https://teams.microsoft.com/l/message/${encodeURIComponent(channel)}/${id}`,
        from: { user: { id: '87d349ed-44d7-43e1-9a83-5f2406dee5bd', displayName: 'Me', userIdentityType: 'aadUser' } },
        body: r.body.body,
        channelIdentity: { teamId: team, channelId: channel },
        attachments: [],
        mentions: [],
        reactions: [],
      },
    };
  }

  function sendMail(r: FakeRequest): FakeAnswer {
    const denied = authorize(r, 'Mail.Send');
    if (denied) return denied;
    const to = r.body.message?.toRecipients;
    if (!Array.isArray(to) || to.length === 0)
      return {
        status: 400,
        body: graphError('ErrorInvalidRecipients', 'At least one recipient is not valid., Recipient is missing.'),
      };
    sent.push({ kind: 'mail', body: r.body });
    return { status: 202 };
  }

  function inScope(i: Item, s: State): boolean {
    if (s.kind === 'mail') return i.folder === s.folder && (s.since === undefined || (i.received ?? 0) >= s.since);
    if (i.folder !== undefined || !s.window) return false;
    return (i.end ?? 0) > s.window[0] && (i.start ?? 0) < s.window[1];
  }

  const url = await f.serve(
    t,
    oauth,
    (r) =>
      r.path.startsWith('/v1.0/')
        ? graph(r)
        : { status: 404, body: graphError('ResourceNotFound', 'Resource not found.') },
    (r, answer) => ({
      path: r.path,
      query: r.query.toString(),
      status: answer.status,
      prefer: String(r.headers.prefer ?? ''),
      at: Date.now(),
    }),
  );

  const address = (a: string) => ({ emailAddress: { name: a.split('@')[0], address: a } });
  return Object.assign(f, {
    url,
    account,
    channels,
    sent,
    env: (name: 'outlook' | 'outlook_calendar' | 'teams') => {
      const n = `INTEGRATION_${name.toUpperCase()}_`;
      return {
        [`${n}CLIENT_ID`]: 'ms-client',
        [`${n}CLIENT_SECRET`]: 'ms-secret',
        [`${n}AUTHORIZE_URL`]: `${url}/common/oauth2/v2.0/authorize`,
        [`${n}TOKEN_URL`]: `${url}/common/oauth2/v2.0/token`,
        [`${n}REVOKE_URL`]: '',
        [`${n}API_URL`]: `${url}/v1.0`,
      };
    },
    expireDeltaTokens: () => states.clear(),
    revokeConsent() {
      f.invalidateAccessTokens();
      refreshTokens.clear();
    },
    mail: {
      add(m: MailInput) {
        const id = `AAMkAGI2${rand(10)}`;
        items.set(id, {
          id,
          seq: ++seq,
          removed: false,
          folder: m.folder,
          received: m.date.getTime(),
          body: {
            createdDateTime: m.date.toISOString(),
            receivedDateTime: m.date.toISOString().replace(/\.\d+Z$/, 'Z'),
            sentDateTime: m.date.toISOString().replace(/\.\d+Z$/, 'Z'),
            subject: m.subject ?? 'Renewal terms',
            bodyPreview: 'Hi, about the renewal…',
            body: { contentType: 'html', content: '<p>Hi, about the renewal…</p>' },
            isDraft: m.isDraft ?? false,
            isRead: false,
            internetMessageId: `<${id}@vendor.test>`,
            from: address(m.from),
            sender: address(m.from),
            toRecipients: (m.to ?? []).map(address),
            ccRecipients: (m.cc ?? []).map(address),
          },
        });
        return id;
      },
      remove(id: string) {
        const i = items.get(id);
        if (i) items.set(id, { ...i, removed: true, seq: ++seq });
      },
    },
    calendar: {
      put(e: GraphEventInput) {
        const id = e.id ?? `AAMkADEv${rand(10)}`;
        items.set(id, {
          id,
          seq: ++seq,
          removed: false,
          start: e.start.getTime(),
          end: e.end.getTime(),
          body: {
            subject: e.subject ?? 'Quarterly review',
            bodyPreview: 'Agenda: renewal, pricing',
            body: { contentType: 'html', content: '<p>Agenda: renewal, pricing</p>' },
            isAllDay: e.isAllDay ?? false,
            isCancelled: false,
            type: 'singleInstance',
            start: { dateTime: graphTime(e.start), timeZone: 'UTC' },
            end: { dateTime: graphTime(e.end), timeZone: 'UTC' },
            organizer: address(e.organizer ?? account),
            attendees: e.attendees.map((a) => {
              const x = typeof a === 'string' ? { address: a } : a;
              return {
                type: x.type ?? 'required',
                status: { response: x.response ?? 'accepted', time: new Date().toISOString() },
                ...address(x.address),
              };
            }),
          },
        });
        return id;
      },
      cancel(id: string) {
        const i = items.get(id);
        if (i) items.set(id, { ...i, seq: ++seq, body: { ...i.body, isCancelled: true } });
      },
      remove(id: string) {
        const i = items.get(id);
        if (i) items.set(id, { ...i, removed: true, seq: ++seq });
      },
    },
  });
}
