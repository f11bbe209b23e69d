import type { Providers } from '../../lib/integrations/providers.js';
import type { Logger } from '../../lib/logger.js';
import type { Sql } from '../../lib/pg.js';
import { PollingJob } from '../polling-job.js';
import type { AccessTokens } from './access-tokens.js';

interface Due {
  id: string;
  tenant_id: string;
  name: string;
  channel: string;
  target: string;
  text: string;
  attempts: number;
  connected: boolean;
}

/** How often to look for work, and the workspaces to look in (empty: all). */
export interface IntegrationJobOptions {
  pollMs: number;
  tenants: string[];
}

/** Delays before the retries of a notification; then it failed. */
const RETRY_MS = [5_000, 60_000, 300_000];
const TIMEOUT_MS = 10_000;

/**
 * Sends the notifications playbooks queued (integration_notifications) through the connected
 * integration, after the evaluation that queued them committed:
 * - slack: `POST {INTEGRATION_SLACK_API_URL}/chat.postMessage` `{channel: target, text}` (a 200 with
 *   `"ok": false` is Slack's way of failing);
 * - teams and e-mail: `POST {API_URL}/messages` `{to: target, text}`;
 * each with the connection's access token as bearer, through AccessTokens (refreshed first when it
 * expires within the margin; a 401 costs one refresh and one retry). A claim locks due rows FOR
 * UPDATE SKIP LOCKED and pushes them past the attempt (a lease), so instances share the queue and a
 * dead one leaves them due again; failures are retried after 5 s, 1 min and 5 min, then `failed`
 * with the reason. An integration that is not connected, or whose refresh the provider refused,
 * fails the notification at once: retrying cannot help before someone connects it again.
 */
export class Notifier extends PollingJob {
  constructor(
    private readonly sql: Sql,
    private readonly providers: Providers,
    private readonly tokens: AccessTokens | undefined,
    private readonly log: Logger,
    private readonly o: IntegrationJobOptions,
  ) {
    super(log, 'integration notifications', o.pollMs);
  }

  /** One claim and its sends; how many were claimed. */
  async once(): Promise<number> {
    const tenants = this.o.tenants;
    const due = await this.sql<Due[]>`
      WITH c AS (
        SELECT id FROM integration_notifications
        WHERE status = 'pending' AND next_attempt_at <= now()
          AND (${tenants.length === 0} OR tenant_id = ANY(${tenants}::uuid[]))
        ORDER BY next_attempt_at LIMIT 50 FOR UPDATE SKIP LOCKED
      )
      UPDATE integration_notifications n SET attempts = n.attempts + 1,
        next_attempt_at = now() + interval '1 minute', updated_at = now()
      FROM c WHERE n.id = c.id
      RETURNING n.id::text, n.tenant_id::text, n.name, n.channel, n.target, n.text, n.attempts,
        EXISTS (SELECT 1 FROM integrations i
          WHERE i.tenant_id = n.tenant_id AND i.name = n.name AND i.status = 'connected') AS connected`;
    await Promise.all(due.map((d) => this.send(d)));
    return due.length;
  }

  private async send(d: Due): Promise<void> {
    const p = this.providers[d.name as keyof Providers];
    let status: number | null = null;
    let error: string | null = null;
    let final = false;
    if (!d.connected || !this.tokens) error = 'integration_not_connected';
    else if (!p?.apiUrl) error = `INTEGRATION_${d.name.toUpperCase()}_API_URL is not configured`;
    else {
      const slack = d.name === 'slack';
      const url = `${p.apiUrl}/${slack ? 'chat.postMessage' : 'messages'}`;
      const body = JSON.stringify(slack ? { channel: d.target, text: d.text } : { to: d.target, text: d.text });
      try {
        const res = await this.tokens.call({ tenantId: d.tenant_id, name: d.name }, (token) => post(url, token, body));
        status = res.status;
        if (status < 200 || status >= 300) error = `HTTP ${status}`;
        else if (slack && /"ok"\s*:\s*false/.test(res.body))
          error = `slack: ${/"error"\s*:\s*"([^"]*)"/.exec(res.body)?.[1] ?? 'not ok'}`;
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        if (code === 'INTEGRATION_NOT_CONNECTED') error = 'integration_not_connected';
        else if (code === 'INTEGRATION_REFRESH_REFUSED') {
          error = (err as Error).message;
          final = true;
        } else
          error = (err as Error).name === 'TimeoutError' ? `timeout after ${TIMEOUT_MS} ms` : String(err).slice(0, 300);
      }
    }
    const retry = error && !final && error !== 'integration_not_connected' ? RETRY_MS[d.attempts - 1] : undefined;
    await this.sql`
      UPDATE integration_notifications SET
        status = ${error === null ? 'sent' : retry !== undefined ? 'pending' : 'failed'},
        next_attempt_at = now() + ${retry ?? 0}::float8 * interval '1 ms',
        response_status = ${status}, error = ${error}, updated_at = now()
      WHERE id = ${d.id}`;
    if (error) this.log.info({ id: d.id, name: d.name, attempt: d.attempts, error }, 'notification not sent');
  }
}

async function post(url: string, token: string, body: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json; charset=utf-8' },
    body,
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  return { status: res.status, body: await res.text() };
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
    const tenants = this.o.tenants;
    const rows = await this.sql<Array<{ tenant_id: string; name: string; access_token: string }>>`
      SELECT tenant_id::text, name, access_token FROM integrations
      WHERE status = 'connected' AND refresh_token IS NOT NULL AND access_token IS NOT NULL
        AND token_expires_at < now() + ${tokens.marginMs}::float8 * interval '1 ms'
        AND (${tenants.length === 0} OR tenant_id = ANY(${tenants}::uuid[]))
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
