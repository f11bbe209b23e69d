/**
 * In-process cache of analytics answers per (workspace, query), for at most 30 s. A dashboard
 * opened by a whole team asks the same three questions at once: the first caller runs the SQL and
 * the others share its promise, so one workspace's burst costs one aggregate per query. Each
 * process keeps its own copy (a cache, not state): two processes may answer from figures computed
 * a few seconds apart, which the documented staleness bound already allows.
 */
export interface Cached<T> {
  value: T;
  /** Seconds the value stays fresh from now (for Cache-Control). */
  maxAgeS: number;
}

interface Entry {
  expires: number;
  value: Promise<unknown>;
}

export class ResponseCache {
  private entries = new Map<string, Entry>();

  /** `ttlMs` 0 disables caching (the benchmark measures the SQL every time). */
  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
    private readonly clock: () => number = Date.now,
  ) {}

  async get<T>(tenantId: string, key: string, compute: () => Promise<T>): Promise<Cached<T>> {
    if (this.ttlMs <= 0) return { value: await compute(), maxAgeS: 0 };
    const k = `${tenantId} ${key}`;
    const now = this.clock();
    let e = this.entries.get(k);
    if (!e || e.expires <= now) {
      if (e) this.entries.delete(k);
      this.evict(now);
      const value = compute();
      e = { expires: now + this.ttlMs, value };
      this.entries.set(k, e);
      // A failure is not remembered: the next caller tries again.
      value.catch(() => {
        if (this.entries.get(k)?.value === value) this.entries.delete(k);
      });
    }
    const value = (await e.value) as T;
    return { value, maxAgeS: Math.max(0, Math.floor((e.expires - this.clock()) / 1000)) };
  }

  get size(): number {
    return this.entries.size;
  }

  /** Expired entries first; past the cap, the oldest (Map keeps insertion order). */
  private evict(now: number): void {
    if (this.entries.size < this.maxEntries) return;
    for (const [k, e] of this.entries) if (e.expires <= now) this.entries.delete(k);
    for (const k of this.entries.keys()) {
      if (this.entries.size < this.maxEntries) break;
      this.entries.delete(k);
    }
  }
}
