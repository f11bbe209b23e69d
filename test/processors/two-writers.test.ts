import fs from 'node:fs';
import path from 'node:path';
import t from '#tap';
import { consumers } from '../../lib/nats.js';
import { runLoad } from '../helpers/load.js';
import { consumerInfo, jetstream, lastDelivery, writersIdle } from '../helpers/observe.js';
import { bootstrap, ch, profile, seed, stackUp, startTier, waitFor } from '../helpers/stack.js';

// Small batches and one insert slot: messages wait their turn far longer than the ack wait (10 s).
const WRITER = { WRITER_INSERT_STREAMS: '1', WRITER_BATCH_ROWS: '500', WRITER_BATCH_MS: '20' };

t.test(
  'two processors sharing the consumers through a long ClickHouse outage store every event exactly once',
  async (t) => {
    const ws = await bootstrap();
    await seed(ws.tenant_id, 50);
    const ingest = await startTier(t, 'ingest', { INGEST_PROCESSES: '1', INGEST_RATE_LIMIT_PER_MIN: '1000000' });
    t.teardown(() => stackUp());
    await startTier(t, 'processors', WRITER);
    await startTier(t, 'processors', WRITER);

    const jsm = await jetstream(t);
    const writer = () => consumerInfo(jsm, consumers.usageWriter);
    const redeliveredBefore = (await writer()).num_redelivered;

    const pid = Number(fs.readFileSync(path.join(profile.dataDir, 'clickhouse.pid'), 'utf8'));
    process.kill(pid, 'SIGKILL');
    const load = await runLoad({
      url: ingest.url,
      key: ws.ingestion_key,
      customers: 50,
      requests: 300,
      concurrency: 6,
    });
    t.equal(load.failures, 0);
    // Hold the outage until the writers have held messages for longer than the consumer's ack wait:
    // anything a writer fetched but did not keep alive has by then been redelivered (and, with no
    // ack possible while ClickHouse is down, is counted in num_redelivered).
    const held = await waitFor(
      'the writers to hold messages',
      async () => {
        const c = await writer();
        return c.num_ack_pending > 0 && c;
      },
      30_000,
      100,
    );
    const ackWaitMs = (held.config.ack_wait ?? 30e9) / 1e6; // unset: nats-server's default, 30 s
    const heldSince = lastDelivery(held);
    const after = await waitFor(
      `held messages to outlive the ${ackWaitMs} ms ack wait`,
      async () => {
        const c = await writer();
        return Date.now() > heldSince + ackWaitMs * 1.5 && c;
      },
      ackWaitMs * 3,
      250,
    );
    t.ok(after.num_ack_pending > 0, `${after.num_ack_pending} messages still held by the writers`);
    // Redelivered copies are allowed (the writers reconcile them); what they become is checked below.
    t.comment(`redelivered and held during the outage: ${after.num_redelivered - redeliveredBefore}`);
    t.equal(await stackUp(), 0, 'ClickHouse back');

    const count = async () =>
      Number((await ch<{ c: string }>(`SELECT count() AS c FROM events WHERE tenant_id = '${ws.tenant_id}'`))[0].c);
    await waitFor('backlog drained', async () => (await count()) >= load.accepted, 90_000, 250);
    await writersIdle(jsm, consumers.usageWriter, 'events');
    const [s] = await ch<{ c: string; u: string }>(
      `SELECT count() AS c, uniqExact(event_id) AS u FROM events WHERE tenant_id = '${ws.tenant_id}'`,
    );
    t.equal(Number(s.c), load.accepted, 'row count equals the accepted count');
    t.equal(Number(s.u), load.accepted, 'no event stored twice');
  },
);
