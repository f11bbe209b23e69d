import { Histogram, type LatencySummary } from './histogram.js';

/** What a load process reports when it is done (sent to the parent over IPC). */
export interface LoadResult {
  label: string;
  durationS: number;
  requests: number;
  /** Events the server accepted (202 responses' `accepted`, or rows per PubAck). */
  accepted: number;
  rejectedEvents: number;
  errors: number;
  statusCounts: Record<string, number>;
  eventsPerSec: number;
  requestsPerSec: number;
  bytesPerSec: number;
  latency: LatencySummary;
  /** Accepted events per second, second by second. */
  perSecond: number[];
  /** The p99 latency of each second's requests, in ms. */
  perSecondP99Ms: number[];
  /** [epoch ms, cumulative accepted events], every ~50 ms: when each event was acknowledged. */
  timeline: Array<[number, number]>;
  targetEventsPerSec?: number;
  /** CPU seconds the load process itself used (it shares the machine with what it measures). */
  cpuS: number;
}

/**
 * Counts completions, keeps the latency histogram and a live progress line on stderr, and turns
 * it all into a LoadResult.
 */
export class Meter {
  private readonly total = new Histogram();
  private readonly window = new Histogram();
  private requests = 0;
  private accepted = 0;
  private rejected = 0;
  private errors = 0;
  private bytes = 0;
  private windowAccepted = 0;
  private readonly status: Record<string, number> = {};
  private readonly perSecond: number[] = [];
  private readonly perSecondP99Ms: number[] = [];
  private readonly timeline: Array<[number, number]> = [];
  private started = 0;
  private ended = 0;
  private readonly cpu0 = process.cpuUsage();
  private timers: NodeJS.Timeout[] = [];
  private lastLine = '';

  constructor(
    private readonly label: string,
    private readonly durationS: number,
    private readonly inflight: () => number,
    private readonly targetEventsPerSec?: number,
  ) {}

  start(): void {
    this.started = performance.now();
    this.timeline.push([Date.now(), 0]);
    this.timers.push(setInterval(() => this.timeline.push([Date.now(), this.accepted]), 50));
    this.timers.push(setInterval(() => this.tick(), 1000));
  }

  ok(latencyUs: number, accepted: number, rejected: number, bytes: number, status = 202): void {
    this.total.record(latencyUs);
    this.window.record(latencyUs);
    this.requests++;
    this.accepted += accepted;
    this.windowAccepted += accepted;
    this.rejected += rejected;
    this.bytes += bytes;
    this.status[status] = (this.status[status] ?? 0) + 1;
  }

  fail(kind: string | number): void {
    this.errors++;
    this.requests++;
    this.status[kind] = (this.status[kind] ?? 0) + 1;
  }

  get acceptedSoFar(): number {
    return this.accepted;
  }

  private tick(): void {
    const t = Math.round((performance.now() - this.started) / 1000);
    this.perSecond.push(this.windowAccepted);
    if (this.window.total) this.perSecondP99Ms.push(this.window.quantile(0.99) / 1000);
    const w = this.window;
    const line = `${this.label.padEnd(14)} ${String(t).padStart(3)}/${this.durationS}s  ${fmt(this.windowAccepted).padStart(9)} ev/s  ${fmt(w.total).padStart(6)} req/s  p50 ${(w.quantile(0.5) / 1000).toFixed(1).padStart(5)} ms  p99 ${(w.quantile(0.99) / 1000).toFixed(1).padStart(6)} ms  in-flight ${String(this.inflight()).padStart(4)}  errors ${this.errors}`;
    process.stderr.write(process.stderr.isTTY ? `\r${line}` : `${line}\n`);
    this.lastLine = line;
    this.window.reset();
    this.windowAccepted = 0;
  }

  finish(): LoadResult {
    this.ended = performance.now();
    for (const t of this.timers) clearInterval(t);
    this.timeline.push([Date.now(), this.accepted]);
    if (process.stderr.isTTY && this.lastLine) process.stderr.write('\n');
    const s = (this.ended - this.started) / 1000;
    const cpu = process.cpuUsage(this.cpu0);
    return {
      label: this.label,
      durationS: round(s, 2),
      requests: this.requests,
      accepted: this.accepted,
      rejectedEvents: this.rejected,
      errors: this.errors,
      statusCounts: this.status,
      eventsPerSec: Math.round(this.accepted / s),
      requestsPerSec: Math.round((this.requests - this.errors) / s),
      bytesPerSec: Math.round(this.bytes / s),
      latency: this.total.summary(),
      perSecond: this.perSecond,
      perSecondP99Ms: this.perSecondP99Ms,
      timeline: this.timeline,
      targetEventsPerSec: this.targetEventsPerSec,
      cpuS: round((cpu.user + cpu.system) / 1e6, 2),
    };
  }
}

export const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
export const round = (n: number, d = 0) => Math.round(n * 10 ** d) / 10 ** d;

/** Child side of the parent/child protocol: one config message in, one result message out. */
export function childMain<C, R = LoadResult>(run: (config: C) => Promise<R>): void {
  process.once('message', (config: C) => {
    run(config).then(
      (result) => process.send!({ result }, () => process.exit(0)),
      (err: unknown) => process.send!({ error: String((err as Error)?.stack ?? err) }, () => process.exit(1)),
    );
  });
}
