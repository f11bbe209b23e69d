import { randomUUID } from 'node:crypto';
import t from '#tap';
import { compileMetric } from '../../lib/metrics/compile.js';
import { compileMetricGroup, groupable } from '../../lib/metrics/group.js';
import type { MetricDefinition } from '../../schemas/core/metrics.js';
import { ch } from '../helpers/stack.js';
import { storeEvents, type StoredEvent } from './support.js';

// The materializer reads every metric of a source event in one query (lib/metrics/group.ts).
// Each value must equal what the metric's own query gives: compared here, metric by metric and
// customer by customer, over events chosen to hit the edges (missing, empty and non-numeric
// properties, events just outside a window, customers with events of the group's other metrics only).

const DAY = 86_400_000;
const CALCULATIONS = ['count', 'sum', 'avg', 'max', 'distinct_count', 'last_value', 'exists'] as const;
const WINDOWS: MetricDefinition['window'][] = [
  { type: 'rolling', days: 1 },
  { type: 'rolling', days: 7 },
  { type: 'rolling', days: 30 },
  { type: 'calendar', unit: 'week' },
  { type: 'calendar', unit: 'month' },
];
const FILTERS: MetricDefinition['filter'][] = [
  [],
  [{ field: 'properties.plan', op: 'eq', value: 'pro' }],
  [{ field: 'properties.amount', op: 'gt', value: 50 }],
  [{ field: 'properties.plan', op: 'in', value: ['pro', 'enterprise'] }],
  [{ field: 'properties.amount', op: 'neq', value: 10 }],
];

function events(customers: string[]): StoredEvent[] {
  const out: StoredEvent[] = [];
  const amounts = ['10', '75', '120.5', 'n/a', '', '-3'];
  const plans = ['pro', 'free', 'enterprise'];
  for (const [c, customer] of customers.entries()) {
    for (let i = 0; i < 3 + (c % 9); i++) {
      const props: Record<string, string> = { plan: plans[(c + i) % 3] };
      if ((c + i) % 5 !== 0) props.amount = amounts[(c * 7 + i) % amounts.length];
      // Spread over 40 days so that every window has events just inside and just outside it.
      out.push({ customer, name: 'feature', ago: ((c * 13 + i * 29) % 40) * DAY + (i % 3) * 3_600_000, props });
    }
    if (c % 4 === 0) out.push({ customer, name: 'other', ago: 1000 });
  }
  return out;
}

t.test('grouped metrics give the values each metric gives alone', async (t) => {
  const tenantId = randomUUID();
  const customers = Array.from({ length: 40 }, () => randomUUID());
  await storeEvents(tenantId, events(customers));
  const now = new Date();
  const defs: MetricDefinition[] = [];
  for (const [i, calculation] of CALCULATIONS.entries())
    for (const [w, window] of WINDOWS.entries()) {
      const d: MetricDefinition = {
        source_event: 'feature',
        calculation,
        target_property: calculation === 'count' || calculation === 'exists' ? null : 'amount',
        filter: FILTERS[(i + w) % FILTERS.length],
        window,
        grain: 'customer',
      };
      if (groupable(d, now)) defs.push(d);
    }
  defs.push({ ...defs[0], calculation: 'last_value', target_property: null });
  t.ok(defs.length >= 25, `${defs.length} metrics in one group`);

  const group = compileMetricGroup(defs, { tenantId, now });
  const rows = await ch<Record<string, unknown>>(group.sql);
  const grouped = new Map(rows.map((r) => [r.customer_id as string, r]));
  let compared = 0;
  for (const [i, d] of defs.entries()) {
    const alone = compileMetric(d, { tenantId, now });
    t.same(group.periods[i], alone.period, `metric ${i}: the same period`);
    const single = new Map(
      (await ch<{ customer_id: string; value: unknown }>(alone.sql)).map((r) => [r.customer_id, r.value]),
    );
    for (const customer of customers) {
      const a = single.has(customer) ? single.get(customer) : alone.empty;
      const g = grouped.has(customer) ? grouped.get(customer)?.[`v${i}`] : group.empty[i];
      const norm = (v: unknown) => (v === null || v === undefined ? null : Number(v));
      if (norm(a) !== norm(g))
        t.fail(
          `${d.calculation} ${JSON.stringify(d.window)} ${JSON.stringify(d.filter)}: ${customer} alone ${a}, grouped ${g}`,
        );
      compared++;
    }
  }
  t.equal(compared, defs.length * customers.length, 'every (metric, customer) compared');
  t.ok(
    [...grouped.values()].some((r) => Number(r.v0) === 0),
    'some customer has events of the group but none in the first metric: its value is the empty one',
  );
});
