import type { Logger } from '../../lib/logger.js';
import type { ClickHouse } from '../clickhouse.js';

const DAY_MS = 24 * 3600_000;
/** Kept at least two years: a month's partition goes once its last day is 25 months old. */
export const HISTORY_MONTHS = 25;

/**
 * History retention: once a day, the monthly partitions of csp.health_history (PARTITION BY
 * toYYYYMM(day)) older than HISTORY_MONTHS are dropped whole, which costs ClickHouse nothing
 * compared with a DELETE. Every instance may do it: dropping is idempotent. The months are found
 * through the table the tiers read (Distributed on a cluster) and dropped from the storage table,
 * on every server of a cluster.
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
        // Only months before the cutoff's are read (the partition key prunes the rest).
        `SELECT toString(toYYYYMM(day)) AS partition FROM ${this.ch.database}.health_history
         WHERE day < addMonths(today(), -${HISTORY_MONTHS - 1})
         GROUP BY partition HAVING max(day) < addMonths(today(), -${HISTORY_MONTHS})`,
      );
      const dropped: string[] = [];
      for (const { partition } of rows) {
        if (!/^\d{6}$/.test(partition)) continue;
        await this.ch.command(
          `ALTER TABLE ${this.ch.storageDatabase}.health_history${this.ch.onCluster} DROP PARTITION ${partition}`,
        );
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
