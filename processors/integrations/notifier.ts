import { refreshTokens } from '../../lib/integrations/oauth.js';
import type { Providers } from '../../lib/integrations/providers.js';
import type { TokenCipher } from '../../lib/integrations/tokens.js';
import type { Logger } from '../../lib/logger.js';
import type { Sql } from '../../lib/pg.js';
import { PollingJob } from '../polling-job.js';

interface Due {
  id: string;
  tenant_id: string;
  name: string;
  channel: string;
  target: string;
  text: string;
  attempts: number;
  access_token: string | null;
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
 * each with the connection's access token as bearer. A claim locks due rows FOR UPDATE SKIP LOCKED
 * and pushes them past the attempt (a lease), so instances share the queue and a dead one leaves
 * them due again; failures are retried after 5 s, 1 min and 5 min, then `failed` with the reason.
 */
export class Notifier extends PollingJob {
  constructor(
    private readonly sql: Sql,
    private readonly providers: Providers,
    private readonly cipher: TokenCipher | undefined,
    private readonly log: Logger,
    pollMs: number,
  ) {
    super(log, 'integration notifications', pollMs);
  }

  /** One claim and its sends; how many were claimed. */
  async once(): Promise<number> {
    const due = await this.sql<Due[]>`
      WITH c AS (
        SELECT id FROM integration_notifications
        WHERE status = 'pending' AND next_attempt_at <= now()
        ORDER BY next_attempt_at LIMIT 50 FOR UPDATE SKIP LOCKED
      )
      UPDATE integration_notifications n SET attempts = n.attempts + 1,
        next_attempt_at = now() + interval '1 minute', updated_at = now()
      FROM c WHERE n.id = c.id
      RETURNING n.id::text, n.tenant_id::text, n.name, n.channel, n.target, n.text, n.attempts,
        (SELECT i.access_token FROM integrations i
         WHERE i.tenant_id = n.tenant_id AND i.name = n.name AND i.status = 'connected') AS access_token`;
    await Promise.all(due.map((d) => this.send(d)));
    return due.length;
  }

  private async send(d: Due): Promise<void> {
    const p = this.providers[d.name as keyof Providers];
    let status: number | null = null;
    let error: string | null = null;
    if (!d.access_token || !this.cipher) error = 'integration_not_connected';
    else if (!p?.apiUrl) error = `INTEGRATION_${d.name.toUpperCase()}_API_URL is not configured`;
    else {
      const slack = d.name === 'slack';
      try {
        const res = await fetch(`${p.apiUrl}/${slack ? 'chat.postMessage' : 'messages'}`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${this.cipher.decrypt(d.access_token)}`,
            'content-type': 'application/json; charset=utf-8',
          },
          body: JSON.stringify(slack ? { channel: d.target, text: d.text } : { to: d.target, text: d.text }),
          signal: AbortSignal.timeout(TIMEOUT_MS),
        });
        status = res.status;
        const body = await res.text();
        if (status < 200 || status >= 300) error = `HTTP ${status}`;
        else if (slack && /"ok"\s*:\s*false/.test(body))
          error = `slack: ${/"error"\s*:\s*"([^"]*)"/.exec(body)?.[1] ?? 'not ok'}`;
      } catch (err) {
        error = (err as Error).name === 'TimeoutError' ? `timeout after ${TIMEOUT_MS} ms` : String(err).slice(0, 300);
      }
    }
    const retry = error && error !== 'integration_not_connected' ? RETRY_MS[d.attempts - 1] : undefined;
    await this.sql`
      UPDATE integration_notifications SET
        status = ${error === null ? 'sent' : retry !== undefined ? 'pending' : 'failed'},
        next_attempt_at = now() + ${retry ?? 0}::float8 * interval '1 ms',
        response_status = ${status}, error = ${error}, updated_at = now()
      WHERE id = ${d.id}`;
    if (error) this.log.info({ id: d.id, name: d.name, attempt: d.attempts, error }, 'notification not sent');
  }
}

/**
 * Refreshes access tokens before they expire: every poll, the connected integrations whose token
 * ends within 5 minutes and that have a refresh token get new tokens from the provider (rotated
 * refresh tokens are kept); a provider that refuses leaves the integration in `error` with the
 * reason. Rows are locked while refreshed, so two instances never refresh one twice.
 */
export class TokenRefresher extends PollingJob {
  constructor(
    private readonly sql: Sql,
    private readonly providers: Providers,
    private readonly cipher: TokenCipher | undefined,
    private readonly log: Logger,
    pollMs: number,
  ) {
    super(log, 'integration token refresh', pollMs);
  }

  async once(): Promise<number> {
    const cipher = this.cipher;
    if (!cipher) return 0;
    return (await this.sql.begin(async (tx) => {
      const rows = await tx<Array<{ tenant_id: string; name: string; refresh_token: string }>>`
        SELECT tenant_id::text, name, refresh_token FROM integrations
        WHERE status = 'connected' AND refresh_token IS NOT NULL AND token_expires_at < now() + interval '5 minutes'
        ORDER BY token_expires_at LIMIT 20 FOR UPDATE SKIP LOCKED`;
      for (const r of rows) {
        const p = this.providers[r.name as keyof Providers];
        try {
          if (!p) throw new Error('the provider is no longer configured');
          const t = await refreshTokens(p, cipher.decrypt(r.refresh_token));
          await tx`
            UPDATE integrations SET access_token = ${cipher.encrypt(t.access_token)},
              refresh_token = ${t.refresh_token ? cipher.encrypt(t.refresh_token) : r.refresh_token},
              token_expires_at = ${t.expires_in ? new Date(Date.now() + t.expires_in * 1000) : null}, updated_at = now()
            WHERE tenant_id = ${r.tenant_id} AND name = ${r.name}`;
        } catch (err) {
          const reason = `token refresh failed: ${(err as Error).message}`;
          this.log.warn({ tenantId: r.tenant_id, name: r.name, err: reason }, 'integration token refresh failed');
          await tx`
            UPDATE integrations SET status = 'error', error = ${reason}, updated_at = now()
            WHERE tenant_id = ${r.tenant_id} AND name = ${r.name}`;
        }
      }
      return rows.length;
    })) as number;
  }
}
