import net from 'node:net';
import t from '#tap';
import { type BatchInfo, IngestClient } from '../../sdk/src/client.js';
import { ingest, workspace } from '../events/support.js';
import { ch, closeDb, startTier, waitFor } from '../helpers/stack.js';

/**
 * The one fault a client cannot see through: the service stored the batch and its answer was lost
 * on the way back. On surface B the batch's Idempotency-Key, kept across retries, turns the retry
 * into a replay of the first answer: stored once.
 */

/** A TCP proxy to `port` that cuts the first connection as soon as the service starts answering. */
async function answerLosingProxy(t: { teardown(fn: () => unknown): void }, port: number) {
  let cut = 0;
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    const first = cut === 0;
    client.on('error', () => {});
    upstream.on('error', () => client.destroy());
    client.pipe(upstream);
    upstream.on('data', (chunk) => {
      if (first && cut === 0) {
        cut++;
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    upstream.on('end', () => client.end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, cuts: () => cut };
}

t.teardown(closeDb);

t.test('surface B: a batch whose answer was lost is retried under its key and stored once', async (t) => {
  const { ws, ids } = await workspace(5);
  const tier = await ingest(t);
  await startTier(t, 'processors', { WRITER_BATCH_MS: '50' });
  const proxy = await answerLosingProxy(t, tier.port);
  const client = new IngestClient({ url: proxy.url, surface: 'b', token: ws.api_key, retryBaseMs: 50 });
  const batches: BatchInfo[] = [];
  client.on('batch', (b) => batches.push(b));
  const reasons: string[] = [];
  client.on('retry', (_a, _d, reason) => reasons.push(reason));
  // No external_id: only the Idempotency-Key can tell the retry from new events.
  for (let i = 0; i < 500; i++) client.track({ customer_id: ids[i % ids.length], event_name: 'lost_answer' });
  await client.close();

  t.equal(proxy.cuts(), 1, 'the first answer was lost');
  t.same(reasons, ['INGEST_NETWORK']);
  t.equal(batches.length, 1);
  t.equal(batches[0].attempts, 2);
  t.equal(batches[0].replayed, true, "the retry got the first request's recorded answer");
  t.match(client.stats(), { accepted: 500, failed: 0, rejected: 0 });
  const count = async () =>
    Number(
      (
        await ch<{ c: string }>(
          `SELECT count() AS c FROM events WHERE tenant_id = '${ws.tenant_id}' AND event_name = 'lost_answer'`,
        )
      )[0].c,
    );
  await waitFor('the batch in ClickHouse', async () => (await count()) >= 500, 60_000, 200);
  // A second copy would come through the same stream right behind the first.
  await new Promise((r) => setTimeout(r, 1000));
  t.equal(await count(), 500, 'stored once');
});
