import { CONNECTORS, type ConnectorName } from '../../lib/integrations/connectors.js';
import { ProviderError, refreshTokens } from '../../lib/integrations/oauth.js';
import { forConnection, type ProviderConfig, type Providers } from '../../lib/integrations/providers.js';
import type { DataCipher } from '../../lib/credentials/data-cipher.js';
import type { Logger } from '../../lib/logger.js';
import { inTenant, type Sql } from '../../lib/pg.js';
import type { IntegrationMetrics } from '../metrics.js';

/** Tokens that end within this are refreshed before they are used, and by the scheduled refresher. */
export const REFRESH_MARGIN_MS = 5 * 60_000;

/** The integration is not connected (never was, disconnected, or in `error`). */
export class NotConnectedError extends Error {
  readonly code = 'INTEGRATION_NOT_CONNECTED';
}

/** The provider refused the refresh; the integration is now in `error` with this message. */
export class RefreshRefusedError extends Error {
  readonly code = 'INTEGRATION_REFRESH_REFUSED';
}

export interface Connection {
  tenantId: string;
  name: string;
}

interface Row {
  access_token: string;
  refresh_token: string | null;
  subdomain: string | null;
  due: boolean;
}

/**
 * The access tokens of the integrations, for every call made to a provider on a connection's
 * behalf. The promise:
 * - a call never carries a token that has expired or ends within REFRESH_MARGIN_MS when the
 *   connection has a refresh token: it is refreshed first (a connection without one, such as a
 *   non-expiring token, is used as it is);
 * - one refresh per connection at a time, whoever needs it: calls in this process that find it due
 *   together wait on one refresh (keyed by connection), and other processes wait on the
 *   integration's row, locked FOR UPDATE while the provider is asked. Whoever gets the lock second
 *   finds the token already replaced and uses it, so a rotated refresh token is never spent twice
 *   (the provider would refuse the second use, and the integration would look revoked);
 * - a 401 from the provider leads to one refresh (unless another call replaced the token
 *   meanwhile) and one retry of the call; a second 401 is the call's answer;
 * - a provider that refuses the refresh (a 4xx: invalid_grant, invalid_client…) puts the
 *   integration in `error` with the reason, shown by GET /v1/integrations (a revoked or expired
 *   grant tells the admin to connect again); one that cannot be reached or answers 429/5xx leaves
 *   it connected, and the caller retries later;
 * - a caller that meets a refusal no token can cure (a 403 for a missing scope, Slack's
 *   `invalid_auth`) puts the integration in `error` through fail(), with missingScope()'s words.
 * Tokens travel encrypted between these steps and are decrypted for the call only; comparing
 * ciphertexts tells a replaced token apart, since each encryption has its own IV.
 */
export class AccessTokens {
  private readonly refreshing = new Map<string, Promise<string>>();

  constructor(
    private readonly sql: Sql,
    private readonly providers: Providers,
    private readonly cipher: DataCipher,
    private readonly log: Logger,
    readonly marginMs = REFRESH_MARGIN_MS,
    /** Counts throttled answers and failed refreshes per connector (/metrics). */
    private readonly metrics?: IntegrationMetrics,
  ) {}

  /**
   * Calls the provider with a token fit for use; on a 401, once more after a refresh. `send` gets
   * the provider as this connection sees it (Zendesk's URLs on the connection's subdomain).
   */
  async call<T extends { status: number }>(
    c: Connection,
    send: (accessToken: string, provider: ProviderConfig) => Promise<T>,
  ): Promise<T> {
    const { token, subdomain } = await this.usable(c);
    const base = this.providers[c.name as keyof Providers];
    if (!base) throw new NotConnectedError(`${c.name} is not configured`);
    const p = forConnection(base, subdomain);
    const first = await send(this.cipher.decrypt(token), p);
    this.metrics?.answered(c.name, first.status);
    if (first.status !== 401) return first;
    const renewed = await this.refresh(c, token, true);
    if (renewed === token) return first;
    const second = await send(this.cipher.decrypt(renewed), p);
    this.metrics?.answered(c.name, second.status);
    return second;
  }

  /**
   * Refreshes the connection's token when it is due; `seen` is the (encrypted) token the caller
   * found due. The scheduled refresher goes through here so that it shares the sends' refreshes.
   */
  refreshDue(c: Connection, seen: string): Promise<string> {
    return this.refresh(c, seen, false);
  }

  /**
   * A refusal no refresh can cure (a missing scope, a token the provider disowns): the integration
   * goes to `error` with the reason, and nothing more is sent through it until it is connected again.
   */
  async fail(c: Connection, reason: string): Promise<void> {
    await this.sql`
      UPDATE integrations SET status = 'error', error = ${reason}, updated_at = now()
      WHERE ${inTenant(c.tenantId)} AND name = ${c.name} AND status = 'connected'`;
    this.log.warn({ tenantId: c.tenantId, name: c.name, err: reason }, 'integration put in error');
  }

  /** The stored token, refreshed first when due. */
  private async usable(c: Connection): Promise<{ token: string; subdomain: string | null }> {
    const [r] = await this.sql<Row[]>`
      SELECT access_token, refresh_token, subdomain,
        coalesce(token_expires_at < now() + ${this.marginMs}::float8 * interval '1 ms', false) AS due
      FROM integrations
      WHERE ${inTenant(c.tenantId)} AND name = ${c.name} AND status = 'connected' AND access_token IS NOT NULL`;
    if (!r) throw new NotConnectedError(`${c.name} is not connected`);
    const token = r.due && r.refresh_token ? await this.refresh(c, r.access_token, false) : r.access_token;
    return { token, subdomain: r.subdomain };
  }

  /** One refresh per connection in this process: later callers wait on the one under way. */
  private async refresh(c: Connection, stale: string, rejected: boolean): Promise<string> {
    const key = `${c.tenantId}/${c.name}`;
    const running = this.refreshing.get(key);
    if (running) {
      const token = await running;
      // One that began before the provider refused this token may have found it fine and kept it.
      if (!rejected || token !== stale) return token;
    }
    let p = this.refreshing.get(key);
    if (!p) {
      p = this.refreshLocked(c, stale, rejected).finally(() => this.refreshing.delete(key));
      this.refreshing.set(key, p);
    }
    return p;
  }

  /**
   * Under the row's lock: the token another process stored meanwhile, or a new one from the
   * provider. A refusal is written in the same transaction and thrown after it committed.
   */
  private async refreshLocked(c: Connection, stale: string, rejected: boolean): Promise<string> {
    const cipher = this.cipher;
    const out = (await this.sql.begin(async (tx) => {
      const [r] = await tx<Row[]>`
        SELECT access_token, refresh_token, subdomain,
          coalesce(token_expires_at < now() + ${this.marginMs}::float8 * interval '1 ms', false) AS due
        FROM integrations
        WHERE ${inTenant(c.tenantId)} AND name = ${c.name} AND status = 'connected' AND access_token IS NOT NULL
        FOR UPDATE`;
      if (!r) return { notConnected: true };
      const replaced = r.access_token !== stale && !r.due;
      if (replaced || !r.refresh_token || !(r.due || rejected)) return { token: r.access_token };
      const p = this.providers[c.name as keyof Providers];
      try {
        if (!p) throw new Error('the provider is no longer configured');
        const t = await refreshTokens(forConnection(p, r.subdomain), cipher.decrypt(r.refresh_token));
        const token = cipher.encrypt(t.access_token);
        await tx`
          UPDATE integrations SET access_token = ${token},
            refresh_token = ${t.refresh_token ? cipher.encrypt(t.refresh_token) : r.refresh_token},
            token_expires_at = ${t.expires_in ? new Date(Date.now() + t.expires_in * 1000) : null}, updated_at = now()
          WHERE ${inTenant(c.tenantId)} AND name = ${c.name}`;
        return { token };
      } catch (err) {
        // The provider may answer later: the integration stays connected, the caller retries.
        if (err instanceof ProviderError && !err.refused) {
          this.metrics?.refreshFailed(c.name, 'unavailable');
          throw err;
        }
        this.metrics?.refreshFailed(c.name, 'refused');
        const again = `an admin must connect ${c.name} again`;
        const reason =
          err instanceof ProviderError && err.revokedGrant
            ? `token refresh failed: ${err.message}; the access was revoked or has expired: ${again}`
            : `token refresh failed: ${(err as Error).message}`;
        await tx`
          UPDATE integrations SET status = 'error', error = ${reason}, updated_at = now()
          WHERE ${inTenant(c.tenantId)} AND name = ${c.name}`;
        return { refused: reason };
      }
    })) as { token?: string; notConnected?: boolean; refused?: string };
    if (out.refused) {
      this.log.warn({ tenantId: c.tenantId, name: c.name, err: out.refused }, 'integration token refresh refused');
      throw new RefreshRefusedError(out.refused);
    }
    if (out.notConnected || !out.token) throw new NotConnectedError(`${c.name} is not connected`);
    return out.token;
  }
}

/**
 * The words for a 403 that a missing permission causes, or undefined for another 403: the scope
 * the provider says it needed (Slack's `needed`, RFC 6750's `WWW-Authenticate: Bearer
 * error="insufficient_scope", scope="…"`), else the scopes the connector asks for.
 */
export function missingScope(
  name: string,
  status: number,
  wwwAuthenticate: string | null,
  body: unknown,
): string | undefined {
  const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, any>;
  const slack = b.error === 'missing_scope';
  const bearer = /insufficient_scope/i.test(wwwAuthenticate ?? '');
  const google = JSON.stringify(b.error?.details ?? '').includes('ACCESS_TOKEN_SCOPE_INSUFFICIENT');
  const graph = ['ErrorAccessDenied', 'Authorization_RequestDenied', 'Forbidden'].includes(b.error?.code);
  if (!(slack || (status === 403 && (bearer || google || graph || name === 'zendesk')))) return undefined;
  const asked = Object.hasOwn(CONNECTORS, name) ? CONNECTORS[name as ConnectorName].scope : '';
  const needed =
    (slack && typeof b.needed === 'string' && b.needed) ||
    /scope="([^"]+)"/.exec(wwwAuthenticate ?? '')?.[1] ||
    asked ||
    'the permissions listed in docs/integrations.md';
  return (
    `the provider refused for a missing permission: ${name} needs the scope ${needed}; ` +
    'an admin must connect it again granting it'
  );
}

/** How long a 429 (or Slack's `ratelimited`) asks to wait: Retry-After in seconds or as a date. */
export function retryAfterMs(value: string | null | undefined, fallbackMs: number): number {
  if (!value) return fallbackMs;
  const s = Number(value);
  if (Number.isFinite(s) && s >= 0) return s * 1000;
  const at = Date.parse(value);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : fallbackMs;
}
