import type { Sql } from './pg.js';

export interface Decision {
  ok: boolean;
  limit: number;
  /** Tokens left in this window as far as this process knows (never more than the truth). */
  remaining: number;
  /** Unix seconds when the window resets. */
  resetAt: number;
  /** Seconds to wait before retrying; 0 when ok. */
  retryAfter: number;
}

interface Window {
  start: number;
  /** Tokens leased to this process and not used yet. */
  local: number;
  /** The shared counter said the window is spent: answer locally until it ends. */
  exhausted: boolean;
  /** Shared usage reported by the last lease. */
  used: number;
  pending?: Promise<void>;
}

/**
 * Fixed-window limits shared by every process serving a workspace. A process leases tokens in
 * chunks from one PostgreSQL counter row per (tenant, bucket, window), so the hot path needs no
 * database round trip while it holds tokens; the chunk is small for small limits, which keeps
 * them exact (a 300/min limit leases one token at a time).
 */
export class SharedRateLimiter {
  private windows = new Map<string, Window>();
  private lastSweep = 0;

  constructor(
    private readonly sql: Sql,
    private readonly now: () => number = Date.now,
  ) {}

  static chunkFor(limit: number): number {
    return Math.max(1, Math.min(10_000, Math.floor(limit / 1000)));
  }

  async take(tenantId: string, bucket: string, limit: number, windowMs: number, cost = 1): Promise<Decision> {
    const now = this.now();
    const start = Math.floor(now / windowMs) * windowMs;
    const key = `${tenantId}|${bucket}`;
    let w = this.windows.get(key);
    if (!w || w.start !== start) {
      w = { start, local: 0, exhausted: false, used: 0 };
      this.windows.set(key, w);
      this.sweep(now);
    }
    const resetAt = Math.ceil((start + windowMs) / 1000);
    const deny = (): Decision => ({
      ok: false,
      limit,
      remaining: 0,
      resetAt,
      retryAfter: Math.max(1, Math.ceil((start + windowMs - now) / 1000)),
    });
    while (w.local < cost) {
      if (w.exhausted) return deny();
      if (!w.pending)
        w.pending = this.lease(
          tenantId,
          bucket,
          limit,
          w,
          Math.max(cost - w.local, SharedRateLimiter.chunkFor(limit)),
        ).finally(() => {
          w!.pending = undefined;
        });
      await w.pending;
    }
    w.local -= cost;
    return { ok: true, limit, remaining: Math.max(0, limit - w.used + w.local), resetAt, retryAfter: 0 };
  }

  private async lease(tenantId: string, bucket: string, limit: number, w: Window, want: number): Promise<void> {
    const [row] = await this.sql<{ used: string }[]>`
      INSERT INTO rate_windows (tenant_id, bucket, window_start, used)
      VALUES (${tenantId}, ${bucket}, ${new Date(w.start)}, ${want})
      ON CONFLICT (tenant_id, bucket, window_start) DO UPDATE SET used = rate_windows.used + EXCLUDED.used
      RETURNING used`;
    const used = Number(row.used);
    const before = used - want;
    const granted = Math.max(0, Math.min(want, limit - before));
    w.used = Math.min(used, limit);
    w.local += granted;
    if (granted < want) w.exhausted = true;
  }

  private sweep(now: number): void {
    if (now - this.lastSweep < 60_000) return;
    this.lastSweep = now;
    for (const [k, w] of this.windows)
      if (now - w.start > 2 * 24 * 3600_000 || (w.local === 0 && !w.pending && now - w.start > 3600_000))
        this.windows.delete(k);
    this.sql`DELETE FROM rate_windows WHERE window_start < now() - interval '2 days'`.catch(() => {});
  }
}
