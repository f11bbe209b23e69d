/**
 * In-process cache of analytics answers per (workspace, query), never older than `ttlMs` (30 s at
 * most: the documented staleness bound).
 *
 * A dashboard opened by a whole team asks the same three questions at once, and is then polled:
 * - the first caller runs the SQL and the others share its promise, so one workspace's burst costs
 *   one aggregate per query;
 * - an answer older than half its life is still served, and refreshed in the background by the
 *   first read that sees it so (stale-while-revalidate): a reader waits only for a cold query;
 * - `sweep()` (every second, from the timer `start()` sets) refreshes, before they expire, the
 *   answers read in the last `keepWarmMs`, so a dashboard in use never meets an expired answer, and
 *   forgets the answers nobody read for that long.
 * Each process keeps its own copy (a cache, not state): two processes may answer from figures
 * computed a few seconds apart, which the staleness bound allows.
 */
export interface Cached<T> {
  value: T;
  /** Seconds the value stays within the staleness bound from now (for Cache-Control). */
  maxAgeS: number;
}

interface Entry {
  compute: () => Promise<unknown>;
  /** The latest answer and when its computation started (its figures are at least that recent). */
  value?: unknown;
  computedAt: number;
  /** A computation under way. */
  pending?: Promise<unknown>;
  lastRead: number;
}

export class ResponseCache {
  private entries = new Map<string, Entry>();
  private timer?: NodeJS.Timeout;

  /** `ttlMs` 0 disables caching (the benchmark's cold figures measure the SQL every time). */
  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
    private readonly clock: () => number = Date.now,
    private readonly keepWarmMs = 120_000,
    /** A background refresh that failed: the previous answer stays until it expires. */
    private readonly onRefreshError: (err: unknown) => void = () => {},
  ) {}

  async get<T>(tenantId: string, key: string, compute: () => Promise<T>): Promise<Cached<T>> {
    if (this.ttlMs <= 0) return { value: await compute(), maxAgeS: 0 };
    const k = `${tenantId} ${key}`;
    const now = this.clock();
    let e = this.entries.get(k);
    if (!e) {
      this.evict(now);
      e = { compute, computedAt: now, lastRead: now };
      this.entries.set(k, e);
    }
    e.lastRead = now;
    // The latest caller's computation is the one a refresh runs: it must read the clock itself.
    e.compute = compute;
    const age = now - e.computedAt;
    if ('value' in e && age < this.ttlMs) {
      if (age >= this.ttlMs / 2) this.refresh(k, e, true);
      return { value: e.value as T, maxAgeS: this.maxAge(e) };
    }
    const value = (await this.refresh(k, e, false)) as T;
    return { value, maxAgeS: this.maxAge(e) };
  }

  /** Refreshes the answers read recently that are past half their life; forgets the ones nobody reads. */
  sweep(): void {
    const now = this.clock();
    for (const [k, e] of this.entries) {
      if (now - e.lastRead >= this.keepWarmMs) {
        if (!e.pending) this.entries.delete(k);
      } else if ('value' in e && now - e.computedAt >= this.ttlMs / 2) this.refresh(k, e, true);
    }
  }

  start(periodMs = 1000): void {
    if (this.ttlMs <= 0 || this.timer) return;
    this.timer = setInterval(() => this.sweep(), periodMs);
    this.timer.unref();
  }

  get size(): number {
    return this.entries.size;
  }

  /** One computation at a time per entry; a failure is not remembered (the next reader tries again). */
  private refresh(k: string, e: Entry, background: boolean): Promise<unknown> {
    if (e.pending) return e.pending;
    const started = this.clock();
    const p = e.compute().then(
      (value) => {
        e.value = value;
        e.computedAt = started;
        return value;
      },
      (err: unknown) => {
        if (!('value' in e) && this.entries.get(k) === e) this.entries.delete(k);
        if (background) this.onRefreshError(err);
        throw err;
      },
    );
    e.pending = p;
    const settled = () => {
      if (e.pending === p) e.pending = undefined;
    };
    p.then(settled, settled);
    if (background) p.catch(() => {});
    return p;
  }

  private maxAge(e: Entry): number {
    return Math.max(0, Math.floor((e.computedAt + this.ttlMs - this.clock()) / 1000));
  }

  /** Entries nobody reads first; past the cap, the oldest (Map keeps insertion order). */
  private evict(now: number): void {
    if (this.entries.size < this.maxEntries) return;
    for (const [k, e] of this.entries) if (now - e.lastRead >= this.keepWarmMs && !e.pending) this.entries.delete(k);
    for (const k of this.entries.keys()) {
      if (this.entries.size < this.maxEntries) break;
      this.entries.delete(k);
    }
  }
}
