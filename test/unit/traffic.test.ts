import t from '#tap';
import { closesConnection, rebalance, traffic } from '../../lib/http/traffic.js';

const answers = (tr: ReturnType<typeof traffic>, n: number) => Array.from({ length: n }, () => closesConnection(tr));

t.test('a rebalance closes as many answers as it was asked for, then none', async (t) => {
  const tr = traffic();
  t.same(answers(tr, 2), [false, false], 'no rebalance: connections stay open');
  rebalance(tr, 3);
  t.same(answers(tr, 5), [true, true, true, false, false]);
});

t.test('without a count, the answers to the requests in flight close, however late they come', async (t) => {
  // A tier started under load: the first worker's requests answered long after it was asked.
  const tr = traffic();
  tr.inflight = 4;
  rebalance(tr);
  tr.inflight = 64;
  t.same(answers(tr, 5), [true, true, true, true, false], 'the four in flight when it was asked');
});

t.test('rebalances asked for at once are not added up', async (t) => {
  // Each worker of a tier that starts listening asks every worker for one (lib/lifecycle.ts).
  const tr = traffic();
  rebalance(tr, 5);
  rebalance(tr, 3);
  t.equal(tr.closesOwed, 5);
  answers(tr, 4);
  rebalance(tr, 3);
  t.equal(tr.closesOwed, 3, 'a later one asks for what it says, once the earlier is nearly paid');
});
