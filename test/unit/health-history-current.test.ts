import t from '#tap';
import { mondayOf, type StoredPoint, withCurrent } from '../../core-api/health/history.js';

// The history as served: the stored points with the current score as the newest point of its day
// or week, when it is at least as recent as what is stored. No server.
const range = { from: '2026-11-01', to: '2026-11-30' };
const at = (s: string) => Date.parse(s) / 1000;
const current = (iso: string, score = 80) => ({ score, status: 'healthy' as const, calculated_at: new Date(iso) });
const p = (date: string, score: number, time: string): StoredPoint => ({
  date,
  score,
  status: 'neutral',
  at: at(time),
});

t.test('mondayOf is the Monday of the ISO week', async (t) => {
  t.equal(mondayOf('2026-11-23'), '2026-11-23', 'a Monday');
  t.equal(mondayOf('2026-11-29'), '2026-11-23', 'a Sunday');
  t.equal(mondayOf('2026-11-01'), '2026-10-26', 'across a month');
});

t.test('daily', async (t) => {
  const stored = [p('2026-11-20', 50, '2026-11-20T10:00:00Z'), p('2026-11-27', 60, '2026-11-27T09:00:00Z')];
  t.same(
    withCurrent(stored, current('2026-11-27T10:00:03Z'), range, 'daily'),
    [
      { date: '2026-11-20', score: 50, status: 'neutral' },
      { date: '2026-11-27', score: 80, status: 'healthy' },
    ],
    'a newer current score replaces its day',
  );
  t.same(
    withCurrent(stored, current('2026-11-27T09:00:00.500Z'), range, 'daily').at(-1),
    { date: '2026-11-27', score: 80, status: 'healthy' },
    'the same second: the current one (stored times have whole seconds)',
  );
  t.same(
    withCurrent(stored, current('2026-11-27T08:59:59Z'), range, 'daily').at(-1),
    { date: '2026-11-27', score: 60, status: 'neutral' },
    'an older current score leaves a newer stored point',
  );
  t.same(
    withCurrent([stored[0]], current('2026-11-27T10:00:00Z'), range, 'daily').map((x) => x.date),
    ['2026-11-20', '2026-11-27'],
    'a day not stored yet is added in order',
  );
  t.same(
    withCurrent([stored[1]], current('2026-11-20T10:00:00Z'), range, 'daily').map((x) => x.date),
    ['2026-11-20', '2026-11-27'],
    'also before later points',
  );
  t.same(withCurrent([], current('2026-11-27T10:00:00Z'), range, 'daily').length, 1, 'no stored point at all');
  t.same(
    withCurrent(stored, null, range, 'daily'),
    stored.map(({ at: _, ...x }) => x),
    'never scored',
  );
  t.same(
    withCurrent(stored, current('2026-12-01T00:00:00Z'), range, 'daily').length,
    2,
    'a current score outside the range is not a point',
  );
});

t.test('weekly', async (t) => {
  const stored = [p('2026-11-16', 50, '2026-11-20T10:00:00Z'), p('2026-11-23', 60, '2026-11-24T09:00:00Z')];
  t.same(
    withCurrent(stored, current('2026-11-27T10:00:00Z'), range, 'weekly'),
    [
      { date: '2026-11-16', score: 50, status: 'neutral' },
      { date: '2026-11-23', score: 80, status: 'healthy' },
    ],
    "the week's point is its last calculation",
  );
  t.same(
    withCurrent([stored[0]], current('2026-11-27T10:00:00Z'), range, 'weekly').at(-1),
    { date: '2026-11-23', score: 80, status: 'healthy' },
    'a new week dated by its Monday',
  );
});
