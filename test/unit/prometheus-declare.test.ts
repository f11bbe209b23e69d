import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import t, { type Test } from '#tap';
import { counter, Figures, gauge, histogram } from '../../lib/prometheus.js';

// The declaration helpers of lib/prometheus.ts must declare what prom-client's own configuration
// declares: the same exposition, series at zero included, and the same state a supervisor sums.

async function same(t: Test, declared: Registry, plain: Registry): Promise<void> {
  t.same(await declared.getMetricsAsJSON(), await plain.getMetricsAsJSON(), 'the same metrics, as JSON');
  t.equal(await declared.metrics(), await plain.metrics(), 'the same text');
}

t.test('a counter, its zero series created in order', async (t) => {
  const [declared, plain] = [new Registry(), new Registry()];
  counter(declared, 'a_total', ['table', 'code'], { help: 'A', zero: [{ table: 'x', code: 1 }, { table: 'y' }] });
  const c = new Counter({ name: 'a_total', help: 'A', labelNames: ['table', 'code'], registers: [plain] });
  c.inc({ table: 'x', code: 1 }, 0);
  c.inc({ table: 'y' }, 0);
  counter(declared, 'b_total', [], { help: 'B' });
  new Counter({ name: 'b_total', help: 'B', registers: [plain] });
  await same(t, declared, plain);
});

t.test('a histogram: its buckets, its zero series', async (t) => {
  const [declared, plain] = [new Registry(), new Registry()];
  histogram(declared, 'h_seconds', ['pool'], { help: 'H', buckets: [0.1, 1], zero: [{ pool: 'main' }] });
  new Histogram({ name: 'h_seconds', help: 'H', labelNames: ['pool'], buckets: [0.1, 1], registers: [plain] }).zero({
    pool: 'main',
  });
  await same(t, declared, plain);
});

t.test('a gauge: its aggregator, its collect callback', async (t) => {
  const [declared, plain] = [new Registry(), new Registry()];
  gauge(declared, 'g', [], {
    help: 'G',
    aggregator: 'max',
    collect() {
      this.set(3);
    },
  });
  new Gauge({
    name: 'g',
    help: 'G',
    aggregator: 'max',
    registers: [plain],
    collect() {
      this.set(3);
    },
  });
  await same(t, declared, plain);
  t.match(await declared.getMetricsAsJSON(), [{ aggregator: 'max', values: [{ value: 3 }] }]);
});

t.test('Figures: field initializers see the registry given to the constructor', async (t) => {
  class Example extends Figures {
    readonly hits = counter(this.registry, 'hits_total', [], { help: 'Hits' });
  }
  const registry = new Registry();
  new Example(registry).hits.inc(2);
  t.match(await registry.metrics(), /^hits_total 2$/m);
});
