import type { Logger } from '../../lib/logger.js';
import type { ClickHouse } from '../clickhouse.js';

/** Rows per insert into csp.metric_values: a few large parts, never a part per metric. */
export const INSERT_ROWS = 100_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Materialized values on their way to csp.metric_values as JSONEachRow text, inserted whenever
 * INSERT_ROWS are held and at flush(). A value stored twice (a run redone after a crash) is the
 * same row again: ReplacingMergeTree keeps one per (metric, customer, period_start), and readers
 * take the latest computed_at.
 */
export class ValueBatch {
  private parts: string[] = [];
  private seq = 0;
  private inFlight: Promise<void> = Promise.resolve();
  rows = 0;

  constructor(
    private readonly ch: ClickHouse,
    private readonly log: Logger,
    private readonly queryId: string,
  ) {}

  /** Adds the values of one metric run, index-aligned with `customerIds`. */
  async add(
    head: { tenantId: string; metricId: string; from: Date; to: Date; computedAt: Date },
    customerIds: string[],
    values: Array<number | null>,
  ): Promise<void> {
    const s = (d: Date) => Math.floor(d.getTime() / 1000);
    const prefix = `{"tenant_id":"${head.tenantId}","metric_id":"${head.metricId}","customer_id":"`;
    const suffix =
      `","period_start":${s(head.from)},"period_end":${s(head.to)},` + `"computed_at":${s(head.computedAt)},"value":`;
    for (let i = 0; i < customerIds.length; i++) {
      const v = values[i];
      this.parts.push(`${prefix}${customerIds[i]}${suffix}${v === null || !Number.isFinite(v) ? 'null' : v}}\n`);
      if (this.parts.length >= INSERT_ROWS) await this.send();
    }
  }

  /** Every value added so far stored (the run's end): what is held is inserted and every insert awaited. */
  async flush(): Promise<void> {
    await this.send();
    await this.inFlight;
  }

  /**
   * Starts the insert of what is held once the previous one has finished: one insert in flight
   * while the run goes on to its next query, so ClickHouse computes and stores side by side
   * instead of in turns. A failed insert fails the next send or flush, hence the run.
   */
  private async send(): Promise<void> {
    await this.inFlight;
    if (!this.parts.length) return;
    const body = Buffer.from(this.parts.join(''));
    const n = this.parts.length;
    this.parts = [];
    const id = `${this.queryId}-${++this.seq}`;
    const insert = this.insertWithRetries(body, id).then(() => {
      this.rows += n;
    });
    // Marked handled here; the failure is rethrown by whoever awaits inFlight next.
    insert.catch(() => {});
    this.inFlight = insert;
  }

  private async insertWithRetries(body: Buffer, id: string): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.ch.insert('metric_values', body, `${id}-${attempt}`);
        return;
      } catch (err) {
        if (attempt >= 3) throw err;
        this.log.warn({ err: String(err), attempt }, 'metric values insert failed; retrying');
        await sleep(500 * 2 ** attempt);
      }
    }
  }
}
