/**
 * The loop of a scheduled job run by many processes at once: a tick about a quarter of the
 * interval after the previous one ended (at least 250 ms, at most 30 s), jittered ±50 %, so that
 * whichever process ticks first after work falls due takes it and random tick times share the
 * work out evenly. A tick that throws is reported and the loop goes on; stop() waits for the tick
 * in progress.
 */
export class Ticker {
  private timer?: NodeJS.Timeout;
  private ticking?: Promise<void>;
  private stopped = false;

  constructor(
    private readonly intervalMs: number,
    private readonly tick: () => Promise<void>,
    private readonly failed: (err: unknown) => void,
  ) {}

  get stopping(): boolean {
    return this.stopped;
  }

  start(firstDelayMs = 0): void {
    this.schedule(firstDelayMs);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.ticking = this.tick()
        .catch(this.failed)
        .finally(() => {
          this.ticking = undefined;
          const every = Math.max(250, Math.min(Math.floor(this.intervalMs / 4), 30_000));
          this.schedule(every * (0.5 + Math.random()));
        });
    }, delayMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.ticking;
  }
}
