import { createHmac, timingSafeEqual } from 'node:crypto';
import { storeActivities } from '../../lib/integrations/activities.js';
import { ProviderError, tokenDisowned } from '../../lib/integrations/oauth.js';
import { forConnection, type ProviderConfig } from '../../lib/integrations/providers.js';
import type { Sql } from '../../lib/pg.js';
import { ApiError, notFound } from '../../lib/problem.js';
import {
  IntercomNotification,
  WebhookAnswer,
  WebhookParams,
  ZendeskEvent,
} from '../../schemas/core/integration-webhooks.js';
import type { ActivityPush } from '../../schemas/core/integrations.js';
import { type Ctx, json, type Reply } from '../http/context.js';
import type { Route } from '../http/router.js';
import type { IntegrationDeps } from '../deps.js';

/**
 * The ticketing providers' own webhooks (docs/integrations.md):
 * - Zendesk: `X-Zendesk-Webhook-Signature` = base64(HMAC-SHA256(the webhook's signing secret,
 *   `X-Zendesk-Webhook-Signature-Timestamp` + raw body)); the secret is the one of the webhook
 *   created at connect (stored encrypted), else INTEGRATION_ZENDESK_SIGNING_SECRET (a webhook an
 *   admin created by hand). Ticket events: `zen:event-type:ticket.created` → ticket_opened,
 *   `zen:event-type:ticket.status_changed` to solved or closed → ticket_closed. The event carries
 *   the requester's id only: its e-mail address is read from Zendesk's Users API with the
 *   connection's token.
 * - Intercom: `X-Hub-Signature` = `sha1=` hex(HMAC-SHA1(the app's client secret, raw body)) and
 *   the notification envelope: conversation.user.created → ticket_opened,
 *   conversation.admin.closed → ticket_closed, the requester being the conversation's author.
 *   Intercom's webhooks belong to the app, not to an install: one URL (the app-level route)
 *   receives every workspace's notifications, routed by their `app_id` to the connections made
 *   to that Intercom workspace (its id read at connect, intercom-workspace.ts); a notification of a
 *   workspace no one connected is answered 200 and dropped, since error answers would make
 *   Intercom pause the app's deliveries to everyone. The older per-connection URL still works, and
 *   takes only its own workspace's notifications.
 * Zendesk's URLs are per connection (the webhook is created at connect in the account).
 * A delivery whose provider timestamp is more than 5 minutes away from now is refused like a bad
 * signature (401): a captured delivery cannot be replayed later. Activity ids are the provider's
 * (`zendesk:ticket:{id}:opened`…), shared with the Zendesk backfill, so a retried delivery, or a
 * ticket both exported and delivered, is stored once (storeActivities).
 *
 * The signature is over the exact bytes received, which the router hands to preParse only; Zendesk's
 * key is per connection (read from PostgreSQL), so preParse keeps the bytes for the handler,
 * keyed by the request's headers object, which the handler receives as the same object.
 */

const MAX_SKEW_MS = 5 * 60_000;
const LOOKUP_TIMEOUT_MS = 5_000;

interface ConnRow {
  tenant_id: string;
  access_token: string | null;
  subdomain: string | null;
  webhook_secret: string | null;
  provider_account_id: string | null;
}

type Activity = ActivityPush['activities'][number];

const ZENDESK_CLOSED = new Set(['solved', 'closed']);
const INTERCOM_TOPICS: Record<string, 'ticket_opened' | 'ticket_closed'> = {
  'conversation.user.created': 'ticket_opened',
  'conversation.admin.closed': 'ticket_closed',
};

const bad = (why: string) => new ApiError('invalid_signature', why);
const NOTHING = { received: 0, duplicates: 0, unmatched: 0, events: 0 };

function sameBytes(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Zendesk's signature: base64(HMAC-SHA256(secret, timestamp + body)). */
export function zendeskSignature(secret: string, timestamp: string, raw: Buffer): string {
  return createHmac('sha256', secret).update(timestamp).update(raw).digest('base64');
}

/** Intercom's signature: `sha1=` + hex(HMAC-SHA1(client secret, body)). */
export function intercomSignature(secret: string, raw: Buffer): string {
  return `sha1=${createHmac('sha1', secret).update(raw).digest('hex')}`;
}

/** A Zendesk ticket event as a ticket activity, or null for an event that produces none. */
export function zendeskActivity(e: ZendeskEvent): { ticketId: string; type: Activity['type'] } | null {
  const ticketId = String(e.detail?.id ?? /^zen:ticket:(\d+)$/.exec(e.subject ?? '')?.[1] ?? '');
  if (!ticketId) return null;
  if (e.type === 'zen:event-type:ticket.created') return { ticketId, type: 'ticket_opened' };
  if (e.type === 'zen:event-type:ticket.status_changed') {
    // `event.current` is the new status ("SOLVED"); some payloads nest it ({status}); else the ticket's.
    const cur = e.event?.current as unknown;
    const nested = typeof cur === 'object' && cur !== null ? (cur as { status?: unknown }).status : cur;
    const current = String(nested ?? e.detail?.status ?? '').toLowerCase();
    if (ZENDESK_CLOSED.has(current)) return { ticketId, type: 'ticket_closed' };
  }
  return null;
}

/** The conversation's requester in an Intercom notification: its author when a user or lead wrote it. */
export function intercomRequester(item: Record<string, unknown>): string | undefined {
  const source = item.source as { author?: { type?: unknown; email?: unknown } } | undefined;
  const author = source?.author;
  if (author && author.type !== 'admin' && author.type !== 'bot' && typeof author.email === 'string')
    return author.email;
  const user = item.user as { email?: unknown } | undefined;
  return typeof user?.email === 'string' ? user.email : undefined;
}

const isEmail = (x: string | undefined): x is string => !!x && /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(x) && x.length <= 320;

export function ticketingWebhookRoutes(d: IntegrationDeps): Route[] {
  const sql: Sql = d.sql;
  const bodies = new WeakMap<object, Buffer>();
  const keep = (req: { headers: Record<string, string> }, raw: Buffer) => void bodies.set(req.headers, raw);

  async function connection(name: 'zendesk' | 'intercom', id: string): Promise<ConnRow> {
    const [row] = await sql<ConnRow[]>`
      SELECT tenant_id::text, access_token, subdomain, webhook_secret, provider_account_id FROM integrations
      WHERE name = ${name} AND connection_id = ${id} AND status = 'connected'`;
    if (!row) throw notFound('Connection');
    return row;
  }

  function fresh(at: number): void {
    if (!Number.isFinite(at) || Math.abs(Date.now() - at) > MAX_SKEW_MS)
      throw bad("The delivery's timestamp is missing or more than 5 minutes away: refused as a replay.");
  }

  /** The requester's e-mail address from Zendesk's Users API (GET /api/v2/users/{id}). */
  async function zendeskRequester(c: Ctx, row: ConnRow, requesterId: string): Promise<string | undefined> {
    const p = d.providers.zendesk;
    if (!p || !d.dataCipher || !row.access_token) return undefined;
    const api = forConnection(p, row.subdomain).apiUrl;
    let res: Response;
    try {
      res = await fetch(`${api}/api/v2/users/${encodeURIComponent(requesterId)}.json`, {
        headers: { authorization: `Bearer ${d.dataCipher.decrypt(row.access_token)}`, accept: 'application/json' },
        signal: AbortSignal.timeout(LOOKUP_TIMEOUT_MS),
      });
    } catch (err) {
      c.log.warn({ err: String(err) }, 'zendesk user look-up failed');
      throw new ApiError('service_unavailable', 'Zendesk could not be reached; the delivery can be retried.');
    }
    const body = (await res.json().catch(() => null)) as { user?: { email?: unknown } } | null;
    if (res.status === 404) return undefined;
    if (res.status === 429 || res.status >= 500) {
      throw new ApiError('service_unavailable', `Zendesk answered HTTP ${res.status}; the delivery can be retried.`);
    }
    if (res.status === 401 || res.status === 403) {
      // A token Zendesk disowns, or one without `read`: only a new connection helps. Zendesk retries
      // the delivery a few times; the backfill of the new connection brings what was missed.
      const reason =
        res.status === 401
          ? tokenDisowned('Zendesk', 'zendesk')
          : 'the provider refused for a missing permission: zendesk needs the scope read; an admin must connect ' +
            'it again granting it';
      await sql`
        UPDATE integrations SET status = 'error', error = ${reason}, updated_at = now()
        WHERE name = 'zendesk' AND connection_id = ${c.params.connection_id} AND status = 'connected'`;
      throw new ApiError('service_unavailable', `Zendesk answered HTTP ${res.status} to the requester look-up.`);
    }
    if (res.status !== 200) {
      c.log.warn({ status: res.status }, 'zendesk user look-up refused');
      return undefined;
    }
    return typeof body?.user?.email === 'string' ? body.user.email : undefined;
  }

  async function zendesk(c: Ctx): Promise<Reply> {
    const raw = bodies.get(c.headers) ?? Buffer.alloc(0);
    const row = await connection('zendesk', c.params.connection_id);
    const secret = row.webhook_secret && d.dataCipher ? d.dataCipher.decrypt(row.webhook_secret) : undefined;
    const key = secret ?? d.providers.zendesk?.signingSecret;
    const ts = c.headers['x-zendesk-webhook-signature-timestamp'] ?? '';
    const given = Buffer.from(c.headers['x-zendesk-webhook-signature'] ?? '', 'base64');
    if (!key || !ts || !sameBytes(Buffer.from(zendeskSignature(key, ts, raw), 'base64'), given))
      throw bad('X-Zendesk-Webhook-Signature is missing or does not match the timestamp and body.');
    fresh(Date.parse(ts));
    const e = c.body as ZendeskEvent;
    const a = zendeskActivity(e);
    if (!a) return json(200, NOTHING);
    const requesterId = e.detail?.requester_id;
    const email = requesterId === undefined ? undefined : await zendeskRequester(c, row, String(requesterId));
    const at = a.type === 'ticket_opened' ? (e.detail?.created_at ?? e.time) : (e.time ?? e.detail?.updated_at);
    return store(row.tenant_id, 'zendesk', {
      id: `zendesk:ticket:${a.ticketId}:${a.type === 'ticket_opened' ? 'opened' : 'closed'}`,
      type: a.type,
      occurred_at: validTime(at),
      participants: isEmail(email) ? [email] : [],
    });
  }

  /** A notification whose signature and time are good, as the activity it carries (null: none). */
  function intercomNotification(c: Ctx): { n: IntercomNotification; activity: Activity | null } {
    const raw = bodies.get(c.headers) ?? Buffer.alloc(0);
    const secret = d.providers.intercom?.clientSecret;
    const given = Buffer.from(c.headers['x-hub-signature'] ?? '');
    if (!secret || !sameBytes(Buffer.from(intercomSignature(secret, raw)), given))
      throw bad('X-Hub-Signature is missing or is not sha1=<hex HMAC-SHA1 of the body keyed by the client secret>.');
    const n = c.body as IntercomNotification;
    fresh(n.created_at * 1000);
    const type = INTERCOM_TOPICS[n.topic];
    const item = n.data.item as Record<string, unknown>;
    const id = item.id;
    if (!type || (typeof id !== 'string' && typeof id !== 'number')) return { n, activity: null };
    const email = intercomRequester(item);
    return {
      n,
      activity: {
        id: `intercom:conversation:${id}:${type === 'ticket_opened' ? 'opened' : 'closed'}`,
        type,
        occurred_at: new Date(n.created_at * 1000).toISOString(),
        participants: isEmail(email) ? [email] : [],
      },
    };
  }

  /** The app's one URL: each workspace connected to the notification's Intercom workspace gets it. */
  async function intercomApp(c: Ctx): Promise<Reply> {
    const { n, activity } = intercomNotification(c);
    if (!activity) return json(200, NOTHING);
    const rows = n.app_id
      ? await sql<Array<{ tenant_id: string }>>`
          SELECT tenant_id::text FROM integrations
          WHERE name = 'intercom' AND provider_account_id = ${n.app_id} AND status = 'connected'`
      : [];
    if (rows.length === 0) c.log.info({ app_id: n.app_id }, 'intercom notification of a workspace no one connected');
    const sum = { ...NOTHING };
    for (const r of rows) {
      const one = await storeActivities(sql, r.tenant_id, 'intercom', [activity]);
      sum.received += one.received;
      sum.duplicates += one.duplicates;
      sum.unmatched += one.unmatched;
      sum.events += one.events;
    }
    return json(200, sum);
  }

  /**
   * The per-connection URL (the only one before the app-level route). Registered as the app's URL it
   * would receive every Intercom workspace's notifications: those of another workspace than the one
   * the connection was made to are dropped (a connection from before the workspace was recorded
   * takes them all, as it always did).
   */
  async function intercomConnection(c: Ctx): Promise<Reply> {
    const row = await connection('intercom', c.params.connection_id);
    const { n, activity } = intercomNotification(c);
    if (!activity) return json(200, NOTHING);
    if (row.provider_account_id !== null && n.app_id !== row.provider_account_id) {
      c.log.info({ app_id: n.app_id }, "intercom notification of another workspace than the connection's");
      return json(200, NOTHING);
    }
    return store(row.tenant_id, 'intercom', activity);
  }

  async function store(tenantId: string, name: string, a: Activity): Promise<Reply> {
    return json(200, await storeActivities(sql, tenantId, name, [a]));
  }

  const common = {
    tag: 'Integrations',
    auth: 'none' as const,
    method: 'POST' as const,
    preParse: keep,
    errors: [401, 404, 413, 415, 503],
    responses: { 200: { description: 'What was stored.', schema: WebhookAnswer } },
  };
  return [
    {
      ...common,
      params: WebhookParams,
      path: '/v1/integrations/zendesk/webhooks/{connection_id}',
      summary: "Zendesk's webhook (ticket events)",
      description:
        'Created at connect in the Zendesk account (subscriptions zen:event-type:ticket.created and ' +
        'zen:event-type:ticket.status_changed). Authenticated by `X-Zendesk-Webhook-Signature` = ' +
        'base64(HMAC-SHA256(signing secret, `X-Zendesk-Webhook-Signature-Timestamp` + raw body)); a wrong ' +
        'signature, or a timestamp more than 5 minutes away → 401 `invalid_signature`, nothing stored. ' +
        'ticket.created → `ticket_opened`; a status change to solved or closed → `ticket_closed`; matched through ' +
        "the requester's e-mail (read from Zendesk's Users API): a contact's address first, else the customer's " +
        'email_domain. Deduplicated per ticket, with the backfill. Zendesk unreachable for the look-up → 503 ' +
        '(Zendesk retries). Unknown or disconnected connection → 404.',
      body: ZendeskEvent,
      headers: [
        { name: 'X-Zendesk-Webhook-Signature', description: 'base64 HMAC-SHA256 of timestamp + body' },
        { name: 'X-Zendesk-Webhook-Signature-Timestamp', description: 'ISO 8601 time of the delivery' },
      ],
      handler: zendesk,
    },
    {
      ...common,
      path: '/v1/integrations/intercom/webhooks',
      summary: "Intercom's webhook (conversation topics), the app's one URL",
      description:
        "The endpoint URL to set in the Intercom Developer Hub (the app's Webhooks page), subscribed to " +
        'conversation.user.created and conversation.admin.closed: Intercom sends the notifications of every ' +
        'workspace where the app is installed to it. Authenticated by `X-Hub-Signature: sha1=<hex HMAC-SHA1 of ' +
        'the raw body keyed by the app client secret>`; a wrong signature, or a notification `created_at` more ' +
        "than 5 minutes away → 401 `invalid_signature`, nothing stored. Routed by the notification's `app_id` " +
        '(the Intercom workspace, read at connect) to every workspace connected to it; one no one connected → ' +
        "200 with nothing stored (an error would make Intercom pause the app's deliveries). " +
        'conversation.user.created → `ticket_opened`, conversation.admin.closed → `ticket_closed`, matched by the ' +
        "conversation author's e-mail; other topics (ping…) → 200 with nothing stored. Deduplicated per " +
        'conversation; the counts are summed over the workspaces the notification reached.',
      body: IntercomNotification,
      headers: [{ name: 'X-Hub-Signature', description: 'sha1=<hex HMAC-SHA1 of the raw body>' }],
      errors: [401, 413, 415],
      handler: intercomApp,
    },
    {
      tag: 'Integrations',
      auth: 'none',
      method: 'GET',
      path: '/v1/integrations/intercom/webhooks',
      summary: "Intercom's check of the webhook URL",
      description:
        'Intercom checks the endpoint URL with a HEAD request when it is set in the Developer Hub; GET and HEAD ' +
        'answer 200 with no content.',
      handler: async () => ({ status: 200 }),
      responses: { 200: { description: 'The URL takes Intercom notifications.' } },
    },
    {
      ...common,
      params: WebhookParams,
      path: '/v1/integrations/intercom/webhooks/{connection_id}',
      summary: "Intercom's webhook for one connection (the earlier URL)",
      description:
        'As `POST /v1/integrations/intercom/webhooks`, for the one connection: a notification of another ' +
        "Intercom workspace than the connection's → 200 with nothing stored. Unknown or disconnected " +
        'connection → 404. Set the app-level URL in the Developer Hub instead: one app serves every workspace.',
      body: IntercomNotification,
      headers: [{ name: 'X-Hub-Signature', description: 'sha1=<hex HMAC-SHA1 of the raw body>' }],
      handler: intercomConnection,
    },
  ] satisfies Route[];
}

function validTime(x: string | undefined): string {
  const t = x ? Date.parse(x) : Number.NaN;
  return new Date(Number.isFinite(t) ? t : Date.now()).toISOString();
}

/** The ticket events the Zendesk webhook subscribes to. */
export const ZENDESK_SUBSCRIPTIONS = ['zen:event-type:ticket.created', 'zen:event-type:ticket.status_changed'];

/**
 * Creates the connection's webhook in the Zendesk account (POST /api/v2/webhooks) and reads its
 * signing secret (GET /api/v2/webhooks/{id}/signing_secret). A refusal names what is missing: a
 * 403 is the `webhooks:write` scope or an admin role the connecting user lacks.
 */
export async function createZendeskWebhook(
  p: ProviderConfig,
  token: string,
  endpoint: string,
): Promise<{ id: string; secret: string }> {
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json' };
  const call = async (path: string, init: RequestInit) => {
    const res = await fetch(`${p.apiUrl}${path}`, { ...init, headers, signal: AbortSignal.timeout(LOOKUP_TIMEOUT_MS) });
    const body = (await res.json().catch(() => null)) as Record<string, any> | null;
    if (res.status === 403)
      throw new ProviderError(
        'Zendesk refused to create the webhook (HTTP 403): the connection lacks the ' +
          '`webhooks:write` scope or the user is not a Zendesk admin',
        403,
        'insufficient_scope',
      );
    if (res.status < 200 || res.status >= 300)
      throw new ProviderError(`Zendesk answered HTTP ${res.status} to ${init.method} ${path}`, res.status);
    return body ?? {};
  };
  const created = await call('/api/v2/webhooks', {
    method: 'POST',
    body: JSON.stringify({
      webhook: {
        name: 'Customer success platform',
        status: 'active',
        endpoint,
        http_method: 'POST',
        request_format: 'json',
        subscriptions: ZENDESK_SUBSCRIPTIONS,
      },
    }),
  });
  const id = String(created.webhook?.id ?? '');
  if (!id) throw new ProviderError('Zendesk answered no webhook id');
  const s = await call(`/api/v2/webhooks/${encodeURIComponent(id)}/signing_secret`, { method: 'GET' });
  const secret = s.signing_secret?.secret;
  if (typeof secret !== 'string' || !secret) throw new ProviderError('Zendesk answered no signing secret');
  return { id, secret };
}

/** Removes the connection's webhook on disconnect (DELETE /api/v2/webhooks/{id}); best effort. */
export async function deleteZendeskWebhook(p: ProviderConfig, token: string, id: string): Promise<void> {
  const res = await fetch(`${p.apiUrl}/api/v2/webhooks/${encodeURIComponent(id)}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(LOOKUP_TIMEOUT_MS),
  });
  await res.arrayBuffer();
  if (res.status >= 300 && res.status !== 404) throw new ProviderError(`HTTP ${res.status}`, res.status);
}
