import { randomBytes } from 'node:crypto';
import type { Logger } from '../../lib/logger.js';
import { inTenant, inTenants, type Sql } from '../../lib/pg.js';
import { PollingJob } from '../polling-job.js';
import { type AccessTokens, missingScope, retryAfterMs } from './access-tokens.js';
import { type ProviderAnswer, readAnswer } from './provider-answer.js';

interface Due {
  id: string;
  tenant_id: string;
  name: string;
  channel: string;
  target: string;
  text: string;
  attempts: number;
  run_id: string | null;
  customer_id: string | null;
  connected: boolean;
}

/** How often to look for work, and the workspaces to look in (empty: all). */
export interface IntegrationJobOptions {
  pollMs: number;
  tenants: string[];
}

export interface NotifyOptions extends IntegrationJobOptions {
  /** Retries after the first attempt of a 429, a 5xx or an unreachable provider (then `failed`). */
  retries?: number;
  /** The first retry's delay; each next one doubles, with jitter (a Retry-After wins). */
  retryBaseMs?: number;
}

const TIMEOUT_MS = 10_000;
/** How long a claimed notification is held; a sender gone past it leaves the outcome unknown. */
const LEASE_MS = 2 * TIMEOUT_MS + 30_000;

/** Slack's error codes that no retry cures; the first three also say the connection itself is unusable. */
const SLACK_DEAD_AUTH = new Set(['invalid_auth', 'token_revoked', 'account_inactive', 'not_authed', 'token_expired']);
const SLACK_TRANSIENT = new Set([
  'ratelimited',
  'internal_error',
  'fatal_error',
  'service_unavailable',
  'request_timeout',
]);

/** One attempt's outcome. */
interface Outcome {
  status: number | null;
  error: string | null;
  /** Retrying cannot help (or could deliver twice): `failed` now. */
  final?: boolean;
  /** The provider asked to wait this long (Retry-After). */
  waitMs?: number;
  /** The integration itself is unusable: it goes to `error` with this reason. */
  integrationError?: string;
}

/**
 * Sends the notifications playbooks queued (integration_notifications) through the connected
 * integration, after the evaluation that queued them committed, in each provider's own API:
 * - slack: `POST {api}/chat.postMessage` `{channel, text}` with the bot token; Slack answers HTTP
 *   200 with `"ok": false` and its error code on failure: `ratelimited` waits Retry-After,
 *   `channel_not_found`, `not_in_channel` and the like are final, `invalid_auth`/`token_revoked`
 *   also put the integration in `error`;
 * - teams: Microsoft Graph `POST {api}/teams/{team-id}/channels/{channel-id}/messages`, the target
 *   written `team-id/channel-id`;
 * - email: Gmail `POST {api}/gmail/v1/users/me/messages/send` `{raw}` (an RFC 5322 message,
 *   base64url) or Graph `POST {api}/me/sendMail`, whichever is connected;
 * each with the connection's access token through AccessTokens (refreshed first when due; a 401
 * costs one refresh and one retry). A 429, a 5xx or an unreachable provider is retried after a
 * backoff with jitter (Retry-After when the provider gives one), at most `retries` times; a 403 for
 * a missing scope puts the integration in `error` naming the scope; other refusals are final.
 * Never twice: a claim marks the row in flight under a lease (FOR UPDATE SKIP LOCKED, so instances
 * share the queue); a provider that answered 2xx is recorded `sent` and never called again; a
 * request that timed out, or whose sender died mid-attempt, is `failed` as delivery_unknown rather
 * than sent again, since the provider may have accepted it. A final failure is written on the
 * playbook run's entry and on the integration (last_error).
 */
export class Notifier extends PollingJob {
  private readonly retries: number;
  private readonly retryBaseMs: number;

  constructor(
    private readonly sql: Sql,
    private readonly tokens: AccessTokens | undefined,
    private readonly log: Logger,
    private readonly o: NotifyOptions,
  ) {
    super(log, 'integration notifications', o.pollMs);
    this.retries = o.retries ?? 3;
    this.retryBaseMs = o.retryBaseMs ?? 5000;
  }

  /** One claim and its sends; how many were claimed. */
  async once(): Promise<number> {
    const tenants = this.o.tenants;
    // A sender that died mid-attempt: the provider may have accepted it, so it is not sent again.
    await this.sql`
      UPDATE integration_notifications n SET status = 'failed', in_flight = false, updated_at = now(),
        error = 'delivery_unknown: the attempt was interrupted; not sent again, the provider may have accepted it'
      WHERE in_flight AND next_attempt_at < now()
        AND ${inTenants(tenants, 'n')}`;
    const due = await this.sql<Due[]>`
      WITH c AS (
        SELECT id FROM integration_notifications
        WHERE status = 'pending' AND NOT in_flight AND next_attempt_at <= now()
          AND ${inTenants(tenants)}
        ORDER BY next_attempt_at LIMIT 50 FOR UPDATE SKIP LOCKED
      )
      UPDATE integration_notifications n SET attempts = n.attempts + 1, in_flight = true,
        next_attempt_at = now() + ${LEASE_MS}::float8 * interval '1 ms', updated_at = now()
      FROM c WHERE n.id = c.id
      RETURNING n.id::text, n.tenant_id::text, n.name, n.channel, n.target, n.text, n.attempts,
        n.run_id::text, n.customer_id::text,
        EXISTS (SELECT 1 FROM integrations i
          WHERE i.tenant_id = n.tenant_id AND i.name = n.name AND i.status = 'connected') AS connected`;
    await Promise.all(due.map((d) => this.send(d)));
    return due.length;
  }

  private async attempt(d: Due): Promise<Outcome> {
    if (!d.connected || !this.tokens) return { status: null, error: 'integration_not_connected', final: true };
    const request = buildRequest(d);
    if ('error' in request) return { status: null, error: request.error, final: true };
    try {
      const res = await this.tokens.call({ tenantId: d.tenant_id, name: d.name }, (token, p) =>
        post(`${p.apiUrl}${request.path}`, token, request.body),
      );
      return judge(d.name, res);
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code === 'INTEGRATION_NOT_CONNECTED')
        return { status: null, error: 'integration_not_connected', final: true };
      if (code === 'INTEGRATION_REFRESH_REFUSED') return { status: null, error: (err as Error).message, final: true };
      if ((err as Error).name === 'TimeoutError')
        return {
          status: null,
          error: `delivery_unknown: no answer in ${TIMEOUT_MS} ms; not sent again, the provider may have accepted it`,
          final: true,
        };
      // Nothing reached the provider (refused connection, DNS, a token endpoint down): safe to retry.
      return { status: null, error: String((err as Error).message ?? err).slice(0, 300) };
    }
  }

  private async send(d: Due): Promise<void> {
    const out = await this.attempt(d);
    const c = { tenantId: d.tenant_id, name: d.name };
    if (out.integrationError && this.tokens) await this.tokens.fail(c, out.integrationError);
    const retryIn =
      out.error !== null && !out.final && d.attempts <= this.retries
        ? (out.waitMs ?? backoff(this.retryBaseMs, d.attempts))
        : undefined;
    const status = out.error === null ? 'sent' : retryIn !== undefined ? 'pending' : 'failed';
    await this.sql`
      UPDATE integration_notifications SET status = ${status}, in_flight = false,
        next_attempt_at = now() + ${retryIn ?? 0}::float8 * interval '1 ms',
        response_status = ${out.status}, error = ${out.error}, updated_at = now()
      WHERE id = ${d.id}`;
    if (status === 'failed' && out.error !== 'integration_not_connected') await this.recordFailure(d, out.error!);
    if (out.error)
      this.log.info({ id: d.id, name: d.name, attempt: d.attempts, error: out.error }, 'notification not sent');
  }

  /** A final failure is shown on the playbook run's notify entry and on the integration. */
  private async recordFailure(d: Due, error: string): Promise<void> {
    await this.sql`
      UPDATE integrations SET last_error = ${`notification to ${d.target}: ${error}`}, last_error_at = now()
      WHERE ${inTenant(d.tenant_id)} AND name = ${d.name}`;
    if (!d.run_id || !d.customer_id) return;
    await this.sql`
      UPDATE playbook_runs r SET actions = (
        SELECT jsonb_agg(CASE WHEN x.e->>'type' = 'notify' AND x.e->>'customer_id' = ${d.customer_id}
            AND x.e->>'via' = ${d.name} AND x.e->>'status' = 'succeeded'
          THEN x.e || jsonb_build_object('status', 'failed', 'reason', ${error}::text) ELSE x.e END ORDER BY x.i)
        FROM jsonb_array_elements(r.actions) WITH ORDINALITY AS x (e, i))
      WHERE r.id = ${d.run_id} AND ${inTenant(d.tenant_id, 'r')} AND jsonb_array_length(r.actions) > 0`;
  }
}

/** Exponential backoff with jitter: base·2^(n−1), between half and all of it. */
function backoff(baseMs: number, attempt: number): number {
  return Math.round(baseMs * 2 ** (attempt - 1) * (0.5 + Math.random() / 2));
}

const EMAIL = /^[^\s@<>"',;]+@[^\s@<>"',;]+\.[^\s@<>"',;]+$/;

/** The provider's path and body for a notification, or why its target cannot be used. */
export function buildRequest(d: {
  name: string;
  target: string;
  text: string;
}): { path: string; body: string } | { error: string } {
  switch (d.name) {
    case 'slack':
      return { path: '/chat.postMessage', body: JSON.stringify({ channel: d.target, text: d.text }) };
    case 'teams': {
      const m = /^([^/\s]+)\/([^/\s]+)$/.exec(d.target);
      if (!m) return { error: 'invalid_target: a teams target is written team-id/channel-id' };
      return {
        path: `/teams/${encodeURIComponent(m[1])}/channels/${encodeURIComponent(m[2])}/messages`,
        body: JSON.stringify({ body: { contentType: 'text', content: d.text } }),
      };
    }
    case 'gmail':
    case 'outlook': {
      if (!EMAIL.test(d.target) || d.target.length > 320)
        return { error: 'invalid_target: an email target is one e-mail address' };
      const subject = subjectOf(d.text);
      if (d.name === 'gmail')
        return {
          path: '/gmail/v1/users/me/messages/send',
          body: JSON.stringify({ raw: Buffer.from(rfc5322(d.target, subject, d.text)).toString('base64url') }),
        };
      return {
        path: '/me/sendMail',
        body: JSON.stringify({
          message: {
            subject,
            body: { contentType: 'Text', content: d.text },
            toRecipients: [{ emailAddress: { address: d.target } }],
          },
          saveToSentItems: true,
        }),
      };
    }
    default:
      return { error: `invalid_target: ${d.name} does not send notifications` };
  }
}

const subjectOf = (text: string) => {
  const line = text.split(/\r?\n/, 1)[0].trim();
  return line.length > 120 ? `${line.slice(0, 117)}...` : line || 'Notification';
};

/** A plain-text RFC 5322 message; From is the connected mailbox (Gmail fills it in). */
export function rfc5322(to: string, subject: string, text: string): string {
  const encoded = /^[\x20-\x7e]*$/.test(subject) ? subject : `=?UTF-8?B?${Buffer.from(subject).toString('base64')}?=`;
  const body = Buffer.from(text).toString('base64').replace(/.{76}/g, '$&\r\n');
  return [
    `To: ${to}`,
    `Subject: ${encoded}`,
    `Message-ID: <${randomBytes(12).toString('hex')}@notify.invalid>`,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset="UTF-8"',
    'Content-Transfer-Encoding: base64',
    '',
    body,
  ].join('\r\n');
}

/** What the provider's answer means for the notification. */
function judge(name: string, res: ProviderAnswer): Outcome {
  const b = (typeof res.body === 'object' && res.body !== null ? res.body : {}) as Record<string, any>;
  const status = res.status;
  if (status === 429) return { status, error: 'HTTP 429 rate limited', waitMs: retryAfterMs(res.retryAfter, 1000) };
  if (status >= 500)
    return { status, error: `HTTP ${status}`, waitMs: res.retryAfter ? retryAfterMs(res.retryAfter, 0) : undefined };
  if (status === 401) return { status, error: 'HTTP 401' };
  const scope = missingScope(name, status, res.wwwAuthenticate, res.body);
  if (scope) return { status, error: scope, final: true, integrationError: scope };
  if (status < 200 || status >= 300) {
    const code = typeof b.error === 'string' ? b.error : typeof b.error?.code === 'string' ? b.error.code : undefined;
    return { status, error: `HTTP ${status}${code ? ` ${code}` : ''}`, final: true };
  }
  if (name === 'slack' && b.ok !== true) {
    const code = typeof b.error === 'string' ? b.error : 'not_ok';
    const error = `slack: ${code}`;
    if (code === 'ratelimited') return { status, error, waitMs: retryAfterMs(res.retryAfter, 1000) };
    if (SLACK_TRANSIENT.has(code)) return { status, error };
    if (SLACK_DEAD_AUTH.has(code))
      return {
        status,
        error,
        final: true,
        integrationError: `Slack refused the token (${code}): an admin must connect slack again`,
      };
    return { status, error, final: true };
  }
  return { status, error: null };
}

async function post(url: string, token: string, body: string): Promise<ProviderAnswer> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json; charset=utf-8' },
    body,
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  return readAnswer(res);
}

/**
 * Refreshes access tokens before they expire, so that an idle connection stays usable: every
 * poll, the connected integrations whose token ends within the margin and that have a refresh
 * token go through AccessTokens, which shares the refresh with any send of the same connection
 * (in this process or another), keeps a rotated refresh token, and puts an integration whose
 * refresh the provider refuses in `error` with the reason. A provider that cannot be reached is
 * tried again at the next poll.
 */
export class TokenRefresher extends PollingJob {
  constructor(
    private readonly sql: Sql,
    private readonly tokens: AccessTokens | undefined,
    private readonly log: Logger,
    private readonly o: IntegrationJobOptions,
  ) {
    super(log, 'integration token refresh', o.pollMs);
  }

  async once(): Promise<number> {
    const tokens = this.tokens;
    if (!tokens) return 0;
    const rows = await this.sql<Array<{ tenant_id: string; name: string; access_token: string }>>`
      SELECT tenant_id::text, name, access_token FROM integrations
      WHERE status = 'connected' AND refresh_token IS NOT NULL AND access_token IS NOT NULL
        AND token_expires_at < now() + ${tokens.marginMs}::float8 * interval '1 ms'
        AND ${inTenants(this.o.tenants)}
      ORDER BY token_expires_at LIMIT 20`;
    for (const r of rows) {
      await tokens.refreshDue({ tenantId: r.tenant_id, name: r.name }, r.access_token).catch((err: unknown) => {
        const code = (err as { code?: unknown }).code;
        // A refusal is logged and stored where it happened; a disconnected one needs nothing.
        if (code === 'INTEGRATION_REFRESH_REFUSED' || code === 'INTEGRATION_NOT_CONNECTED') return;
        this.log.warn({ tenantId: r.tenant_id, name: r.name, err: String(err) }, 'integration token refresh failed');
      });
    }
    return rows.length;
  }
}
