import type { Logger } from '../../lib/logger.js';
import type { ClickHouse } from '../clickhouse.js';

const DAY_MS = 24 * 3600_000;
/** Kept at least two years: a month's partition goes once its last day is 25 months old. */
export const HISTORY_MONTHS = 25;

/**
 * History retention: once a day, the monthly partitions of csp.health_history (PARTITION BY
 * toYYYYMM(day)) older than HISTORY_MONTHS are dropped whole, which costs ClickHouse nothing
 * compared with a DELETE. Every instance may do it: dropping is idempotent.
 */
export class HistoryRetention {
  private timer?: NodeJS.Timeout;
  private first?: NodeJS.Timeout;

  constructor(
    private readonly ch: ClickHouse,
    private readonly log: Logger,
  ) {}

  start(firstAfterMs = 60_000): void {
    this.first = setTimeout(() => void this.run(), firstAfterMs);
    this.timer = setInterval(() => void this.run(), DAY_MS);
  }

  /** Drops the expired partitions; returns them. */
  async run(): Promise<string[]> {
    try {
      const rows = await this.ch.rows<{ partition: string }>(
        `SELECT DISTINCT partition FROM system.parts
         WHERE database = '${this.ch.database}' AND table = 'health_history' AND active
           AND max_date < addMonths(today(), -${HISTORY_MONTHS})`,
      );
      const dropped: string[] = [];
      for (const { partition } of rows) {
        if (!/^\d{6}$/.test(partition)) continue;
        await this.ch.command(`ALTER TABLE ${this.ch.database}.health_history DROP PARTITION ${partition}`);
        dropped.push(partition);
      }
      if (dropped.length) this.log.info({ partitions: dropped }, 'health history partitions dropped');
      return dropped;
    } catch (err) {
      this.log.warn({ err: String(err) }, 'health history retention failed; retried tomorrow');
      return [];
    }
  }

  stop(): void {
    clearTimeout(this.first);
    clearInterval(this.timer);
  }
}
