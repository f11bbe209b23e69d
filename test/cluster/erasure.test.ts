import t from '#tap';
import { ClickHouse } from '../../processors/clickhouse.js';
import { client, startApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb, db, post, profile, seed, startTier, urls, waitFor } from '../helpers/stack.js';

/**
 * Erasure on the cluster profile (2 shards x 2 replicas): the mutations go to the storage tables
 * ON CLUSTER, so every replica of the customer's shard rewrites its own parts. Counted on each
 * server's own storage tables, not through the Distributed ones: no replica keeps a row of the
 * erased customer, and the other customer of the workspace keeps every row on every replica.
 */
if (profile.name !== 'cluster') {
  t.pass('cluster suite skipped: it runs against the cluster profile (npm run test:cluster)');
} else {
  t.teardown(closeDb);
  const all = new ClickHouse(urls.CLICKHOUSE_URL, 'csp', 30_000, profile.chCluster);
  t.teardown(() => all.close());
  const servers = all.endpoints.urls;

  /**
   * Rows of a customer in every storage table with a customer_id column, per server. A table whose
   * engine folds rows when it merges (the Summing and Aggregating rollups) is counted as merged
   * (FINAL): a background merge between two counts, which an erasure's mutation makes likely,
   * would otherwise show the other customer's 5 rollup rows as 3 (one run of the suite failed so).
   */
  async function rowsPerServer(tenantId: string, customerId: string): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const [i, url] of servers.entries()) {
      const tables = await all.rowsAt<{ table: string; engine: string }>(
        url,
        `SELECT c.table AS table, engine FROM system.columns AS c
         ANY INNER JOIN (SELECT name AS table, engine FROM system.tables WHERE database = 'csp_local' AND engine LIKE '%MergeTree')
         USING table WHERE c.database = 'csp_local' AND c.name = 'customer_id'`,
      );
      for (const { table, engine } of tables) {
        const final = /^(Replicated)?MergeTree$/.test(engine) ? '' : ' FINAL';
        const [r] = await all.rowsAt<{ n: string }>(
          url,
          `SELECT count() AS n FROM csp_local.\`${table}\`${final}
           WHERE tenant_id = toUUID('${tenantId}') AND customer_id = toUUID('${customerId}')`,
        );
        out[`clickhouse${i + 1}.${table}`] = Number(r.n);
      }
    }
    return out;
  }
  const nonZero = (r: Record<string, number>) => Object.entries(r).filter(([, n]) => n > 0);

  t.test('a permanent delete erases the customer from every replica of its shard, and only it', async (t) => {
    const ws = await bootstrap();
    await seed(ws.tenant_id, 2);
    const ids = await db()<Array<{ id: string; external_id: string }>>`
      SELECT id::text, external_id FROM customers WHERE tenant_id = ${ws.tenant_id} ORDER BY external_id`;
    const [target, other] = ids.map((r) => r.id);
    const api = await startApi(t);
    const ingest = await startTier(t, 'ingest', { INGEST_PROCESSES: '1' });
    await startTier(t, 'processors', { ERASURE_TENANTS: ws.tenant_id, ERASURE_POLL_MS: '100', WRITER_BATCH_MS: '50' });
    const N = 2000;
    for (const { external_id } of ids)
      for (let b = 0; b < N / 100; b++) {
        const events = Array.from({ length: 100 }, (_, i) => ({
          event_name: `feature_${i % 10}`,
          external_customer_id: external_id,
          timestamp: new Date(Date.now() - (b * 100 + i) * 60_000).toISOString(),
        }));
        const r = await post(`${ingest.url}/v1/ingest/events`, { events }, { 'x-api-key': ws.ingestion_key });
        t.equal(r.status, 202, `batch ${b} of ${external_id} accepted`, { diagnostic: r.status !== 202 });
      }
    // Landed: the customer's events on both replicas of its shard, and on each of them the daily
    // rollup holding every day of those events. The rollup's parts replicate on their own, so a count
    // taken when the first of them had come saw 2 days of 3 (a fresh-clone run).
    const days = async (id: string, server: number) => {
      const [x] = await all.rowsAt<{ days: string }>(
        servers[server],
        `SELECT uniqExact(toDate(ts)) AS days FROM csp_local.events
         WHERE tenant_id = toUUID('${ws.tenant_id}') AND customer_id = toUUID('${id}')`,
      );
      return Number(x.days);
    };
    const replicasHold = async (id: string) => {
      const r = await rowsPerServer(ws.tenant_id, id);
      const holding = Object.entries(r).filter(([k, n]) => k.endsWith('.events') && n === N);
      if (holding.length !== 2) return undefined;
      for (const [k] of holding) {
        const server = Number(k.slice('clickhouse'.length, k.indexOf('.'))) - 1;
        if (r[`clickhouse${server + 1}.usage_daily`] !== (await days(id, server))) return undefined;
      }
      return r;
    };
    await waitFor('both customers landed on both replicas of the shard', () => replicasHold(target), 120_000, 250);
    const otherBefore = await waitFor('the other customer landed', () => replicasHold(other), 120_000, 250);

    const c = client(api.url, ws.api_key);
    t.equal((await c.del(`/v1/customers/${target}?hard=true`)).status, 204, 'the delete answers 204');
    await waitFor(
      'the erasure completed',
      async () => (await c.get(`/v1/erasures/${target}`)).body?.status === 'completed',
      180_000,
      250,
    );
    t.same(nonZero(await rowsPerServer(ws.tenant_id, target)), [], 'no server keeps a row of the customer');
    t.same(await rowsPerServer(ws.tenant_id, other), otherBefore, 'the other customer keeps every row on every server');
    const done = await c.get(`/v1/erasures/${target}`);
    t.equal(done.body.rows_removed.clickhouse.tables.events, N, 'the record counts each event once, not per replica');
  });
}
