import t from '#tap';
import { backoffDelay, parseRetryAfter, retryableStatus, retryDelay } from '../../sdk/src/retry.js';

t.test('Retry-After: delay-seconds or an HTTP-date, in ms', async (t) => {
  const now = Date.parse('2026-05-01T12:00:00Z');
  t.equal(parseRetryAfter('5', now), 5000);
  t.equal(parseRetryAfter(' 0 ', now), 0);
  t.equal(parseRetryAfter('Fri, 01 May 2026 12:00:30 GMT', now), 30_000);
  t.equal(parseRetryAfter('Fri, 01 May 2026 11:00:00 GMT', now), 0, 'a date in the past: now');
  t.equal(parseRetryAfter(undefined, now), undefined);
  t.equal(parseRetryAfter('', now), undefined);
  t.equal(parseRetryAfter('-1', now), undefined);
  t.equal(parseRetryAfter('1.5', now), undefined);
  t.equal(parseRetryAfter('soon', now), undefined);
});

t.test('full jitter: uniform under min(cap, base × 2^attempt)', async (t) => {
  const o = { baseMs: 100, capMs: 10_000 };
  t.equal(
    backoffDelay(0, o, () => 0),
    0,
  );
  t.equal(
    backoffDelay(0, o, () => 0.999),
    99,
  );
  t.equal(
    backoffDelay(3, o, () => 0.5),
    400,
  );
  t.equal(
    backoffDelay(20, o, () => 0.999),
    9990,
    'capped',
  );
  t.equal(
    backoffDelay(5000, o, () => 0.5),
    5000,
    'no overflow for large attempts',
  );
  for (let i = 0; i < 1000; i++) {
    const d = backoffDelay(4, o);
    if (d < 0 || d >= 1600) t.fail(`delay ${d} out of [0, 1600)`);
  }
});

t.test('Retry-After is a floor: never sooner than the service asked', async (t) => {
  const o = { baseMs: 100, capMs: 10_000 };
  t.equal(
    retryDelay(0, 2000, o, () => 0.5),
    2000,
  );
  t.equal(
    retryDelay(8, 2000, o, () => 0.5),
    5000,
    'the backoff when it is longer',
  );
  t.equal(
    retryDelay(1, undefined, o, () => 0.5),
    100,
  );
});

t.test('which answers are retried', async (t) => {
  for (const s of [408, 429, 500, 502, 503, 504]) t.ok(retryableStatus(s, 'a'), `${s} on surface a`);
  for (const s of [400, 401, 403, 404, 409, 413, 415, 422]) t.notOk(retryableStatus(s, 'a'), `${s} on surface a`);
  t.ok(retryableStatus(409, 'b'), '409 on surface b: the same Idempotency-Key still running');
  t.notOk(retryableStatus(422, 'b'));
});
