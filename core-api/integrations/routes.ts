import { createHash, createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { ACTIVITY_TYPES, CONNECTOR_NAMES, CONNECTORS, isConnector } from '../../lib/integrations/connectors.js';
import { authorizationUrl, exchangeCode, ProviderError, revokeToken } from '../../lib/integrations/oauth.js';
import { forConnection, needsSubdomain, SUBDOMAIN } from '../../lib/integrations/providers.js';
import { inTenant, type Sql } from '../../lib/pg.js';
import { fitsDateTime } from '../../lib/row-binary.js';
import { ApiError, type FieldError, notFound } from '../../lib/problem.js';
import {
  ActivityAnswer,
  ActivityPush,
  CallbackQuery,
  ConnectAnswer,
  EventsParams,
  IntegrationList,
  IntegrationParams,
} from '../../schemas/core/integrations.js';
import type { IntegrationDeps } from '../deps.js';
import { type Ctx, json, noContent, type Reply } from '../http/context.js';
import type { Route } from '../http/router.js';
import { errorPage, noticePage } from '../oauth/page.js';
import { ConnectQuery } from '../../schemas/core/integration-webhooks.js';
import { storeActivities } from './activities.js';
import { loadSyncStatus, syncNowRoute, syncStatusFields } from './sync-status.js';
import { type IntercomWorkspace, intercomWorkspace } from './intercom-workspace.js';
import { createZendeskWebhook, deleteZendeskWebhook, ticketingWebhookRoutes } from './webhooks.js';

interface Row {
  name: string;
  status: string;
  connection_id: string;
  connected_at: Date | null;
  account: string | null;
  error: string | null;
  activities: string;
  unmatched_activities: string;
  access_token: string | null;
  refresh_token: string | null;
  updated_at: Date;
  last_error: string | null;
  last_error_at: Date | null;
  subdomain: string | null;
  webhook_id: string | null;
}

const STATE_TTL_MS = 10 * 60_000;
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const b64url = (n: number) => randomBytes(n).toString('base64url');

/**
 * The integrations (docs/integrations.md): the catalog with each connection's status; connect
 * (OAuth 2.0 authorization code + PKCE S256 at the provider, a single-use state bound to the
 * workspace and connector for 10 minutes); the callback that exchanges the code and keeps the
 * tokens encrypted; disconnect (revoked at the provider when it has a revoke URL); and the push
 * endpoint through which a connected provider's activity becomes the service's own events.
 */
export function integrationRoutes(d: IntegrationDeps): Route[] {
  const sql: Sql = d.sql;
  const redirectUri = (name: string) => `${d.baseUrl}/v1/integrations/${name}/callback`;

  const known = (name: string) => {
    if (!isConnector(name)) throw notFound('Integration');
    return name;
  };

  async function list(c: Ctx): Promise<Reply> {
    // One snapshot: a sync that fails on a missing scope records its error and puts the integration
    // in `error` in one transaction, and two reads on either side of it would answer a `connected`
    // integration with that error.
    const [rows, syncStatus] = (await sql.begin('isolation level repeatable read read only', async (tx) => [
      await tx<Row[]>`
        SELECT name, status, connection_id::text, connected_at, account, error, activities::text,
          unmatched_activities::text, updated_at, last_error, last_error_at FROM integrations WHERE ${c.tenant}`,
      await loadSyncStatus(tx, c.principal.tenantId),
    ])) as [Row[], Awaited<ReturnType<typeof loadSyncStatus>>];
    const byName = new Map(rows.map((r) => [r.name, r]));
    return json(200, {
      data: CONNECTOR_NAMES.map((name) => {
        const r = byName.get(name);
        return {
          name,
          category: CONNECTORS[name].category,
          status: r?.status ?? 'disconnected',
          configured: d.providers[name] !== undefined && d.dataCipher !== undefined,
          connected_at: r?.status === 'connected' ? (r.connected_at?.toISOString() ?? null) : null,
          account: r?.status === 'connected' ? r.account : null,
          error: r?.status === 'error' ? r.error : null,
          connection_id: r?.status === 'connected' ? r.connection_id : null,
          activities: Number(r?.activities ?? 0),
          unmatched_activities: Number(r?.unmatched_activities ?? 0),
          ...syncStatusFields(name, syncStatus, r),
        };
      }),
    });
  }

  /** A new authorization: a pending one is replaced (its state no longer works). */
  async function connect(c: Ctx): Promise<Reply> {
    const name = known(c.params.name);
    const p = d.providers[name];
    if (!p || !d.dataCipher)
      throw new ApiError('integration_not_configured', `The service has no OAuth client configured for ${name}.`);
    // Zendesk: the account's subdomain, given at connect; its URLs are built from it.
    const subdomain = needsSubdomain(p) ? String(c.query.subdomain ?? '').toLowerCase() : null;
    if (subdomain !== null && !SUBDOMAIN.test(subdomain))
      throw new ApiError('validation_failed', `${name} needs the account's subdomain: ?subdomain=<name>.`, [
        { field: 'subdomain', code: 'invalid_value', message: 'the <subdomain> of https://<subdomain>.zendesk.com' },
      ]);
    const state = b64url(32);
    const verifier = b64url(32);
    const expires = new Date(Date.now() + STATE_TTL_MS);
    const [r] = await sql<Array<{ status: string }>>`
      INSERT INTO integrations (tenant_id, name, status, state_hash, state_expires_at, code_verifier, subdomain)
      VALUES (${c.principal.tenantId}, ${name}, 'pending', ${sha256(state)}, ${expires},
        ${d.dataCipher.encrypt(verifier)}, ${subdomain})
      ON CONFLICT (tenant_id, name) DO UPDATE SET status = 'pending', state_hash = EXCLUDED.state_hash,
        state_expires_at = EXCLUDED.state_expires_at, code_verifier = EXCLUDED.code_verifier, error = NULL,
        subdomain = EXCLUDED.subdomain, updated_at = now()
      WHERE integrations.status <> 'connected'
      RETURNING status`;
    if (!r) throw new ApiError('integration_already_connected', `${name} is already connected; disconnect it first.`);
    const url = authorizationUrl(forConnection(p, subdomain), {
      redirectUri: redirectUri(name),
      state,
      challenge: createHash('sha256').update(verifier).digest('base64url'),
    });
    return json(200, { authorization_url: url.href, state, expires_at: expires.toISOString() });
  }

  /**
   * The provider sends the browser back here. The state is consumed first (single use, whatever
   * follows); a provider error or a failed code exchange leaves the integration in `error` with
   * the reason, and the page says why (400).
   */
  async function callback(c: Ctx): Promise<Reply> {
    const name = c.params.name;
    const title = 'Connection failed';
    if (!isConnector(name)) return errorPage(404, title, 'There is no such integration.');
    const q = c.query as { code?: string; state?: string; error?: string; error_description?: string };
    if (!q.state) return errorPage(400, title, 'The link has no state; start the connection again.');
    const [row] = await sql<Array<{ tenant_id: string; code_verifier: string; fresh: boolean; subdomain: string }>>`
      WITH old AS (
        SELECT tenant_id, name, code_verifier, subdomain, state_expires_at > now() AS fresh FROM integrations
        WHERE name = ${name} AND state_hash = ${sha256(q.state)} AND status = 'pending'
        FOR UPDATE
      )
      UPDATE integrations i SET state_hash = NULL, state_expires_at = NULL, code_verifier = NULL, updated_at = now()
      FROM old WHERE i.tenant_id = old.tenant_id AND i.name = old.name
      RETURNING old.tenant_id::text, old.code_verifier, old.fresh, old.subdomain`;
    if (!row || !row.fresh) {
      if (row) await failed(row.tenant_id, name, 'the authorization expired; connect again');
      return errorPage(400, title, 'This link is invalid, expired or already used; start the connection again.');
    }
    const p = d.providers[name];
    if (!p || !d.dataCipher) {
      await failed(row.tenant_id, name, 'the provider is no longer configured');
      return errorPage(400, title, 'The provider is not configured on this service.');
    }
    if (q.error) {
      const reason = `the provider answered ${q.error}${q.error_description ? `: ${q.error_description}` : ''}`;
      await failed(row.tenant_id, name, reason);
      return errorPage(400, title, `The connection was not made: ${reason}.`);
    }
    if (!q.code) {
      await failed(row.tenant_id, name, 'the provider sent no code');
      return errorPage(400, title, 'The provider sent no authorization code.');
    }
    let t: Awaited<ReturnType<typeof exchangeCode>>;
    try {
      const at = forConnection(p, row.subdomain);
      t = await exchangeCode(at, q.code, redirectUri(name), d.dataCipher.decrypt(row.code_verifier));
    } catch (err) {
      const reason = err instanceof ProviderError ? err.message : 'the code exchange failed';
      if (!(err instanceof ProviderError)) c.log.error({ err, name }, 'integration code exchange failed');
      await failed(row.tenant_id, name, reason);
      return errorPage(400, title, `The connection was not made: ${reason}.`);
    }
    const cipher = d.dataCipher;
    // Zendesk: the connection's webhook is created now, in the account, with the new token.
    const connectionId = randomUUID();
    let hook: { id: string; secret: string } | undefined;
    // Intercom: the workspace the token reaches, by which the app's one webhook URL routes deliveries.
    let workspace: IntercomWorkspace | undefined;
    try {
      if (name === 'zendesk') {
        const endpoint = `${d.baseUrl}/v1/integrations/zendesk/webhooks/${connectionId}`;
        hook = await createZendeskWebhook(forConnection(p, row.subdomain), t.access_token, endpoint);
      }
      if (name === 'intercom') workspace = await intercomWorkspace(p, t.access_token);
    } catch (err) {
      const reason = err instanceof ProviderError ? err.message : `the ${name} connection could not be completed`;
      if (!(err instanceof ProviderError)) c.log.error({ err, name }, 'integration set-up at the provider failed');
      await failed(row.tenant_id, name, reason);
      return errorPage(400, title, `The connection was not made: ${reason}.`);
    }
    const account = t.account ?? workspace?.name ?? null;
    await sql`
      UPDATE integrations SET status = 'connected', connection_id = ${connectionId},
        webhook_id = ${hook?.id ?? null}, webhook_secret = ${hook ? cipher.encrypt(hook.secret) : null},
        backfill_cursor = NULL, backfill_lease_until = NULL, backfilled_at = NULL,
        access_token = ${cipher.encrypt(t.access_token)},
        refresh_token = ${t.refresh_token ? cipher.encrypt(t.refresh_token) : null},
        token_expires_at = ${t.expires_in ? new Date(Date.now() + t.expires_in * 1000) : null},
        scope = ${t.scope ?? null}, account = ${account}, provider_account_id = ${workspace?.id ?? null},
        error = NULL, connected_at = now(), updated_at = now()
      WHERE ${inTenant(row.tenant_id)} AND name = ${name}`;
    // The first sync (e-mail, calendar) or the ticket backfill (zendesk) starts now, not at the next look.
    d.notify.integrationWork(row.tenant_id, name);
    return noticePage(200, 'Connected', `${name} is connected${account ? ` as ${account}` : ''}.`);
  }

  async function failed(tenantId: string, name: string, reason: string): Promise<void> {
    await sql`
      UPDATE integrations SET status = 'error', error = ${reason}, updated_at = now()
      WHERE ${inTenant(tenantId)} AND name = ${name} AND status <> 'connected'`;
  }

  /** Revoked at the provider (best effort: a provider that fails is logged), then forgotten. */
  async function disconnect(c: Ctx): Promise<Reply> {
    const name = known(c.params.name);
    const [r] = await sql<Row[]>`
      SELECT status, access_token, refresh_token, subdomain, webhook_id FROM integrations
      WHERE ${c.tenant} AND name = ${name}`;
    const p = d.providers[name] && forConnection(d.providers[name], r?.subdomain);
    if (r?.status === 'connected' && p && r.webhook_id && r.access_token && d.dataCipher)
      await deleteZendeskWebhook(p, d.dataCipher.decrypt(r.access_token), r.webhook_id).catch((err: unknown) =>
        c.log.warn({ err: String(err), name }, 'the Zendesk webhook could not be deleted'),
      );
    if (r?.status === 'connected' && p?.revokeUrl && d.dataCipher) {
      for (const token of [r.refresh_token, r.access_token]) {
        if (!token) continue;
        await revokeToken(p, d.dataCipher.decrypt(token)).catch((err: unknown) =>
          c.log.warn({ err: String(err), name }, 'token revocation failed; the tokens are forgotten anyway'),
        );
      }
    }
    await sql`
      UPDATE integrations SET status = 'disconnected', access_token = NULL, refresh_token = NULL,
        token_expires_at = NULL, state_hash = NULL, state_expires_at = NULL, code_verifier = NULL, error = NULL,
        account = NULL, webhook_id = NULL, webhook_secret = NULL, provider_account_id = NULL,
        updated_at = now()
      WHERE ${c.tenant} AND name = ${name}`;
    return noContent();
  }

  /**
   * The custom path: activity pushed in the provider-neutral shape by a bridge of the workspace's own
   * (the real providers come through the sync and their own webhooks, webhooks.ts).
   * X-Integration-Signature: sha256=<hex HMAC-SHA256 of the raw body>, keyed by the signing secret.
   */
  function checkSignature(req: { headers: Record<string, string>; params: Record<string, string> }, raw: Buffer) {
    const name = req.params.name;
    const secret = isConnector(name) ? d.providers[name]?.signingSecret : undefined;
    const given = /^sha256=([0-9a-f]{64})$/i.exec(req.headers['x-integration-signature'] ?? '');
    const bad = () =>
      new ApiError('invalid_signature', 'X-Integration-Signature is missing or does not match the body.');
    if (!secret || !given) throw bad();
    const want = createHmac('sha256', secret).update(raw).digest();
    if (!timingSafeEqual(want, Buffer.from(given[1], 'hex'))) throw bad();
  }

  async function push(c: Ctx): Promise<Reply> {
    const name = known(c.params.name);
    const b = c.body as ActivityPush;
    const allowed = ACTIVITY_TYPES[CONNECTORS[name].category];
    const errors: FieldError[] = [];
    b.activities.forEach((a, i) => {
      if (!fitsDateTime(Date.parse(a.occurred_at)))
        errors.push({
          field: `activities[${i}].occurred_at`,
          code: 'invalid_value',
          message: 'occurred_at must lie between 1970-01-01T00:00:00Z and 2106-02-07T06:28:15Z (what events can hold)',
        });
      if (!allowed.includes(a.type))
        errors.push({
          field: `activities[${i}].type`,
          code: 'invalid_value',
          message: allowed.length
            ? `a ${name} activity is one of ${allowed.join(', ')}`
            : `${name} pushes no activity (a chat integration only sends notifications)`,
        });
    });
    if (errors.length)
      throw new ApiError(
        'validation_failed',
        'Some activities have a type this provider cannot push, or a time events cannot hold.',
        errors,
      );
    const [conn] = await sql<Array<{ tenant_id: string }>>`
      SELECT tenant_id::text FROM integrations
      WHERE name = ${name} AND connection_id = ${c.params.connection_id} AND status = 'connected'`;
    if (!conn) throw notFound('Connection');
    const r = await storeActivities(sql, conn.tenant_id, name, b.activities);
    return json(202, r);
  }

  const common = { tag: 'Integrations' };
  const admin = { ...common, auth: 'bearer' as const, scope: null, role: 'admin' as const };
  return [
    syncNowRoute(sql, d.notify, known),
    {
      ...common,
      auth: 'bearer',
      scope: null,
      method: 'GET',
      path: '/v1/integrations',
      summary: 'The integrations and their status',
      description:
        'Every connector (gmail, outlook, google_calendar, outlook_calendar, slack, teams, zendesk, intercom) with ' +
        'its status: disconnected, pending (authorization started), connected or error (with the reason in ' +
        '`error`, e.g. a token refresh the provider refused), when the e-mail and calendar connectors last ' +
        'synced (`last_synced_at`), the last failure with its time (`last_error`), and the events each produced ' +
        'in the last 24 hours (`events_24h`). Any valid credential of the workspace.',
      handler: list,
      responses: { 200: { description: 'Every connector.', schema: IntegrationList } },
    },
    {
      ...admin,
      method: 'POST',
      path: '/v1/integrations/{name}/connect',
      summary: 'Start connecting an integration (admin)',
      description:
        "Answers the provider's OAuth 2.0 authorize URL (code + PKCE S256, redirect_uri " +
        '`{base_url}/v1/integrations/{name}/callback`) with a single-use `state` valid 10 minutes; open it in a ' +
        'browser. A pending connection gets a new URL (the old state stops working). Unknown name → 404; no ' +
        'OAuth client configured → 409 `integration_not_configured`; connected → 409 ' +
        '`integration_already_connected`. ' +
        'zendesk needs `?subdomain=` (the account at https://{subdomain}.zendesk.com; missing → 400).',
      params: IntegrationParams,
      query: ConnectQuery,
      handler: connect,
      errors: [400, 404, 409],
      responses: { 200: { description: 'Where to send the user.', schema: ConnectAnswer } },
    },
    {
      ...common,
      auth: 'none',
      method: 'GET',
      path: '/v1/integrations/{name}/callback',
      summary: 'OAuth callback of an integration (browser)',
      description:
        'Where the provider sends the user back: exchanges the code (zendesk: creates the webhook in the account; ' +
        'intercom: reads the Intercom workspace, GET /me), stores the tokens encrypted (AES-256-GCM), ' +
        'and answers a small HTML page. A bad, expired or replayed state → 400 page; a provider error → the ' +
        'integration is `error` with the reason, 400 page.',
      params: IntegrationParams,
      query: CallbackQuery,
      handler: callback,
      errors: [404],
      responses: {
        200: { description: 'Connected (HTML).', contentType: 'text/html' },
        400: { description: 'Not connected, and why (HTML).', contentType: 'text/html' },
      },
    },
    {
      ...admin,
      method: 'DELETE',
      path: '/v1/integrations/{name}',
      summary: 'Disconnect an integration (admin)',
      description:
        'Revokes the tokens at the provider when it has a revoke URL (a failure there is logged, not ' +
        'answered), forgets them, and sets `disconnected`. 204 also when it was not connected.',
      params: IntegrationParams,
      handler: disconnect,
      errors: [404],
      responses: { 204: { description: 'Disconnected.' } },
    },
    {
      ...common,
      auth: 'none',
      method: 'POST',
      path: '/v1/integrations/{name}/events/{connection_id}',
      summary: 'Activity pushed in the provider-neutral shape (the custom path)',
      description:
        'For a bridge of your own (the real providers are read by the sync and their webhooks). ' +
        'Authenticated by `X-Integration-Signature: sha256=<hex HMAC-SHA256 of the raw body keyed by ' +
        'INTEGRATION_<NAME>_SIGNING_SECRET>` (missing or wrong → 401 `invalid_signature`). Each new activity ' +
        '(deduplicated by its id) becomes one event per distinct customer its participants resolve to (a ' +
        "contact's e-mail first, then the customer's email_domain), stored in the event stream with surface " +
        '`integration`; unmatched activity is counted on the integration and dropped. A type the provider ' +
        'cannot push, or an `occurred_at` outside what events hold (1970-01-01T00:00:00Z to ' +
        '2106-02-07T06:28:15Z) → 400 `validation_failed` naming each activity. A connection that is not ' +
        'connected → 404.',
      params: EventsParams,
      body: ActivityPush,
      preParse: checkSignature,
      headers: [{ name: 'X-Integration-Signature', description: 'sha256=<hex HMAC-SHA256 of the raw body>' }],
      handler: push,
      errors: [401, 404, 413, 415],
      responses: { 202: { description: 'What was stored.', schema: ActivityAnswer } },
    },
    ...ticketingWebhookRoutes(d),
  ] satisfies Route[];
}
