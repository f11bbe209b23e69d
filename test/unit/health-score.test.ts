import t from '#tap';
import { type Aggregates, emptyAggregates, scoreAggregates, sliceAggregates } from '../../processors/health/score.js';
import scoreChunk from '../../processors/health/score-worker.js';
import { DEFAULT_HEALTH_MODEL, effectiveModel, type DimensionScore, type HealthModel } from '../../schemas/health.js';

// The health arithmetic without any server: aggregates of one customer in, breakdown and score out.
type One = Partial<Record<keyof Aggregates, number>>;

function score(model: HealthModel, ...customers: One[]) {
  const a = emptyAggregates(customers.length);
  customers.forEach((c, i) => {
    for (const [k, v] of Object.entries(c)) a[k as keyof Aggregates][i] = v;
  });
  const s = scoreAggregates(model, a);
  return customers.map((_, i) => ({
    score: s.score[i],
    status: s.status[i],
    dims: Object.fromEntries((JSON.parse(s.dimensions[i]) as DimensionScore[]).map((d) => [d.key, d])),
    list: JSON.parse(s.dimensions[i]) as DimensionScore[],
  }));
}

const model = DEFAULT_HEALTH_MODEL;

t.test('a customer without any event: usage dimensions 0, payment 100, key events inactive', async (t) => {
  const [c] = score(model, {});
  t.same(
    c.list.map((d) => [d.key, d.active, d.weight, d.score, d.value, d.unit]),
    [
      ['usage_frequency', true, 0.25, 0, 0, 'days_per_week'],
      ['breadth', true, 0.15, 0, 0, 'distinct_events'],
      ['active_users', true, 0.2, 0, 0, 'dau_mau_ratio'],
      ['key_events', false, 0.15, null, null, 'net_key_events'],
      ['payment_health', true, 0.25, 100, 0, 'unresolved_billing_issues'],
    ],
  );
  // 0.25 × 100 / (0.25 + 0.15 + 0.2 + 0.25) = 29.4
  t.equal(c.score, 29);
  t.equal(c.status, 'at_risk');
});

t.test('usage frequency: days per week over 28 days, 5 days a week = 100', async (t) => {
  const [full, more, part] = score(model, { activeDays: 20 }, { activeDays: 28 }, { activeDays: 7 });
  t.same([full.dims.usage_frequency.value, full.dims.usage_frequency.score], [5, 100]);
  t.same([more.dims.usage_frequency.value, more.dims.usage_frequency.score], [7, 100], 'capped at 100');
  t.same([part.dims.usage_frequency.value, part.dims.usage_frequency.score], [1.75, 35]);
});

t.test('breadth: 10 distinct names = 100, linear below', async (t) => {
  const [ten, three] = score(model, { names: 10 }, { names: 3 });
  t.same([ten.dims.breadth.value, ten.dims.breadth.score], [10, 100]);
  t.same([three.dims.breadth.value, three.dims.breadth.score], [3, 30]);
});

t.test('active users: DAU/MAU, 0.4 = 100, no users = 0', async (t) => {
  // 4 users every day of 30: DAU 4, MAU 4 → 1.0; 2 of 10 users a day → 0.2 → 50.
  const [all, fifth, none] = score(model, { userDays: 120, mau: 4 }, { userDays: 60, mau: 10 }, { userDays: 0 });
  t.same([all.dims.active_users.value, all.dims.active_users.score], [1, 100]);
  t.same([fifth.dims.active_users.value, fifth.dims.active_users.score], [0.2, 50]);
  t.same([none.dims.active_users.value, none.dims.active_users.score], [0, 0]);
});

t.test('key events: 50 + 10 per net event, clamped, active once the model flags one', async (t) => {
  const flagged = effectiveModel({ key_events: { positive: ['upgraded'], negative: ['ticket_opened'] } });
  const [up, down, far] = score(flagged, { positive: 3, negative: 1 }, { negative: 2 }, { positive: 9 });
  t.same([up.dims.key_events.active, up.dims.key_events.value, up.dims.key_events.score], [true, 2, 70]);
  t.same([down.dims.key_events.value, down.dims.key_events.score], [-2, 30]);
  t.equal(far.dims.key_events.score, 100);
  const notListed = effectiveModel({
    key_events: { positive: ['upgraded'], negative: [] },
    active_dimensions: ['usage_frequency', 'payment_health'],
  });
  t.equal(score(notListed, { positive: 3 })[0].dims.key_events.active, false, 'flagged but not an active dimension');
});

t.test('payment health: penalties of unresolved negatives; no billing = 100', async (t) => {
  const [none, twoFailed, old, paidSince] = score(
    model,
    {},
    { billing: 2, negatives: 2, penalty: 50 },
    { billing: 1, negatives: 1, penalty: 12.5 },
    { billing: 3, negatives: 0, penalty: 0 },
  );
  t.same([none.dims.payment_health.value, none.dims.payment_health.score], [0, 100]);
  t.same([twoFailed.dims.payment_health.value, twoFailed.dims.payment_health.score], [2, 50]);
  t.equal(old.dims.payment_health.score, 88, 'half a payment_failed penalty, rounded');
  t.equal(paidSince.dims.payment_health.score, 100);
  t.equal(score(model, { billing: 9, negatives: 9, penalty: 250 })[0].dims.payment_health.score, 0, 'floor at 0');
});

t.test('score: weighted mean over active dimensions; status by thresholds', async (t) => {
  const healthy = { activeDays: 28, names: 10, userDays: 90, mau: 5, billing: 1 };
  const [h] = score(model, healthy);
  t.equal(h.score, 100);
  t.equal(h.status, 'healthy');
  const onlyPayment = effectiveModel({ active_dimensions: ['payment_health'] });
  const [p] = score(onlyPayment, { ...healthy, billing: 2, negatives: 2, penalty: 50 });
  t.equal(p.score, 50, 'equals the one active dimension');
  t.equal(p.status, 'neutral');
  t.equal(p.dims.usage_frequency.score, null, 'inactive dimensions carry no score');
  t.equal(p.dims.usage_frequency.weight, 0.25, 'but their configured weight');
  const strict = effectiveModel({ thresholds: { healthy: 101, at_risk: 100 } });
  t.equal(score(strict, healthy)[0].status, 'neutral', 'thresholds come from the model');
  // usage 35 × 0.5 + payment 100 × 0.5 with weights 1 and 1 → 67.5 → 68
  const even = effectiveModel({
    weights: { ...DEFAULT_HEALTH_MODEL.weights, usage_frequency: 1, payment_health: 1 },
    active_dimensions: ['usage_frequency', 'payment_health'],
  });
  t.equal(score(even, { activeDays: 7 })[0].score, 68);
});

t.test('the pool worker scores a chunk exactly as inline scoring does', async (t) => {
  const a = emptyAggregates(3);
  a.activeDays.set([0, 10, 28]);
  a.names.set([0, 4, 12]);
  const inline = scoreAggregates(model, a);
  const chunk = scoreChunk({ model, aggregates: sliceAggregates(a, 1, 3) });
  t.same([...chunk.score], [...inline.score.subarray(1, 3)]);
  t.same(chunk.dimensions, inline.dimensions.slice(1, 3));
  t.equal(sliceAggregates(a, 1, 3).activeDays.buffer.byteLength, 16, 'a slice carries only its rows');
});
