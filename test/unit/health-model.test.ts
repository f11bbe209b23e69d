import t from '#tap';
import { historyRange, utcDate } from '../../core-api/health/history.js';
import { activeDimensions, mergeModel, modelErrors, unscoredDimensions } from '../../core-api/health/model.js';
import { DEFAULT_HEALTH_MODEL, effectiveModel } from '../../schemas/health.js';

// The pure parts of the health endpoints: model merge and rules, history ranges. No server.

const fields = (errors: Array<{ field: string }>) => errors.map((e) => e.field);

t.test('merge one level deep', async (t) => {
  const base = effectiveModel(null);
  const m = mergeModel(base, { weights: { breadth: 1 }, key_events: { positive: ['login'] } });
  t.same(m.weights, { ...DEFAULT_HEALTH_MODEL.weights, breadth: 1 });
  t.same(m.key_events, { positive: ['login'], negative: [] }, 'a list left out becomes empty');
  t.same(m.thresholds, DEFAULT_HEALTH_MODEL.thresholds);
  t.same(base, effectiveModel(null), 'the current model is not changed in place');
  t.same(mergeModel(m, { thresholds: { healthy: 80 } }).key_events, m.key_events, 'key_events kept when not sent');
});

t.test('active dimensions and their rules', async (t) => {
  const base = effectiveModel(null);
  t.same(activeDimensions(base), ['usage_frequency', 'breadth', 'active_users', 'payment_health']);
  t.same(
    unscoredDimensions(base).map((d) => [d.key, d.active]),
    [
      ['usage_frequency', true],
      ['breadth', true],
      ['active_users', true],
      ['key_events', false],
      ['payment_health', true],
    ],
  );
  const flagged = mergeModel(base, { key_events: { negative: ['churn_signal'] } });
  t.ok(activeDimensions(flagged).includes('key_events'), 'a negative flag alone activates key_events');

  const only = { active_dimensions: ['key_events' as const] };
  t.same(fields(modelErrors(mergeModel(base, only), only)), ['active_dimensions']);
  const cleared = { key_events: {} };
  const keyOnly = mergeModel(flagged, only);
  t.same(fields(modelErrors(mergeModel(keyOnly, cleared), cleared)), ['key_events'], 'emptying the flags names them');

  const zero = { active_dimensions: ['breadth' as const, 'active_users' as const], weights: { breadth: 0 } };
  const z = mergeModel(mergeModel(base, { weights: { active_users: 0 } }), zero);
  t.same(fields(modelErrors(z, zero)), ['weights.breadth', 'weights.active_users']);

  const th = { thresholds: { healthy: 40 } };
  t.same(fields(modelErrors(mergeModel(base, th), th)), ['thresholds.healthy'], 'names the half that was sent');
  t.same(modelErrors(base, {}), [], 'the defaults are valid');
});

t.test('history range', async (t) => {
  const today = '2026-11-23';
  t.same(historyRange({}, today), { from: '2026-08-26', to: today }, 'the 90 days ending today');
  t.same(historyRange({ from: '2026-11-23' }, today), { from: today, to: today }, 'one day');
  t.same(historyRange({ from: '2024-11-23', to: today }, today), { from: '2024-11-23', to: today }, '731 days');
  t.throws(() => historyRange({ from: '2024-11-22', to: today }, today), { errors: [{ field: 'from' }] });
  t.throws(() => historyRange({ from: 'x', to: 'y' }, today), {
    errors: [
      { field: 'from', code: 'invalid_date' },
      { field: 'to', code: 'invalid_date' },
    ],
  });
  t.equal(utcDate('2026-02-28T23:30:00-01:00'), '2026-03-01');
  t.equal(utcDate('2026-02-28T23:30'), '2026-02-28', 'no offset: UTC');
  t.equal(utcDate('2026-02-28t10:00:00.123456z'), '2026-02-28');
  for (const bad of ['2026-02-29', '2026-00-10', '26-01-01', '2026-01-01T24:61:00Z', '1969-12-31', '', 'today'])
    t.equal(utcDate(bad), null, bad);
});
