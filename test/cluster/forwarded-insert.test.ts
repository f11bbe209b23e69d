import { randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import { connect } from 'nats';
import t from '#tap';
import { createLogger } from '../../lib/logger.js';
import { natsServers, STREAM_EVENTS, subjects } from '../../lib/nats.js';
import { FORMAT_HEADER, formatOf, insertColumns } from '../../lib/row-binary.js';
import { clickhouseUrl } from '../../infra/stack.js';
import { ClickHouse } from '../../processors/clickhouse.js';
import { body } from '../../processors/writer/payload.js';
import { Reconciler } from '../../processors/writer/reconcile.js';
import { bootstrap, post, profile, seed, startTier, urls, waitFor } from '../helpers/stack.js';

/**
 * The writer inserts into the Distributed table `csp.events` on its first reachable server, which
 * sends each shard's rows on as an insert of its own into `csp_local.events` on a replica of that
 * shard (ClickHouse 18.16 gives it a query id of its own, naming no writer). When that first server
 * is killed after it sent the rows, the shard's insert goes on, and the writer's retry (a thorough
 * reconcile through the next server) must wait for it: a count taken before it commits finds
 * nothing and inserts the batch again, stored twice (seen once in the fault suite: 9 requests).
 *
 * The state is made exactly: the batch's rows are sent as such an insert (the native protocol, by
 * clickhouse-client) to the second replica of the workspace's shard, and half of them are held back
 * while the retry checks. The
 * count then reads the shard's first replica, which must also have fetched the part first.
 */
if (profile.name !== 'cluster') {
  t.pass('cluster suite skipped: it runs against the cluster profile (npm run test:cluster)');
} else {
  t.test("a shard's insert left running by a killed server is waited for before a retry counts", async (t) => {
    const all = new ClickHouse(urls.CLICKHOUSE_URL, 'csp', 30_000, profile.chCluster);
    t.teardown(() => all.close());
    const ws = await bootstrap();
    await seed(ws.tenant_id, 3);
    const nc = await connect({ servers: natsServers(urls.NATS_URL) });
    t.teardown(() => nc.close());
    const ingest = await startTier(t, 'ingest', { INGEST_PROCESSES: '1' });
    const events = Array.from({ length: 10 }, (_, i) => ({
      event_name: 'login',
      external_customer_id: `cust-00000${(i % 3) + 1}`,
      properties: { i },
    }));
    const res = await post(`${ingest.url}/v1/ingest/events`, { events }, { 'x-api-key': ws.ingestion_key });
    t.equal(res.status, 202, 'a request of 10 events accepted');
    await ingest.stop();
    const consumer = await nc
      .jetstream()
      .consumers.get(STREAM_EVENTS, { filterSubjects: subjects.usage(ws.tenant_id) });
    const m = (await consumer.next({ expires: 5000 }))!;
    const format = formatOf(m.headers!.get(FORMAT_HEADER));
    if (!format || format === 'JSONEachRow') throw new Error(`the ingest tier wrote rows as ${format}`);
    const batch = m.headers!.get('Nats-Msg-Id').toLowerCase();

    // The workspace's shard (the Distributed table's sharding key) and that shard's second replica.
    const [{ s }] = await all.rows<{ s: string }>(`SELECT cityHash64(toString(toUUID('${ws.tenant_id}'))) % 2 AS s`);
    const shard = profile.clickhouse.filter((n) => n.shard === `0${Number(s) + 1}`);
    const second = shard.find((n) => n.replica === 'r2');
    if (shard.length !== 2 || !second) throw new Error(`shard ${Number(s) + 1} is not two replicas`);

    // The shard's insert as a server sends it (the native protocol), its rows held back half-way.
    const rows = Buffer.concat(body([m], format));
    const queryId = randomUUID();
    const insert = spawn(
      'clickhouse-client',
      [
        `--port=${second.tcpPort}`,
        `--query_id=${queryId}`,
        `--query=INSERT INTO csp_local.events ${insertColumns(format, 'events')} FORMAT RowBinary`,
      ],
      { stdio: ['pipe', 'ignore', 'inherit'] },
    );
    const exited = new Promise<number | null>((resolve) => insert.on('exit', resolve));
    insert.stdin.write(rows.subarray(0, rows.length >> 1));
    await waitFor(
      `the shard insert running on ${second.name}`,
      async () =>
        (await all.rowsAt(clickhouseUrl(second), `SELECT 1 FROM system.processes WHERE query_id = '${queryId}'`))
          .length > 0,
      10_000,
      50,
    );

    const reconciler = new Reconciler('events', { ch: all, log: createLogger('test', 'silent'), running: new Set() });
    let decidedAt = 0;
    const verdict = reconciler.classify([m], true).then((v) => {
      decidedAt = Date.now();
      return v;
    });
    await new Promise((r) => setTimeout(r, 1500));
    t.equal(decidedAt, 0, 'the retry has not decided while the shard insert runs');
    insert.stdin.end(rows.subarray(rows.length >> 1));
    t.equal(await exited, 0, 'the shard insert completes');
    const endedAt = Date.now();
    const v = await verdict;
    t.same(
      [v.stored.length, v.insert.length],
      [1, 0],
      `the retry, decided ${decidedAt - endedAt} ms after the insert ended, finds the batch stored`,
    );
    for (const n of shard)
      await waitFor(
        `the batch on ${n.name}`,
        async () => {
          const [r] = await all.rowsAt<{ c: string }>(
            clickhouseUrl(n),
            `SELECT count() AS c FROM csp_local.events WHERE batch_id = '${batch}'`,
          );
          return Number(r.c) === 10;
        },
        30_000,
        200,
      );
    t.pass('each replica of the shard holds the 10 rows once');
  });
}
