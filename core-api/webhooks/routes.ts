import { decodeCursor, page } from '../../lib/cursor.js';
import type { Sql } from '../../lib/pg.js';
import { ApiError, type FieldError, notFound } from '../../lib/problem.js';
import { checkDestination, parseWebhookUrl, type UrlPolicy, WebhookUrlError } from '../../lib/webhooks/address.js';
import { newSecret } from '../../lib/webhooks/signature.js';
import { IdParams, Page, PageQuery } from '../../schemas/core/common.js';
import {
  WEBHOOK_EVENT_TYPES,
  WebhookAttempt,
  WebhookSecret,
  WebhookSubscription,
  WebhookSubscriptionCreate,
  WebhookSubscriptionCreated,
  WebhookSubscriptionPatch,
  WebhookTestSent,
} from '../../schemas/core/webhooks.js';
import type { DataCipher } from '../../lib/credentials/data-cipher.js';
import type { Deps } from '../deps.js';
import { type Ctx, json, noContent, type Reply } from '../http/context.js';
import type { Route } from '../http/router.js';
import {
  type AttemptRow,
  deleteSubscription,
  getSubscription,
  insertSubscription,
  listAttempts,
  listSubscriptions,
  queuePing,
  rotateSecret,
  type SubscriptionRow,
  updateSubscription,
} from './repo.js';

export interface WebhookDeps extends Deps {
  webhookPolicy: UrlPolicy;
  /** Keeps signing secrets encrypted at rest; undefined without DATA_ENCRYPTION_KEY: none can be stored. */
  dataCipher?: DataCipher;
}

/** The previous secret keeps signing beside a rotated one for this long. */
const ROTATION_GRACE_MS = 24 * 3600_000;
const KINDS = new Set<string>(WEBHOOK_EVENT_TYPES);

const toSubscription = (r: SubscriptionRow) => ({
  id: r.id,
  url: r.url,
  events: r.events,
  description: r.description,
  enabled: r.enabled,
  disabled_reason: r.disabled_reason,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

const toAttempt = (r: AttemptRow) => ({
  id: r.id,
  message_id: r.message_id,
  event_type: r.event_type,
  attempt: r.attempt,
  status: r.status,
  response_status: r.response_status,
  duration_ms: r.duration_ms,
  error: r.error,
  created_at: r.created_at.toISOString(),
  next_attempt_at: r.next_attempt_at?.toISOString() ?? null,
});

function checkEvents(events: string[]): void {
  const errors: FieldError[] = [];
  events.forEach((e, i) => {
    if (e === '*') {
      if (events.length > 1)
        errors.push({ field: `events[${i}]`, code: 'invalid_value', message: '"*" stands alone (every kind)' });
    } else if (!KINDS.has(e))
      errors.push({
        field: `events[${i}]`,
        code: 'unknown_event_type',
        message: `unknown event kind ${JSON.stringify(e)}; one of ${WEBHOOK_EVENT_TYPES.join(', ')} or "*"`,
      });
  });
  if (errors.length) throw new ApiError('validation_failed', 'Unknown webhook event kinds.', errors);
}

export function webhookRoutes(d: WebhookDeps): Route[] {
  const sql: Sql = d.sql;

  /** The URL as stored (normalized by the URL parser), refused with 400 naming `url` (lib/webhooks/address.ts). */
  async function checkUrl(raw: string): Promise<string> {
    try {
      const url = parseWebhookUrl(raw, d.webhookPolicy);
      await checkDestination(url.hostname, d.webhookPolicy);
      return url.href;
    } catch (err) {
      if (!(err instanceof WebhookUrlError)) throw err;
      throw new ApiError('validation_failed', `The webhook URL is refused: ${err.message}.`, [
        { field: 'url', code: err.code, message: err.message },
      ]);
    }
  }

  /** A new signing secret, and its ciphertext to store. */
  function secretToStore(): { secret: string; stored: string } {
    if (!d.dataCipher)
      throw new ApiError(
        'secrets_unavailable',
        'The service has no key to keep a signing secret encrypted (DATA_ENCRYPTION_KEY); an operator must ' +
          'configure it.',
      );
    const secret = newSecret();
    return { secret, stored: d.dataCipher.encrypt(secret) };
  }

  async function create(c: Ctx): Promise<Reply> {
    const b = c.body as WebhookSubscriptionCreate;
    checkEvents(b.events);
    const url = await checkUrl(b.url);
    const { secret, stored } = secretToStore();
    const row = await insertSubscription(sql, c.principal.tenantId, {
      url,
      events: b.events,
      description: b.description ?? null,
      enabled: b.enabled ?? true,
      secret: stored,
    });
    return json(201, { ...toSubscription(row), secret }, [
      ['Location', `${d.baseUrl}/v1/webhook-subscriptions/${row.id}`],
    ]);
  }

  async function list(c: Ctx): Promise<Reply> {
    const limit = c.query.limit ?? 50;
    const rows = await listSubscriptions(sql, c.principal.tenantId, { after: decodeCursor(c.query.cursor), limit });
    return json(200, page(rows, limit, toSubscription));
  }

  async function get(c: Ctx): Promise<Reply> {
    const row = await getSubscription(sql, c.principal.tenantId, c.params.id);
    if (!row) throw notFound('Webhook subscription');
    return json(200, toSubscription(row));
  }

  async function patch(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const b = c.body as WebhookSubscriptionPatch;
    if (b.events) checkEvents(b.events);
    const url = b.url !== undefined ? await checkUrl(b.url) : undefined;
    const row = await sql.begin(async (tx) => {
      const t = tx as unknown as Sql;
      const cur = await getSubscription(t, tenantId, c.params.id, true);
      if (!cur) throw notFound('Webhook subscription');
      return updateSubscription(t, tenantId, cur.id, {
        url: url ?? cur.url,
        events: b.events ?? cur.events,
        description: b.description !== undefined ? b.description : cur.description,
        enabled: b.enabled ?? cur.enabled,
      });
    });
    if (!row) throw notFound('Webhook subscription');
    return json(200, toSubscription(row));
  }

  async function remove(c: Ctx): Promise<Reply> {
    if (!(await deleteSubscription(sql, c.principal.tenantId, c.params.id))) throw notFound('Webhook subscription');
    return noContent();
  }

  async function rotate(c: Ctx): Promise<Reply> {
    const { secret, stored } = secretToStore();
    if (!(await rotateSecret(sql, c.principal.tenantId, c.params.id, stored, ROTATION_GRACE_MS)))
      throw notFound('Webhook subscription');
    return json(200, { secret });
  }

  async function deliveries(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    if (!(await getSubscription(sql, tenantId, c.params.id))) throw notFound('Webhook subscription');
    const limit = c.query.limit ?? 50;
    const rows = await listAttempts(sql, tenantId, c.params.id, { after: decodeCursor(c.query.cursor), limit });
    return json(200, page(rows, limit, toAttempt));
  }

  async function test(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const sub = await getSubscription(sql, tenantId, c.params.id);
    if (!sub) throw notFound('Webhook subscription');
    if (!sub.enabled)
      throw new ApiError('subscription_disabled', 'The subscription is disabled; enable it to send it a ping.');
    const messageId = await queuePing(sql, tenantId, sub.id);
    return json(202, { message_id: messageId, status: 'pending' });
  }

  const common = { tag: 'Webhooks', auth: 'bearer' as const };
  const read = { ...common, scope: 'webhooks:read' as const };
  const write = { ...common, scope: 'webhooks:write' as const };
  const rules =
    'Rules, each a 400 `validation_failed` naming the field: `url` not absolute https:// (`invalid_url`, ' +
    '`insecure_url`), its host resolving to a loopback, private, link-local or metadata address ' +
    '(`forbidden_destination`) or not resolving (`unresolvable_host`); an event kind outside the list ' +
    '(`events[i]`, `unknown_event_type`), or `*` beside other kinds. docs/webhooks.md.';
  return [
    {
      ...read,
      method: 'GET',
      path: '/v1/webhook-subscriptions',
      summary: 'List webhook subscriptions',
      description: 'Oldest first, cursor-paginated. Secrets are never listed.',
      query: PageQuery,
      handler: list,
      responses: { 200: { description: 'A page of subscriptions.', schema: Page(WebhookSubscription) } },
    },
    {
      ...write,
      method: 'POST',
      path: '/v1/webhook-subscriptions',
      summary: 'Subscribe a URL to event kinds',
      description:
        `${rules} The answer carries the signing \`secret\` (\`whsec_\` + base64 of 32 random bytes), shown ` +
        'only here and by rotate-secret; it is stored encrypted (AES-256-GCM under DATA_ENCRYPTION_KEY; without a ' +
        'key 503 `secrets_unavailable`). A subscription receives the events that occur while it exists.',
      body: WebhookSubscriptionCreate,
      bodyExample: { url: 'https://example.com/hooks/cs', events: ['health.changed', 'task.created'] },
      handler: create,
      errors: [413, 415, 503],
      responses: { 201: { description: 'The subscription with its secret.', schema: WebhookSubscriptionCreated } },
    },
    {
      ...read,
      method: 'GET',
      path: '/v1/webhook-subscriptions/{id}',
      summary: 'A webhook subscription',
      params: IdParams,
      handler: get,
      errors: [404],
      responses: { 200: { description: 'The subscription.', schema: WebhookSubscription } },
    },
    {
      ...write,
      method: 'PATCH',
      path: '/v1/webhook-subscriptions/{id}',
      summary: 'Change a webhook subscription',
      description:
        `Any of \`url\`, \`events\`, \`description\`, \`enabled\`. ${rules} Enabling a subscription the service ` +
        'disabled (`disabled_reason` gone or failing) clears the reason; its pending deliveries resume.',
      params: IdParams,
      body: WebhookSubscriptionPatch,
      bodyExample: { enabled: false },
      handler: patch,
      errors: [404, 413, 415],
      responses: { 200: { description: 'The subscription.', schema: WebhookSubscription } },
    },
    {
      ...write,
      method: 'DELETE',
      path: '/v1/webhook-subscriptions/{id}',
      summary: 'Delete a webhook subscription',
      description: 'Deletes it with its pending deliveries and its delivery log.',
      params: IdParams,
      handler: remove,
      errors: [404],
      responses: { 204: { description: 'Deleted.' } },
    },
    {
      ...write,
      method: 'POST',
      path: '/v1/webhook-subscriptions/{id}/rotate-secret',
      summary: 'Rotate the signing secret',
      description:
        'A new secret signs every attempt from now on; for 24 hours the previous one signs too (a second `v1,` ' +
        'signature in `webhook-signature`), so receivers can switch without dropping a delivery.',
      params: IdParams,
      handler: rotate,
      errors: [404, 503],
      responses: { 200: { description: 'The new secret, shown only here.', schema: WebhookSecret } },
    },
    {
      ...read,
      method: 'GET',
      path: '/v1/webhook-subscriptions/{id}/deliveries',
      summary: 'Delivery attempts of a subscription',
      description:
        'Every attempt, newest first, cursor-paginated: `pending` while in flight, then `succeeded` (2xx) or ' +
        '`failed` (with `next_attempt_at` while retries remain). The attempts of one message share `message_id`.',
      params: IdParams,
      query: PageQuery,
      handler: deliveries,
      errors: [404],
      responses: { 200: { description: 'A page of attempts.', schema: Page(WebhookAttempt) } },
    },
    {
      ...write,
      method: 'POST',
      path: '/v1/webhook-subscriptions/{id}/test',
      summary: 'Send a ping',
      description:
        'Queues a `ping` (`{"type": "ping", "timestamp", "data": {"subscription_id", "message": "ping"}}`) for this ' +
        'subscription only, sent like any delivery (signed, retried); its attempts appear under deliveries. A ' +
        'disabled subscription → 409 `subscription_disabled`.',
      params: IdParams,
      handler: test,
      errors: [404, 409],
      responses: { 202: { description: 'Queued.', schema: WebhookTestSent } },
    },
  ] satisfies Route[];
}
