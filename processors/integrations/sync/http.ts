import { type AccessTokens, type Connection, retryAfterMs } from '../access-tokens.js';
import { type ProviderAnswer, readAnswer } from '../provider-answer.js';

/**
 * Why a sync stopped, by code (the scheduler branches on it):
 * - SYNC_SCOPE_MISSING: the provider refused the call for a scope the connection was not granted
 *   (403): the integration goes to `error` naming the scope; only a reconnect helps;
 * - SYNC_CURSOR_EXPIRED: the provider no longer accepts the stored cursor (Gmail 404 on
 *   startHistoryId, Google 410 on syncToken, Graph 410 / syncStateNotFound): a full resync follows;
 * - SYNC_UNAVAILABLE: the provider could not be reached, answered 5xx, kept throttling, or refused
 *   the access token again after a refresh: the next run tries again;
 * - SYNC_STOPPED: the processors are shutting down.
 */
export type SyncErrorCode = 'SYNC_SCOPE_MISSING' | 'SYNC_CURSOR_EXPIRED' | 'SYNC_UNAVAILABLE' | 'SYNC_STOPPED';

export class SyncError extends Error {
  constructor(
    readonly code: SyncErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export interface ClientOptions {
  /** The scope the connector's reads need, named in the error when the provider does not say. */
  scope: string;
  stopping: () => boolean;
  /** The longest Retry-After honoured; a provider that asks for more ends the run (retried next time). */
  maxWaitMs: number;
  /** Throttled answers (429, or 503 with Retry-After) waited out per call before the run gives up. */
  maxThrottled?: number;
  timeoutMs?: number;
}

export interface ApiAnswer {
  status: number;
  body: any;
}

/** Waits `ms`, or less when the processors start shutting down (checked every 250 ms). */
async function pause(ms: number, stopping: () => boolean): Promise<void> {
  const until = Date.now() + ms;
  while (!stopping() && Date.now() < until)
    await new Promise((r) => setTimeout(r, Math.min(250, Math.max(0, until - Date.now()))));
}

/** Google's 403 reasons that mean "slow down", not "not allowed". */
const GOOGLE_RATE_REASONS = new Set(['rateLimitExceeded', 'userRateLimitExceeded']);

/**
 * GET calls to a provider's API on one connection's behalf, through AccessTokens (a due token is
 * refreshed first; a 401 costs one refresh and one retry). On top of that: a 429 (or 503 with
 * Retry-After, or Google's 403 rateLimitExceeded) is waited out as Retry-After says, up to
 * `maxWaitMs` and `maxThrottled` times; a 403 for a scope is SYNC_SCOPE_MISSING; 5xx, a second
 * 401 and a failed connection are SYNC_UNAVAILABLE. Anything else (2xx, 400, 404, 410) is the
 * caller's to read. Only URLs under the connector's API origin are called, so that a link the
 * provider returns (Graph's nextLink) never carries the token elsewhere.
 */
export class ProviderClient {
  constructor(
    private readonly tokens: AccessTokens,
    private readonly conn: Connection,
    private readonly apiUrl: string,
    private readonly o: ClientOptions,
  ) {}

  async get(url: string, headers: Record<string, string> = {}): Promise<ApiAnswer> {
    if (new URL(url).origin !== new URL(this.apiUrl).origin)
      throw new SyncError('SYNC_UNAVAILABLE', `the provider returned a link outside its API (${new URL(url).origin})`);
    const max = this.o.maxThrottled ?? 5;
    for (let attempt = 0; ; attempt++) {
      if (this.o.stopping()) throw new SyncError('SYNC_STOPPED', 'shutting down');
      let r: ProviderAnswer;
      try {
        r = await this.tokens.call(this.conn, (token) => this.send(url, token, headers));
      } catch (err) {
        if ((err as { code?: string }).code?.startsWith('INTEGRATION_')) throw err;
        throw new SyncError('SYNC_UNAVAILABLE', `the provider could not be reached: ${(err as Error).message}`);
      }
      const reason = googleReason(r.body);
      const throttled =
        r.status === 429 ||
        (r.status === 503 && r.retryAfter !== null) ||
        (r.status === 403 && reason !== undefined && GOOGLE_RATE_REASONS.has(reason));
      if (throttled) {
        const wait = retryAfterMs(r.retryAfter, Math.min(this.o.maxWaitMs, 1000 * 2 ** attempt));
        if (attempt >= max || wait > this.o.maxWaitMs)
          throw new SyncError('SYNC_UNAVAILABLE', `the provider kept throttling (HTTP ${r.status}); retried later`);
        await pause(wait, this.o.stopping);
        continue;
      }
      if (r.status === 401)
        throw new SyncError('SYNC_UNAVAILABLE', 'the provider refused the access token (HTTP 401) after a refresh');
      if (r.status === 403) {
        const scope = /scope="([^"]+)"/.exec(r.wwwAuthenticate ?? '')?.[1] ?? this.o.scope;
        throw new SyncError(
          'SYNC_SCOPE_MISSING',
          `the provider refused access (HTTP 403${reason ? ` ${reason}` : ''}): the connection lacks the scope ` +
            `${scope}; reconnect and grant it`,
        );
      }
      if (r.status >= 500) throw new SyncError('SYNC_UNAVAILABLE', `the provider answered HTTP ${r.status}`);
      return { status: r.status, body: r.body };
    }
  }

  private async send(url: string, token: string, headers: Record<string, string>): Promise<ProviderAnswer> {
    const res = await fetch(url, {
      headers: { accept: 'application/json', ...headers, authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(this.o.timeoutMs ?? 30_000),
    });
    return readAnswer(res);
  }
}

/** The reason of a Google error answer (`error.errors[0].reason`), or Graph's `error.code`. */
export function googleReason(body: unknown): string | undefined {
  const e = (body as { error?: { errors?: Array<{ reason?: unknown }>; code?: unknown } } | null)?.error;
  const reason = e?.errors?.[0]?.reason;
  if (typeof reason === 'string') return reason;
  return typeof e?.code === 'string' ? e.code : undefined;
}
