import type { Logger } from '../lib/logger.js';
import { Ticker } from '../lib/ticker.js';

/**
 * A job that polls PostgreSQL for work about every `pollMs` (jittered, lib/ticker.ts): queued
 * notifications, tokens to refresh, API key usage to check. A poll that throws is logged and the
 * next one comes as usual; stop() waits for the poll in progress.
 */
export abstract class PollingJob {
  private readonly ticker: Ticker;

  constructor(log: Logger, what: string, pollMs: number) {
    // The Ticker ticks about a quarter of its interval apart.
    this.ticker = new Ticker(
      pollMs * 4,
      async () => void (await this.once()),
      (err) => log.warn({ err: String(err) }, `${what}: poll failed`),
    );
  }

  /** One poll; how much it did. */
  abstract once(): Promise<number>;

  start(): void {
    this.ticker.start();
  }

  stop(): Promise<void> {
    return this.ticker.stop();
  }
}
