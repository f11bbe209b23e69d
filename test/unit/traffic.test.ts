import t from '#tap';
import { rebalance, rebalancing, traffic } from '../../lib/http/traffic.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('a rebalance closes connections for its window, then stops', async (t) => {
  const tr = traffic();
  rebalance(tr, 40);
  t.ok(rebalancing(tr));
  await sleep(70);
  t.notOk(rebalancing(tr));
});

t.test('a rebalance asked for while the event loop is busy still ends', async (t) => {
  // A timer counts from the loop's cached time, older than Date.now() after 2 ms of work: one that
  // ended the window fired up to that much before its end and left it open for good (one in three
  // times here with 576f671's timer).
  let stuck = 0;
  for (let i = 0; i < 50; i++) {
    const tr = traffic();
    const began = Date.now();
    while (Date.now() - began < 2);
    rebalance(tr, 5);
    await sleep(30);
    if (rebalancing(tr)) stuck++;
  }
  t.equal(stuck, 0, 'no window of 50 left open');
});

t.test('a second rebalance asked for during the first lasts its whole window', async (t) => {
  // Each worker of a tier that starts listening asks every worker for one (lib/lifecycle.ts).
  // Half a second either side of the look within the second window: room for a busy machine.
  const tr = traffic();
  rebalance(tr, 2000);
  await sleep(1000);
  rebalance(tr, 2000);
  await sleep(1500);
  t.ok(rebalancing(tr), "past the first window's end, within the second's");
  await sleep(1000);
  t.notOk(rebalancing(tr), "over at the second window's end");
});
