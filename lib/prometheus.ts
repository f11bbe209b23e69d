import type { ChildProcess } from 'node:child_process';
import type { NatsConnection } from 'nats';
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { CounterConfiguration, GaugeConfiguration, HistogramConfiguration } from 'prom-client';
import type { Sql } from './pg.js';

/*
 * What every tier's /metrics has besides its own figures (docs/operations.md lists them all): the
 * NATS connection's reconnects, how long a query waits for the PostgreSQL pool, and the sum of a
 * supervised tier's processes. Labels never carry a workspace or customer id. Every metric of the
 * product is declared with `counter`, `histogram` or `gauge` below, one call each.
 */

/** prom-client's configuration of a metric, less what the helpers below fill in. */
type Config<C> = Omit<C, 'name' | 'labelNames' | 'registers'>;
/** Series that exist from the start, at zero: a rate over a series that appears at its first change misses it. */
type Zero<L extends string> = { zero?: Partial<Record<L, string | number>>[] };
type CounterOptions<L extends string> = Config<CounterConfiguration<L>> & Zero<L>;
type HistogramOptions<L extends string> = Config<HistogramConfiguration<L>> & Zero<L> & { buckets: number[] };
type GaugeOptions<L extends string> = Config<GaugeConfiguration<L>>;

/** A counter registered in `registry`, labelled `labels` ([] for none). */
export function counter<L extends string>(registry: Registry, name: string, labels: L[], o: CounterOptions<L>) {
  const { zero = [], ...config } = o;
  const c = new Counter({ ...config, name, labelNames: labels, registers: [registry] });
  for (const series of zero) c.inc(series, 0);
  return c;
}

/** A histogram registered in `registry`, labelled `labels` ([] for none), its buckets stated. */
export function histogram<L extends string>(registry: Registry, name: string, labels: L[], o: HistogramOptions<L>) {
  const { zero = [], ...config } = o;
  const h = new Histogram({ ...config, name, labelNames: labels, registers: [registry] });
  for (const series of zero) h.zero(series);
  return h;
}

/** A gauge registered in `registry`, labelled `labels` ([] for none). */
export function gauge<L extends string>(registry: Registry, name: string, labels: L[], o: GaugeOptions<L>) {
  return new Gauge({ ...o, name, labelNames: labels, registers: [registry] });
}

/**
 * A class of figures declared in field initializers (`counter(this.registry, …)`) in the registry given
 * to its constructor: a parameter property of the class itself would be assigned after them.
 */
export class Figures {
  constructor(readonly registry: Registry) {}
}

/** Counts the NATS connection's disconnects and reconnects (`nats_reconnects_total`). */
export function watchNats(nc: NatsConnection, registry: Registry): void {
  const events = counter(registry, 'nats_connection_events_total', ['event'], {
    help: 'Status changes of the NATS connection (disconnect, reconnect)',
    zero: [{ event: 'disconnect' }, { event: 'reconnect' }],
  });
  const reconnects = counter(registry, 'nats_reconnects_total', [], {
    help: 'Times the NATS connection was made again after it was lost',
  });
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type !== 'disconnect' && s.type !== 'reconnect') continue;
      events.inc({ event: s.type });
      if (s.type === 'reconnect') reconnects.inc();
    }
  })();
}

/**
 * How long a trivial query takes through a PostgreSQL pool, every `everyMs`: the time a query of
 * the tier waits for a free connection, plus one round trip. postgres.js keeps its queue to itself,
 * so the wait is measured as a query meets it, not read from the pool.
 */
export class PoolProbe {
  private timer?: NodeJS.Timeout;
  private readonly seconds: Histogram;

  constructor(
    registry: Registry,
    private readonly pools: Record<string, Sql>,
    private readonly everyMs = 5000,
  ) {
    this.seconds = histogram(registry, 'pg_pool_wait_seconds', ['pool'], {
      help: 'Time a probe query took through the PostgreSQL pool (waiting for a connection, plus one round trip)',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      zero: Object.keys(pools).map((pool) => ({ pool })),
    });
  }

  start(): void {
    this.timer = setInterval(() => {
      for (const [pool, sql] of Object.entries(this.pools)) {
        const t0 = performance.now();
        // A failed probe is not a wait: PostgreSQL away shows in the tiers' errors and /readyz.
        sql`SELECT 1`.then(
          () => this.seconds.observe({ pool }, (performance.now() - t0) / 1000),
          () => {},
        );
      }
    }, this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

interface ScrapeMessage {
  type?: string;
  id?: number;
  metrics?: unknown[];
  text?: string;
}

/**
 * /metrics of a tier whose port is served by several processes (INGEST_PROCESSES, API_PROCESSES;
 * lib/lifecycle.ts `supervise`): a scrape reaches one of them, and would see that process's
 * counters alone, each scrape another's. The process asks its supervisor, which collects every
 * process's figures and sums them (gauges declared with `aggregator: 'max'` take the largest):
 * one series per tier, as if one process served it. Without a supervisor, the process's own. A
 * tier's metrics class extends it and declares its figures in `registry`, as a Figures class does.
 */
export class SupervisedMetrics {
  private next = 0;
  private readonly waiting = new Map<number, (text: string) => void>();

  constructor(readonly registry = new Registry()) {
    if (!process.send) return;
    process.on('message', (m: ScrapeMessage) => {
      if (m?.type === 'metrics-collect')
        void registry.getMetricsAsJSON().then((metrics) => process.send?.({ type: 'metrics-part', id: m.id, metrics }));
      else if (m?.type === 'metrics-text' && m.id !== undefined) {
        this.waiting.get(m.id)?.(m.text ?? '');
        this.waiting.delete(m.id);
      }
    });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    if (!process.send) return this.registry.metrics();
    const id = this.next++;
    return new Promise((resolve) => {
      // A supervisor that does not answer (it is stopping): this process's own figures.
      const late = setTimeout(() => {
        this.waiting.delete(id);
        resolve(this.registry.metrics());
      }, 3000);
      this.waiting.set(id, (text) => {
        clearTimeout(late);
        resolve(text);
      });
      process.send?.({ type: 'metrics-scrape', id });
    });
  }
}

/**
 * The supervisor's half of SupervisedMetrics: a worker's `metrics-scrape` is answered with the sum
 * of what every live worker reports within a second (a worker restarting is left out).
 */
export function relayScrapes(children: ReadonlySet<ChildProcess>): (from: ChildProcess, m: unknown) => void {
  let round = 0;
  return (from, raw) => {
    const m = raw as ScrapeMessage;
    if (m?.type !== 'metrics-scrape') return;
    const id = round++;
    const asked = [...children].filter((c) => c.connected);
    const parts: unknown[][] = [];
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      for (const c of asked) c.off('message', collect);
      // The parts are getMetricsAsJSON()'s output, passed through IPC.
      type Parts = Parameters<typeof AggregatorRegistry.aggregate>[0];
      const text = parts.length ? AggregatorRegistry.aggregate(parts as Parts).metrics() : Promise.resolve('');
      void text.then((t) => from.connected && from.send({ type: 'metrics-text', id: m.id, text: t }));
    };
    const collect = (reply: ScrapeMessage) => {
      if (reply?.type !== 'metrics-part' || reply.id !== id) return;
      parts.push(reply.metrics ?? []);
      if (parts.length === asked.length) finish();
    };
    const timer = setTimeout(finish, 1000);
    for (const c of asked) {
      c.on('message', collect);
      c.send({ type: 'metrics-collect', id });
    }
    if (asked.length === 0) finish();
  };
}

/**
 * The sum of a metric's samples in a /metrics text (Prometheus exposition format), over the label
 * sets that carry every one of `labels`; 0 where it has none. For readers of a tier's /metrics from
 * outside: the tests and the benchmark.
 */
export function sampleSum(text: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let sum = 0;
  for (const m of text.matchAll(/^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$/gm)) {
    if (m[1] !== name || !wanted.every((l) => (m[2] ?? '').includes(l))) continue;
    sum += Number(m[3]);
  }
  return sum;
}
