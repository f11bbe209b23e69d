import type { Logger } from '../../lib/logger.js';

/** Scores some customers of one workspace at once; resolves with a result per customer it scored. */
export type ScoreBatch<R> = (tenantId: string, customerIds: string[]) => Promise<Map<string, R>>;

export interface BatcherOptions {
  /** Customers per calculation, at most (at most store.ts's CHUNK, so that one statement stores them). */
  maxBatch: number;
  /** How long a request waits for others before its calculation starts, in ms. */
  windowMs: number;
  /** Calculations of one workspace in flight at once (default 2). */
  lanes?: number;
}

interface Waiter<R> {
  customerId: string;
  resolve: (result: R | undefined) => void;
  reject: (err: unknown) => void;
}

interface Lane<R> {
  waiting: Array<Waiter<R>>;
  running: number;
  timer?: NodeJS.Timeout;
}

/**
 * Single-flight batching of on-demand recalculations, per workspace: 20 callers recalculating
 * customers of one workspace would otherwise run 20 sets of ClickHouse queries and 20 PostgreSQL
 * transactions, queueing on the same few cores. Here:
 * - a request waits `windowMs` for others, then one calculation takes all the requests that
 *   arrived (up to `maxBatch` customers);
 * - a request never joins a calculation already started: its queries may already have read the
 *   rollups, and a recalculation must see the events queryable when it was asked for;
 * - one workspace has at most `lanes` calculations in flight (2 by default): requests arriving
 *   while one runs start the next after the window instead of waiting for it to end, which halves
 *   what a request waits under steady load; with every lane busy they wait for the first to end.
 *   Two calculations of one customer at once are safe: store.ts locks its row and stamps the later
 *   one later; workspaces do not wait for each other;
 * - requests for the same customer in one batch share its calculation (the store statement takes
 *   each customer once);
 * - a failed calculation fails each of its requests, and the next batch runs as usual.
 */
export class RecalculateBatcher<R> {
  private lanes = new Map<string, Lane<R>>();
  private pending = 0;

  constructor(
    private readonly score: ScoreBatch<R>,
    private readonly log: Logger,
    private readonly o: BatcherOptions,
  ) {}

  /** Requests accepted and not yet answered. */
  get size(): number {
    return this.pending;
  }

  /** Resolves with the customer's result once its score is stored, undefined for a customer it could not score. */
  recalculate(tenantId: string, customerId: string): Promise<R | undefined> {
    let lane = this.lanes.get(tenantId);
    if (!lane) {
      lane = { waiting: [], running: 0 };
      this.lanes.set(tenantId, lane);
    }
    const l = lane;
    this.pending++;
    const p = new Promise<R | undefined>((resolve, reject) => l.waiting.push({ customerId, resolve, reject }));
    if (l.running < this.maxLanes && !l.timer) l.timer = setTimeout(() => this.next(tenantId, l), this.o.windowMs);
    return p.finally(() => this.pending--);
  }

  private get maxLanes(): number {
    return this.o.lanes ?? 2;
  }

  private next(tenantId: string, lane: Lane<R>): void {
    lane.timer = undefined;
    if (!lane.waiting.length) {
      if (!lane.running) this.lanes.delete(tenantId);
      return;
    }
    const batch = this.take(lane);
    lane.running++;
    const ids = [...new Set(batch.map((w) => w.customerId))];
    const t0 = performance.now();
    this.score(tenantId, ids)
      .then(
        (scored) => {
          for (const w of batch) w.resolve(scored.get(w.customerId));
          const ms = Math.round(performance.now() - t0);
          this.log.debug({ tenantId, requests: batch.length, customers: ids.length, ms }, 'health recalculation batch');
        },
        (err: unknown) => {
          this.log.error({ err, tenantId, customers: ids.length }, 'health recalculation batch failed');
          for (const w of batch) w.reject(err);
        },
      )
      .finally(() => {
        lane.running--;
        if (!lane.timer) this.next(tenantId, lane);
      });
  }

  /** The oldest waiting requests covering at most maxBatch distinct customers. */
  private take(lane: Lane<R>): Array<Waiter<R>> {
    const ids = new Set<string>();
    let n = 0;
    for (; n < lane.waiting.length; n++) {
      const id = lane.waiting[n].customerId;
      if (!ids.has(id) && ids.size >= this.o.maxBatch) break;
      ids.add(id);
    }
    return lane.waiting.splice(0, n);
  }
}
