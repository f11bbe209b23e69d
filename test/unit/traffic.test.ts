import t from '#tap';
import { rebalance, traffic } from '../../lib/http/traffic.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('a rebalance closes connections for its window, then stops', async (t) => {
  const tr = traffic();
  rebalance(tr, 40);
  t.ok(tr.rebalancing);
  await sleep(70);
  t.notOk(tr.rebalancing);
});

t.test('a second rebalance asked for during the first lasts its whole window', async (t) => {
  // Each worker of a tier that starts listening asks every worker for one (lib/lifecycle.ts).
  const tr = traffic();
  rebalance(tr, 1000);
  await sleep(500);
  rebalance(tr, 1000);
  await sleep(700);
  t.ok(tr.rebalancing, "past the first window's end, within the second's");
  await sleep(600);
  t.notOk(tr.rebalancing, "over at the second window's end");
});
