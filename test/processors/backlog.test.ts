import t from '#tap';
import { runLoad } from '../helpers/load.js';
import { bootstrap, ch, privateJetStream, seed, startTier, waitFor } from '../helpers/stack.js';

t.test('a backlog built while no processor runs drains completely through many small contended inserts', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 100);
  // A JetStream of its own: no other file's writer drains the backlog before this one starts.
  const nats = await privateJetStream(t);
  const ingest = await startTier(t, 'ingest', {
    INGEST_PROCESSES: '1',
    INGEST_RATE_LIMIT_PER_MIN: '1000000',
    ...nats.env,
  });
  const load = await runLoad({ url: ingest.url, key: ws.ingestion_key, customers: 100, requests: 600, concurrency: 8 });
  t.equal(load.failures, 0);
  // One insert slot, tiny batches and a fast timer: flushes constantly wait for the slot.
  await startTier(t, 'processors', {
    WRITER_INSERT_STREAMS: '1',
    WRITER_BATCH_ROWS: '700',
    WRITER_BATCH_MS: '2',
    WRITER_PULL_BYTES: '262144',
    ...nats.env,
  });
  const count = async () =>
    Number((await ch<{ c: string }>(`SELECT count() AS c FROM events WHERE tenant_id = '${ws.tenant_id}'`))[0].c);
  await waitFor('backlog drained', async () => (await count()) === load.accepted, 90_000, 250);
  t.equal(await count(), load.accepted, 'every accepted event stored once');
});
