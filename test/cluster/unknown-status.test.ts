import { execFileSync } from 'node:child_process';
import { connect, type JsMsg } from 'nats';
import t, { type Test } from '#tap';
import { service, ZOOKEEPER_JAR } from '../../infra/services.js';
import { createLogger } from '../../lib/logger.js';
import { natsServers, STREAM_EVENTS, subjects } from '../../lib/nats.js';
import { FORMAT_HEADER, formatOf } from '../../lib/row-binary.js';
import { ClickHouse } from '../../processors/clickhouse.js';
import { body } from '../../processors/writer/payload.js';
import { Reconciler } from '../../processors/writer/reconcile.js';
import { restartReplica } from '../../processors/writer/unregistered-parts.js';
import { stackUp } from '../chaos/harness.js';
import { bootstrap, post, profile, seed, startTier, urls, waitFor } from '../helpers/stack.js';

/**
 * An insert whose commit lost ZooKeeper (code 319, "unknown status") leaves its part visible on
 * the replica that wrote it. When the commit never reached ZooKeeper, ClickHouse 18.16 drops that
 * part at some later time (its five-minute check only runs when something wakes it): a count that
 * saw the rows in between would acknowledge a batch that then vanishes.
 *
 * The state is made exactly: a request's rows are inserted on one replica while its peer fetches
 * nothing, and the part's node is removed from ZooKeeper, as if the commit had been lost. The
 * writer's retry of that batch (a thorough reconcile) must then find it not stored, having had the
 * part detached, and its insert must leave each replica with the rows exactly once.
 */
if (profile.name !== 'cluster') {
  t.pass('cluster suite skipped: it runs against the cluster profile (npm run test:cluster)');
} else {
  // The writer's own client: one server at a time through rowsAt/commandAt, inserts to the first.
  const all = new ClickHouse(urls.CLICKHOUSE_URL, 'csp', 30_000, profile.chCluster);
  t.teardown(() => all.close());
  const servers = all.endpoints.urls;
  const at = <T>(url: string, query: string) => all.rowsAt<T>(url, query);
  const run = (url: string, query: string) => all.commandAt(url, query);
  /** 1 when the server has csp_local.events attached, 0 when not. */
  const eventsTables = async (url: string) => {
    const [r] = await at<{ c: string }>(
      url,
      `SELECT count() AS c FROM system.tables WHERE database = 'csp_local' AND name = 'events'`,
    );
    return Number(r.c);
  };
  const zkDelete = (path: string) =>
    execFileSync(
      'java',
      [
        '-cp',
        ZOOKEEPER_JAR,
        'org.apache.zookeeper.ZooKeeperMain',
        '-server',
        `127.0.0.1:${profile.zookeeperPort}`,
        'deleteall',
        path,
      ],
      { stdio: 'ignore' },
    );

  const scenario = async (t: Test) => {
    const ws = await bootstrap();
    await seed(ws.tenant_id, 3);
    const nc = await connect({ servers: natsServers(urls.NATS_URL) });
    t.teardown(() => nc.close());
    const ingest = await startTier(t, 'ingest', { INGEST_PROCESSES: '1' });
    const send = async (n: number) => {
      const events = Array.from({ length: n }, (_, i) => ({
        event_name: 'login',
        external_customer_id: `cust-00000${(i % 3) + 1}`,
        timestamp: new Date(Date.now() - i * 1000).toISOString(),
        properties: { i },
      }));
      const res = await post(`${ingest.url}/v1/ingest/events`, { events }, { 'x-api-key': ws.ingestion_key });
      t.equal(res.status, 202, `a request of ${n} events accepted`);
    };
    // An earlier, registered request of the workspace: the lost part stays a small share of the
    // replica (a table whose unknown parts hold most of its rows refuses to restart).
    for (let i = 0; i < 4; i++) await send(100);
    await send(10);
    await ingest.stop();

    const js = nc.jetstream();
    const consumer = await js.consumers.get(STREAM_EVENTS, { filterSubjects: subjects.usage(ws.tenant_id) });
    const messages: JsMsg[] = [];
    for (let i = 0; i < 5; i++) messages.push((await consumer.next({ expires: 5000 }))!);
    const lost = messages.pop()!;
    t.equal(Number(lost.headers!.get('Cs-Rows')), 10, 'the second request is the batch of 10');
    const format = formatOf(lost.headers!.get(FORMAT_HEADER))!;
    const batch = lost.headers!.get('Nats-Msg-Id').toLowerCase();

    // The workspace's shard: where the first request lands, on both replicas.
    await all.insert('events', body(messages, format), `probe-filler-${batch}`, format);
    const counts = async (where: string) =>
      Promise.all(
        servers.map(async (u) => {
          const [r] = await at<{ c: string }>(u, `SELECT count() AS c FROM csp_local.events WHERE ${where}`);
          return Number(r.c);
        }),
      );
    const shard = await waitFor(
      'the first request on both replicas of its shard',
      async () => {
        const c = await counts(`tenant_id = '${ws.tenant_id}'`);
        const holders = servers.filter((_, i) => c[i] === 400);
        return holders.length === 2 && holders;
      },
      30_000,
      200,
    );
    const [writer, peer] = shard;
    await run(peer, 'SYSTEM STOP FETCHES csp_local.events');
    t.teardown(() => run(peer, 'SYSTEM START FETCHES csp_local.events'));

    // The batch's rows on one replica only, then its part forgotten by ZooKeeper.
    const direct = new ClickHouse(writer, 'csp_local', 30_000);
    t.teardown(() => direct.close());
    await run(writer, 'SYSTEM STOP MERGES csp_local.events');
    t.teardown(() => run(writer, 'SYSTEM START MERGES csp_local.events'));
    await direct.insert('events', body([lost], format), `probe-lost-${batch}`, format);
    const [{ part }] = await at<{ part: string }>(
      writer,
      // Not moved to PREWHERE: 18.16 segfaults on a virtual column read beside a PREWHERE.
      `SELECT DISTINCT _part AS part FROM csp_local.events WHERE batch_id = '${batch}' SETTINGS optimize_move_to_prewhere = 0`,
    );
    const [{ path }] = await at<{ path: string }>(
      writer,
      `SELECT replica_path AS path FROM system.replicas WHERE database = 'csp_local' AND table = 'events'`,
    );
    zkDelete(`${path}/parts/${part}`);
    const byBatch = `batch_id = '${batch}'`;
    const before = await counts(byBatch);
    t.same(
      [before[servers.indexOf(writer)], before[servers.indexOf(peer)]],
      [10, 0],
      'before: the rows are visible on the replica that wrote them, and only there',
    );

    const ledger = async () => {
      const [r] = await at<{ n: string }>(
        writer,
        `SELECT sum(rows) AS n FROM csp_local.batch_ledger WHERE batch_id = '${batch}' AND tbl = 'events'`,
      );
      return Number(r?.n ?? 0);
    };
    // The emulated insert fed the views (a real commit of unknown status stops before them).
    const ledgerBefore = await ledger();
    const reconciler = new Reconciler('events', {
      ch: all,
      log: createLogger('test', 'silent'),
      running: new Set(),
    });
    const v = await reconciler.classify([lost], true);
    t.equal(v.stored.length, 0, 'the retry does not call the batch stored');
    t.equal(v.insert.length, 1, 'the retry inserts the batch');
    const [active] = await at<{ c: string }>(
      writer,
      `SELECT count() AS c FROM system.parts WHERE database = 'csp_local' AND table = 'events' AND name = '${part}' AND active`,
    );
    t.equal(Number(active.c), 0, `the unregistered part ${part} is no longer active on its replica`);
    const [{ c: gone }] = await at<{ c: string }>(writer, `SELECT count() AS c FROM csp_local.events WHERE ${byBatch}`);
    t.equal(Number(gone), 0, 'its rows are no longer visible');

    await all.insert('events', body(v.insert, format), `probe-retry-${batch}`, format);
    await run(peer, 'SYSTEM START FETCHES csp_local.events');
    await waitFor(
      'the retried batch on both replicas',
      async () => (await counts(byBatch)).filter((c) => c > 0).length === 2,
      30_000,
      200,
    );
    await waitFor('the retry in the batch ledger', async () => (await ledger()) === ledgerBefore + 10, 30_000, 200);
    t.pass('the restarted replica still feeds its materialized views: the ledger counts the retry');
    for (const u of shard) {
      const [r] = await at<{ c: string; u: string }>(
        u,
        `SELECT count() AS c, uniqExact(event_id) AS u FROM csp_local.events WHERE ${byBatch}`,
      );
      t.same([Number(r.c), Number(r.u)], [10, 10], `${u}: the batch's 10 rows, each once`);
    }
    const again = await reconciler.classify([lost], true);
    t.equal(again.stored.length, 1, 'a later retry finds the batch stored');
  };

  t.test('a part ZooKeeper never registered is detached before a retry counts its batch', async (t) => {
    try {
      await scenario(t);
    } catch (err) {
      // A server that died (18.16 segfaulted here while the test read `_part` through a PREWHERE)
      // is started again for the files after this one; the test fails all the same.
      const down = await Promise.all(
        servers.map((u) =>
          at(u, 'SELECT 1').then(
            () => false,
            () => true,
          ),
        ),
      );
      if (down.some(Boolean)) await stackUp();
      throw err;
    }
  });

  // The restart above, had ZooKeeper gone away just before it: 18.16 detaches the table and fails
  // to build it again, and the server then has no such table (reads and inserts through it fail,
  // and `infra:up`'s CREATE … ON CLUSTER refuses its data folder).
  t.test('a replica restarted while ZooKeeper is away has its table back once ZooKeeper is', async (t) => {
    const url = servers[0];
    t.teardown(() => stackUp());
    const attached = () => eventsTables(url);
    const rows = async () => Number((await at<{ c: string }>(url, 'SELECT count() AS c FROM csp_local.events'))[0].c);
    const before = await rows();
    const zookeeper = service(profile, 'zookeeper');
    await zookeeper.stop(profile);
    let done = false;
    const restarted = restartReplica(all, url, 'events', createLogger('test', 'silent')).finally(() => {
      done = true;
    });
    await waitFor('the restart to leave the table detached', async () => (await attached()) === 0, 10_000, 50);
    await new Promise((r) => setTimeout(r, 2000));
    t.notOk(done, 'while ZooKeeper is away, the restart waits with the table detached');
    await zookeeper.start(profile);
    await waitFor('the restart to end', () => done, 30_000, 100);
    await restarted;
    t.equal(await attached(), 1, 'the table is attached again');
    t.equal(await rows(), before, 'with every row it held');
    await waitFor(
      'the replica writable again',
      async () => {
        const [r] = await at<{ ro: string }>(
          url,
          `SELECT is_readonly AS ro FROM system.replicas WHERE database = 'csp_local' AND table = 'events'`,
        );
        return r !== undefined && Number(r.ro) === 0;
      },
      30_000,
      200,
    );
    t.pass('the replica is writable again');
  });

  t.test('infra:up attaches a table a server holds detached', async (t) => {
    const url = servers[1];
    t.teardown(() => run(url, 'ATTACH TABLE csp_local.events').catch(() => {}));
    const attached = () => eventsTables(url);
    await run(url, 'DETACH TABLE csp_local.events');
    t.equal(await attached(), 0, 'detached');
    await t.resolves(stackUp(), 'infra:up succeeds');
    t.equal(await attached(), 1, 'the table is attached again');
  });
}
