/**
 * When to retry and how long to wait. The service promises that a refused request stored nothing
 * (surface A: a 500 or 503 is atomic per request; surface B: an error answer never follows stored
 * events, and its Idempotency-Key makes a resend safe), so every answer that may improve is
 * retried; a 4xx that says the request itself is wrong never improves and is not.
 */

export interface BackoffOptions {
  /** First retry's ceiling, ms. */
  baseMs: number;
  /** Largest ceiling, ms. */
  capMs: number;
}

/** "Full jitter": uniform in [0, min(cap, base × 2^attempt)), so retrying producers spread out. */
export function backoffDelay(attempt: number, o: BackoffOptions, random: () => number = Math.random): number {
  const ceiling = Math.min(o.capMs, o.baseMs * 2 ** Math.min(attempt, 30));
  return Math.floor(random() * ceiling);
}

/**
 * Retry-After (RFC 9110): delay-seconds or an HTTP-date, as ms from `now`; undefined when absent
 * or unreadable.
 */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | undefined {
  if (value === undefined || value === null) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  if (!/[a-z]/i.test(v)) return undefined;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The wait before the next attempt: the backoff, and never less than the service asked for. */
export function retryDelay(
  attempt: number,
  retryAfterMs: number | undefined,
  o: BackoffOptions,
  random: () => number = Math.random,
): number {
  const jitter = backoffDelay(attempt, o, random);
  return retryAfterMs === undefined ? jitter : Math.max(retryAfterMs, jitter);
}

/**
 * Statuses worth another attempt: 408 and 429, 5xx, and on surface B 409 (another request with the
 * batch's Idempotency-Key is still running: its answer is returned to the retry).
 */
export function retryableStatus(status: number, surface: 'a' | 'b'): boolean {
  if (status >= 500) return true;
  if (status === 408 || status === 429) return true;
  return status === 409 && surface === 'b';
}
