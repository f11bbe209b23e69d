import t from '#tap';
import { consumers } from '../../lib/nats.js';
import { runLoad } from '../helpers/load.js';
import { jetstream, metric, writersIdle } from '../helpers/observe.js';
import { bootstrap, ch, seed, startTier, waitFor, type Tier } from '../helpers/stack.js';
import { rollupsAndDirect } from './rollups.js';

// Small, frequent inserts so that the kills land inside inserts and between insert and ack.
const WRITER = { WRITER_BATCH_ROWS: '1500', WRITER_BATCH_MS: '30', WRITER_INSERT_STREAMS: '2' };

t.test(
  'every accepted event lands exactly once although the processor is SIGKILLed mid-batch, again and again',
  async (t) => {
    const ws = await bootstrap();
    await seed(ws.tenant_id, 300);
    const ingest = await startTier(t, 'ingest', { INGEST_PROCESSES: '1', INGEST_RATE_LIMIT_PER_MIN: '1000000' });
    let proc: Tier = await startTier(t, 'processors', WRITER);
    const jsm = await jetstream(t);
    let kills = 0;
    let loading = true;
    // Kill the processor as soon as it has inserted rows of its own while the load runs (it is then
    // between fetches, inserts and acks), restarting it each time.
    const killer = (async () => {
      while (loading) {
        await waitFor(
          'the processor to insert',
          async () => !loading || (await metric(proc.url, 'writer_rows_inserted_total', { table: 'events' })) > 0,
          60_000,
          50,
        );
        if (!loading) break;
        await proc.stop('SIGKILL');
        kills++;
        proc = await startTier(t, 'processors', WRITER);
      }
    })();
    // At least 1,200 requests, and on until the fourth kill: a processor restart takes longer on a
    // busy machine than the requests do, so a fixed count could end before the kills.
    let answered = 0;
    const load = await runLoad({
      url: ingest.url,
      key: ws.ingestion_key,
      customers: 300,
      requests: 6000,
      concurrency: 4,
      pauseMs: 25,
      onProgress: (done) => {
        answered = done;
      },
      until: () => answered >= 1200 && kills >= 4,
    });
    loading = false;
    await killer;
    t.equal(load.failures, 0, 'ingest acknowledged every request');
    t.ok(kills >= 4, `processor killed ${kills} times during the load`);

    const count = async () =>
      Number((await ch<{ c: string }>(`SELECT count() AS c FROM events WHERE tenant_id = '${ws.tenant_id}'`))[0].c);
    await waitFor('all accepted events in ClickHouse', async () => (await count()) >= load.accepted, 90_000, 250);
    // A late duplicate (an insert finishing after its redelivery) would show up by then.
    await writersIdle(jsm, consumers.usageWriter, 'events');
    const [stats] = await ch<{ c: string; u: string; b: string }>(
      `SELECT count() AS c, uniqExact(event_id) AS u, uniqExact(batch_id) AS b FROM events WHERE tenant_id = '${ws.tenant_id}'`,
    );
    t.equal(Number(stats.c), load.accepted, 'row count equals the accepted count');
    t.equal(Number(stats.u), load.accepted, 'no event_id twice');
    t.equal(Number(stats.b), load.acknowledged.size, 'every acknowledged request is there');
    const { rollup, direct } = await rollupsAndDirect(ws.tenant_id);
    t.ok(direct.length > 0, `${direct.length} rollup rows to compare`);
    t.same(rollup, direct, 'the daily rollups equal a direct aggregation of the stored events');
  },
);
