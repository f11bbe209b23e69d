import t from '#tap';
import { createLogger } from '../../lib/logger.js';
import { RecalculateBatcher } from '../../processors/health/batcher.js';

// Single-flight batching of on-demand recalculations, with a scoring function that records its
// calls and finishes when the test says so.
const log = createLogger('test', 'silent');

interface Call {
  tenantId: string;
  ids: string[];
  done: (scored?: string[]) => void;
  fail: (err: Error) => void;
}

function recorder() {
  const calls: Call[] = [];
  let wake: (() => void) | undefined;
  const score = (tenantId: string, ids: string[]) =>
    // Each customer's result names its workspace and itself, so a mix-up shows.
    new Promise<Map<string, string>>((resolve, reject) => {
      calls.push({
        tenantId,
        ids,
        done: (s = ids) => resolve(new Map(s.map((id) => [id, `${tenantId}/${id}`]))),
        fail: reject,
      });
      wake?.();
    });
  const nextCall = async (n: number) => {
    while (calls.length < n) await new Promise<void>((r) => (wake = r));
    return calls[n - 1];
  };
  return { calls, score, nextCall };
}

t.test('requests of an idle workspace arriving together make one calculation', async (t) => {
  const r = recorder();
  const b = new RecalculateBatcher(r.score, log, { maxBatch: 100, windowMs: 5 });
  const answers = Promise.all(['c1', 'c2', 'c3', 'c2'].map((c) => b.recalculate('w1', c)));
  const call = await r.nextCall(1);
  t.same(call.ids, ['c1', 'c2', 'c3'], 'each customer once');
  call.done(['c1', 'c2']);
  t.same(
    await answers,
    ['w1/c1', 'w1/c2', undefined, 'w1/c2'],
    "each request gets its own customer's result; one the calculation did not score gets none",
  );
  t.equal(r.calls.length, 1);
  t.equal(b.size, 0);
});

t.test('with one lane, requests arriving during a calculation go into the next one, all together', async (t) => {
  const r = recorder();
  const b = new RecalculateBatcher(r.score, log, { maxBatch: 100, windowMs: 1, lanes: 1 });
  const first = b.recalculate('w1', 'c1');
  const running = await r.nextCall(1);
  const later = ['c1', 'c4', 'c5'].map((c) => b.recalculate('w1', c));
  await new Promise((res) => setTimeout(res, 20));
  t.equal(r.calls.length, 1, 'nothing joins or overtakes the running calculation');
  running.done();
  t.equal(await first, 'w1/c1');
  const next = await r.nextCall(2);
  t.same(next.ids, ['c1', 'c4', 'c5'], 'c1 is calculated again: its first calculation may predate the request');
  next.done();
  t.same(await Promise.all(later), ['w1/c1', 'w1/c4', 'w1/c5']);
});

t.test('with two lanes, requests arriving during a calculation start the next at once, never join it', async (t) => {
  const r = recorder();
  const b = new RecalculateBatcher(r.score, log, { maxBatch: 100, windowMs: 1, lanes: 2 });
  const first = b.recalculate('w1', 'c1');
  const running = await r.nextCall(1);
  const second = ['c1', 'c4'].map((c) => b.recalculate('w1', c));
  const parallel = await r.nextCall(2);
  t.same(parallel.ids, ['c1', 'c4'], 'a second calculation while the first runs; c1 again, the first may predate it');
  const third = b.recalculate('w1', 'c5');
  await new Promise((res) => setTimeout(res, 20));
  t.equal(r.calls.length, 2, 'both lanes busy: the third request waits');
  parallel.done();
  const next = await r.nextCall(3);
  t.same(next.ids, ['c5'], 'it starts when a lane frees');
  running.done();
  next.done();
  t.same(await Promise.all([first, ...second, third]), ['w1/c1', 'w1/c1', 'w1/c4', 'w1/c5']);
  t.equal(b.size, 0);
});

t.test('workspaces do not wait for each other', async (t) => {
  const r = recorder();
  const b = new RecalculateBatcher(r.score, log, { maxBatch: 100, windowMs: 1 });
  const a = b.recalculate('w1', 'c1');
  const w2 = b.recalculate('w2', 'd1');
  const [c1, c2] = [await r.nextCall(1), await r.nextCall(2)];
  t.same(new Set([c1.tenantId, c2.tenantId]), new Set(['w1', 'w2']));
  c2.done();
  c1.done();
  t.same(await Promise.all([a, w2]), ['w1/c1', 'w2/d1']);
});

t.test('a batch holds at most maxBatch customers; the rest follow in order', async (t) => {
  const r = recorder();
  const b = new RecalculateBatcher(r.score, log, { maxBatch: 2, windowMs: 1, lanes: 1 });
  const all = ['c1', 'c2', 'c2', 'c3', 'c4', 'c5'].map((c) => b.recalculate('w1', c));
  (await r.nextCall(1)).done();
  (await r.nextCall(2)).done();
  (await r.nextCall(3)).done();
  t.same(
    r.calls.map((c) => c.ids),
    [['c1', 'c2'], ['c3', 'c4'], ['c5']],
  );
  t.same(await Promise.all(all), ['w1/c1', 'w1/c2', 'w1/c2', 'w1/c3', 'w1/c4', 'w1/c5']);
});

t.test('a failed calculation fails its own requests only', async (t) => {
  const r = recorder();
  const b = new RecalculateBatcher(r.score, log, { maxBatch: 100, windowMs: 1, lanes: 1 });
  const doomed = b.recalculate('w1', 'c1');
  const running = await r.nextCall(1);
  const after = b.recalculate('w1', 'c2');
  running.fail(Object.assign(new Error('ClickHouse is down'), { code: 'ECONNREFUSED' }));
  await t.rejects(doomed, { code: 'ECONNREFUSED' });
  (await r.nextCall(2)).done();
  t.equal(await after, 'w1/c2', 'the next batch runs as usual');
  t.equal(b.size, 0);
});
