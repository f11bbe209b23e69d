import { createHmac, randomBytes } from 'node:crypto';
import { type FakeAnswer, redirectBack, startHttpFake } from './http.js';

/**
 * Zendesk as its references describe it (developer.zendesk.com), one account per subdomain under
 * `{url}/{subdomain}` (the service's URLs hold `{subdomain}`, so a test sees it substituted):
 * OAuth (`/oauth/authorizations/new`, `/oauth/tokens` taking JSON, tokens without expiry, errors
 * as `{"error": "invalid_grant", "error_description"}`, `DELETE /api/v2/oauth/tokens/current.json`);
 * webhooks (`POST /api/v2/webhooks` → 201 `{webhook: {id, …}}`, `GET …/{id}/signing_secret` →
 * `{signing_secret: {algorithm: "SHA256", secret}}`, `DELETE …/{id}`); `GET /api/v2/users/{id}.json`
 * → `{user: {id, email, …}}`; the cursor-based incremental ticket export (`GET
 * /api/v2/incremental/tickets/cursor.json?start_time=…|cursor=…&include=users` → `{tickets, users,
 * after_cursor, after_url, end_of_stream}`, 429 with Retry-After when told). `deliver` sends a
 * webhook request as Zendesk does: the event JSON, `X-Zendesk-Webhook-Signature` =
 * base64(HMAC-SHA256(secret, timestamp + body)), `X-Zendesk-Webhook-Signature-Timestamp`.
 */
export interface ZendeskTicket {
  id: number;
  requester_id: number;
  status: 'new' | 'open' | 'pending' | 'hold' | 'solved' | 'closed' | 'deleted';
  created_at: string;
  updated_at: string;
  subject?: string;
}

export interface FakeZendesk {
  url: string;
  subdomain: string;
  env: Record<string, string>;
  webhooks: Array<{ id: string; endpoint: string; subscriptions: string[]; secret: string; deleted: boolean }>;
  revoked: string[];
  /** Export requests (their query strings). */
  exports: string[];
  users: Map<number, string>;
  tickets: ZendeskTicket[];
  /** Tickets per export page. */
  pageSize: number;
  /** Webhook creation is refused with 403 (a token without webhooks:write). */
  forbidWebhooks: boolean;
  /** The next export requests get these answers first. */
  queueExport(...answers: FakeAnswer[]): void;
  /** Every token stops working (the user removed the app's access in Zendesk). */
  revokeAll(): void;
  /** Sends an event to the webhook's endpoint as Zendesk does. */
  deliver(
    event: object,
    o?: { secret?: string; timestamp?: string; raw?: string },
  ): Promise<{ status: number; headers: Headers; text: string; body: any }>;
}

export async function startFakeZendesk(
  t: { teardown(f: () => unknown): void },
  subdomain = 'acme',
): Promise<FakeZendesk> {
  const codes = new Set<string>();
  const live = new Set<string>();
  const exportQueue: FakeAnswer[] = [];
  const z = {
    webhooks: [] as FakeZendesk['webhooks'],
    revoked: [] as string[],
    exports: [] as string[],
    users: new Map<number, string>(),
    tickets: [] as ZendeskTicket[],
    pageSize: 2,
    forbidWebhooks: false,
  };
  const notFound: FakeAnswer = { status: 404, body: { error: 'RecordNotFound', description: 'Not found' } };
  let base = '';
  const url = await startHttpFake(t, (r) => {
    const [, sub, ...rest] = r.path.split('/');
    if (sub !== subdomain) return notFound;
    const path = `/${rest.join('/')}`;
    if (path === '/oauth/authorizations/new') {
      const code = randomBytes(8).toString('hex');
      codes.add(code);
      return redirectBack(r, { code });
    }
    if (path === '/oauth/tokens' && r.method === 'POST') {
      if (!String(r.headers['content-type']).includes('application/json'))
        return { status: 400, body: { error: 'invalid_request', error_description: 'JSON expected' } };
      if (r.body.client_id !== 'zd-client' || r.body.client_secret !== 'zd-secret')
        return { status: 401, body: { error: 'invalid_client', error_description: 'Client authentication failed' } };
      if (r.body.grant_type !== 'authorization_code' || !codes.delete(r.body.code))
        return { status: 400, body: { error: 'invalid_grant', error_description: 'The provided code is invalid' } };
      const token = randomBytes(32).toString('hex');
      live.add(token);
      return { status: 200, body: { access_token: token, token_type: 'bearer', scope: r.body.scope ?? 'read' } };
    }
    if (!live.has(r.token)) return { status: 401, body: { error: "Couldn't authenticate you" } };
    if (path === '/api/v2/oauth/tokens/current.json' && r.method === 'DELETE') {
      live.delete(r.token);
      z.revoked.push(r.token);
      return { status: 204 };
    }
    if (path === '/api/v2/webhooks' && r.method === 'POST') {
      if (z.forbidWebhooks)
        return { status: 403, body: { error: 'Forbidden', description: 'You do not have access to this page.' } };
      const w = r.body.webhook ?? {};
      const hook = {
        id: `01GK${randomBytes(11).toString('hex').toUpperCase()}`,
        endpoint: String(w.endpoint),
        subscriptions: w.subscriptions ?? [],
        secret: randomBytes(30).toString('base64'),
        deleted: false,
      };
      z.webhooks.push(hook);
      const { secret: _, deleted: __, ...shown } = hook;
      return {
        status: 201,
        body: {
          webhook: {
            ...shown,
            name: w.name,
            status: w.status,
            http_method: w.http_method,
            request_format: w.request_format,
          },
        },
      };
    }
    const hook = /^\/api\/v2\/webhooks\/([^/]+)(\/signing_secret)?$/.exec(path);
    if (hook) {
      const h = z.webhooks.find((x) => x.id === hook[1] && !x.deleted);
      if (!h) return notFound;
      if (hook[2]) return { status: 200, body: { signing_secret: { algorithm: 'SHA256', secret: h.secret } } };
      if (r.method === 'DELETE') {
        h.deleted = true;
        return { status: 204 };
      }
    }
    const user = /^\/api\/v2\/users\/(\d+)\.json$/.exec(path);
    if (user) {
      const email = z.users.get(Number(user[1]));
      if (!email) return notFound;
      return {
        status: 200,
        body: { user: { id: Number(user[1]), email, name: email.split('@')[0], role: 'end-user' } },
      };
    }
    if (path === '/api/v2/incremental/tickets/cursor.json') {
      z.exports.push(r.query.toString());
      const queued = exportQueue.shift();
      if (queued) return queued;
      const cursor = r.query.get('cursor');
      const start = Number(r.query.get('start_time'));
      if (!cursor && !Number.isFinite(start))
        return { status: 400, body: { error: 'InvalidValue', description: 'start_time or cursor is required' } };
      const offset = cursor ? Number(Buffer.from(cursor, 'base64').toString()) : 0;
      const all = z.tickets
        .filter((x) => cursor || Date.parse(x.updated_at) / 1000 >= start)
        .sort((a, b) => Date.parse(a.updated_at) - Date.parse(b.updated_at));
      const page = all.slice(offset, offset + z.pageSize);
      const end = offset + z.pageSize >= all.length;
      const after = Buffer.from(String(offset + page.length)).toString('base64');
      const ids = new Set(page.map((x) => x.requester_id));
      return {
        status: 200,
        body: {
          tickets: page.map((x) => ({
            ...x,
            url: `${base}/api/v2/tickets/${x.id}.json`,
            submitter_id: x.requester_id,
          })),
          users: [...ids]
            .filter((id) => z.users.has(id))
            .map((id) => ({ id, email: z.users.get(id), role: 'end-user' })),
          after_url: `${base}/api/v2/incremental/tickets/cursor.json?cursor=${after}`,
          after_cursor: after,
          before_url: null,
          before_cursor: null,
          end_of_stream: end,
        },
      };
    }
    return notFound;
  });
  base = `${url}/${subdomain}`;
  const z2: FakeZendesk = Object.assign(z, {
    url,
    subdomain,
    env: {
      INTEGRATION_ZENDESK_CLIENT_ID: 'zd-client',
      INTEGRATION_ZENDESK_CLIENT_SECRET: 'zd-secret',
      INTEGRATION_ZENDESK_AUTHORIZE_URL: `${url}/{subdomain}/oauth/authorizations/new`,
      INTEGRATION_ZENDESK_TOKEN_URL: `${url}/{subdomain}/oauth/tokens`,
      INTEGRATION_ZENDESK_REVOKE_URL: `${url}/{subdomain}/api/v2/oauth/tokens/current.json`,
      INTEGRATION_ZENDESK_API_URL: `${url}/{subdomain}`,
    },
    queueExport: (...answers: FakeAnswer[]) => void exportQueue.push(...answers),
    revokeAll: () => live.clear(),
    async deliver(event: object, o: { secret?: string; timestamp?: string; raw?: string } = {}) {
      const h = z.webhooks.filter((x) => !x.deleted).at(-1);
      if (!h) throw new Error('no webhook was created');
      const raw = o.raw ?? JSON.stringify(event);
      const timestamp = o.timestamp ?? new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
      const sig = createHmac('sha256', o.secret ?? h.secret)
        .update(timestamp + raw)
        .digest('base64');
      const res = await fetch(h.endpoint, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'Zendesk Webhook',
          'x-zendesk-webhook-id': h.id,
          'x-zendesk-webhook-invocation-id': String(Date.now()),
          'x-zendesk-webhook-signature': sig,
          'x-zendesk-webhook-signature-timestamp': timestamp,
        },
        body: raw,
      });
      const text = await res.text();
      return { status: res.status, headers: res.headers, text, body: text ? JSON.parse(text) : undefined };
    },
  });
  return z2;
}

/** A ticket event as Zendesk's webhook sends it (zendesk_event_version 2022-11-06). */
export function zendeskTicketEvent(
  type: 'ticket.created' | 'ticket.status_changed',
  ticket: ZendeskTicket,
  current?: string,
): object {
  const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
  return {
    type: `zen:event-type:${type}`,
    account_id: 88888888,
    id: `01HN${randomBytes(11).toString('hex').toUpperCase()}`,
    time: now,
    zendesk_event_version: '2022-11-06',
    subject: `zen:ticket:${ticket.id}`,
    detail: {
      id: String(ticket.id),
      requester_id: String(ticket.requester_id),
      submitter_id: String(ticket.requester_id),
      status: (current ?? ticket.status).toUpperCase(),
      subject: ticket.subject ?? 'Help',
      via: { channel: 'web' },
      created_at: ticket.created_at,
      updated_at: now,
    },
    event:
      type === 'ticket.status_changed'
        ? { current: current?.toUpperCase(), previous: 'OPEN' }
        : { current: { status: ticket.status.toUpperCase() } },
  };
}
