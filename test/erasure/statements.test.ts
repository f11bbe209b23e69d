import { randomUUID } from 'node:crypto';
import t from '#tap';
import { createLogger } from '../../lib/logger.js';
import { ClickHouse } from '../../processors/clickhouse.js';
import { ClickHouseErasure } from '../../processors/erasure/clickhouse.js';
import { ch, urls } from '../helpers/stack.js';

/**
 * Customers named in slices (test/unit/erasure-statements.test.ts checks the sizes): with two ids
 * per statement, five erased customers are counted over three statements per table and removed by
 * three mutations, and the workspace's other customer keeps its rows. On health_history, small
 * beside csp.events, so the mutations take little time.
 */
t.test('five customers counted and erased two at a time', async (t) => {
  const tenant = randomUUID();
  const erased = Array.from({ length: 5 }, () => randomUUID());
  const kept = randomUUID();
  const rows = [...erased, kept]
    .flatMap((customer_id, i) =>
      Array.from({ length: i + 1 }, (_, d) =>
        JSON.stringify({
          tenant_id: tenant,
          customer_id,
          day: new Date(Date.now() - d * 86_400_000).toISOString().slice(0, 10),
          score: 50,
          status: 'neutral',
          calculated_at: new Date().toISOString().slice(0, 19).replace('T', ' '),
        }),
      ),
    )
    .join('\n');
  const q = encodeURIComponent('INSERT INTO csp.health_history FORMAT JSONEachRow');
  const res = await fetch(`${urls.CLICKHOUSE_URL.split(',')[0]}/?query=${q}`, { method: 'POST', body: rows });
  t.ok(res.ok, await res.text());

  const client = new ClickHouse(urls.CLICKHOUSE_URL, 'csp', 30_000);
  t.teardown(() => client.close());
  const chx = new ClickHouseErasure(client, createLogger('test', 'silent'), 50, 2);
  const tables = ['health_history'];
  const counted = await chx.count(tables, tenant, erased);
  t.same(
    Object.fromEntries(counted.get('health_history') ?? []),
    Object.fromEntries(erased.map((id, i) => [id, i + 1])),
    'every customer counted, across the three slices',
  );

  await chx.mutate('health_history', tenant, erased);
  await chx.settle(tables, tenant, () => false);
  const [m] = await ch<{ n: string }>(
    `SELECT count() AS n FROM system.mutations
     WHERE database = 'csp' AND table = 'health_history' AND position(command, '${tenant}') > 0`,
  );
  t.equal(Number(m.n), 3, 'three mutations');
  t.same((await chx.count(tables, tenant, erased)).size, 0, 'no row of the erased customers left');
  t.same(
    Object.fromEntries((await chx.count(tables, tenant, [kept])).get('health_history') ?? []),
    { [kept]: 6 },
    'the other customer keeps its rows',
  );
});
