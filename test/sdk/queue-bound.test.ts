import net from 'node:net';
import t from '#tap';
import v8 from 'node:v8';
import vm from 'node:vm';
import { IngestClient } from '../../sdk/src/client.js';

/**
 * A producer that outruns a service that does not answer: the client holds at most maxQueueEvents
 * events, drops the rest with 'dropped', and its memory stops growing at that bound.
 */

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;
const heapMb = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed / 1024 / 1024;
};

t.test('at its limit the queue drops and memory stays bounded', async (t) => {
  // Accepts connections and requests and never answers.
  const sockets = new Set<net.Socket>();
  const blackHole = net.createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.resume();
  });
  await new Promise<void>((r) => blackHole.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    blackHole.close();
  });
  const url = `http://127.0.0.1:${(blackHole.address() as net.AddressInfo).port}`;
  const LIMIT = 20_000;
  const client = new IngestClient({ url, surface: 'a', apiKey: 'k', maxQueueEvents: LIMIT, closeTimeoutMs: 0 });
  let dropped = 0;
  client.on('dropped', () => dropped++);
  const event = (i: number) => ({
    event_name: 'page_view',
    customer_id: '0190c8a4-2b4e-7d6a-9b1c-3f2e1d0c9b8a',
    user_id: `user-${i}`,
    properties: { path: `/reports/${i}`, text: 'x'.repeat(200) },
  });

  const base = heapMb();
  let queued = 0;
  for (let i = 0; i < LIMIT * 2; i++) if (client.track(event(i))) queued++;
  const atLimit = heapMb();
  for (let i = 0; i < 1_000_000; i++) if (client.track(event(i))) queued++;
  const after = heapMb();
  const s = client.stats();
  t.equal(queued, LIMIT, 'exactly maxQueueEvents events held');
  t.equal(s.queued + s.inFlight, LIMIT);
  t.equal(dropped, LIMIT + 1_000_000, "each refused event reported with 'dropped'");
  t.equal(s.dropped, dropped);
  t.comment(
    `heap: ${base.toFixed(1)} MB empty, ${atLimit.toFixed(1)} MB at the limit, ${after.toFixed(1)} MB after 1M more`,
  );
  t.ok(after - atLimit < 5, `no growth past the bound (${(after - atLimit).toFixed(1)} MB)`);
  t.ok(atLimit - base < (LIMIT * 2 * 1024) / 1024 / 1024, 'the bound itself: under 2 KB per held event');
  await client.close();
  t.equal(client.stats().failed, LIMIT, 'closed with nothing answered: every held event reported failed');
});
