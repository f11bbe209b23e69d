import t from '#tap';
import { SharedRateLimiter } from '../../lib/rate-limit.js';

// The lease size decides how far processes sharing a workspace can overshoot a limit together;
// the window arithmetic needs PostgreSQL's counter and is tested over HTTP (test/ingest/rate-limit.test.ts).

t.test('limits below 2000 lease one token at a time, so they hold exactly across processes', async (t) => {
  for (const limit of [0, 1, 60, 300, 1000, 1999]) t.equal(SharedRateLimiter.chunkFor(limit), 1, String(limit));
});

t.test('larger limits lease a thousandth of the limit, at most 10,000 tokens', async (t) => {
  t.equal(SharedRateLimiter.chunkFor(2000), 2);
  t.equal(SharedRateLimiter.chunkFor(120_000), 120);
  t.equal(SharedRateLimiter.chunkFor(10_000_000), 10_000);
  t.equal(SharedRateLimiter.chunkFor(1e12), 10_000);
  for (let limit = 1; limit < 5e7; limit *= 3) {
    const c = SharedRateLimiter.chunkFor(limit);
    if (!(c >= 1 && c <= Math.max(1, limit / 1000) && Number.isInteger(c))) t.fail(`chunk ${c} for ${limit}`);
  }
  t.pass('every chunk is a whole number between 1 and a thousandth of the limit');
});
