import type { Counter, Registry } from 'prom-client';
import type { Logger } from './logger.js';
import { counter } from './prometheus.js';

/**
 * The loop of a gauge sampler (stream lag, PostgreSQL backlogs, housekeeping ages): `sample` at
 * start and every `everyMs`, never two at once (a sample still waiting on its server is not joined
 * by another); a failed one leaves the gauges as they were, counts in `<name>_sample_failures_total`
 * and is logged at most once a minute. stop() waits for the sample under way.
 */
export class Sampler {
  private timer?: NodeJS.Timeout;
  private sampling?: Promise<void>;
  private lastWarned = 0;
  private readonly failures: Counter;

  constructor(
    private readonly sample: () => Promise<void>,
    registry: Registry,
    private readonly log: Logger,
    private readonly o: { name: string; what: string; everyMs: number },
  ) {
    this.failures = counter(registry, `${o.name}_sample_failures_total`, [], {
      help: `Samples of ${o.what} that failed; the gauges keep their last values`,
    });
  }

  start(): void {
    const tick = () => {
      if (this.sampling) return;
      this.sampling = this.sample()
        .catch((err: unknown) => {
          this.failures.inc();
          if (Date.now() - this.lastWarned < 60_000) return;
          this.lastWarned = Date.now();
          this.log.warn({ err: String(err) }, `${this.o.what}: sample failed`);
        })
        .finally(() => {
          this.sampling = undefined;
        });
    };
    tick();
    this.timer = setInterval(tick, this.o.everyMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.sampling;
  }
}
