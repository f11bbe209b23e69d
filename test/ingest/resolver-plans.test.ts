import t from '#tap';
import { connectPg, type Sql } from '../../lib/pg.js';
import { Resolver } from '../../ingest/resolver.js';
import { readUuid } from '../../lib/row-binary.js';
import { bootstrap, urls } from '../helpers/stack.js';

// The ingest resolver's look-ups (ingest/resolver.ts) find each customer reference by its index,
// whatever PostgreSQL's statistics say about the workspace. A workspace that grew since the last
// ANALYZE (every new one, a freshly seeded one) is estimated at one customer; planned from that
// estimate, each look-up of a request's references read every customer of the workspace, and
// surface A on a fresh stack ran at a fifth of its speed with PostgreSQL the top process. Here a
// workspace of 20,000 customers the statistics do not know resolves 100 ids and 100 external ids,
// and the rows PostgreSQL read to do so are counted.
const sql = connectPg(urls.DATABASE_URL, 2);
t.teardown(() => sql.end({ timeout: 5 }));

const CUSTOMERS = 20_000;
const w = await bootstrap();
// Statistics taken before the workspace's customers exist, and kept so while the test runs; as
// in a large installation, an unknown workspace is estimated at a single customer.
await sql`ALTER TABLE customers SET (autovacuum_enabled = off)`;
await sql`ALTER TABLE customers ALTER COLUMN tenant_id SET (n_distinct = 10000000)`;
t.teardown(async () => {
  await sql`ALTER TABLE customers RESET (autovacuum_enabled)`;
  await sql`ALTER TABLE customers ALTER COLUMN tenant_id RESET (n_distinct)`;
  await sql`ANALYZE customers`;
});
await sql`ANALYZE customers`;
const rows = await sql<Array<{ id: string; external_id: string }>>`
  INSERT INTO customers (tenant_id, name, external_source, external_id)
  SELECT ${w.tenant_id}, 'Customer ' || g, 'internal', 'plan-' || g FROM generate_series(1, ${CUSTOMERS}) g
  RETURNING id::text, external_id`;

/** Rows of customers the current transaction read, by index or sequential scan. */
async function rowsRead(db: Sql): Promise<number> {
  const [r] = await db<{ n: string }[]>`
    SELECT coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) AS n
    FROM pg_stat_xact_user_tables WHERE relname = 'customers'`;
  return Number(r?.n ?? 0);
}

t.test('the planner takes the workspace for a far smaller one: the case under test', async (t) => {
  const [plan] = await sql<{ 'QUERY PLAN': Array<{ Plan: { 'Plan Rows': number } }> }[]>`
    EXPLAIN (FORMAT JSON) SELECT * FROM customers WHERE tenant_id = ${w.tenant_id} AND deleted_at IS NULL`;
  t.ok(plan['QUERY PLAN'][0].Plan['Plan Rows'] <= 2, `estimated ${plan['QUERY PLAN'][0].Plan['Plan Rows']} customers`);
});

t.test('100 ids and 100 external ids of a request read about one row each', async (t) => {
  const byId = rows.slice(0, 100);
  const byExt = rows.slice(5000, 5100);
  const missing = ['00000000-0000-7000-8000-000000000001'];
  await sql.begin(async (tx) => {
    const resolver = new Resolver(tx as unknown as Sql, { negativeTtlMs: 1000, maxEntriesPerTenant: 100_000 });
    const before = await rowsRead(tx as unknown as Sql);
    const view = await resolver.prepare(
      w.tenant_id,
      [...byId.map((r) => r.id), ...missing],
      [...byExt.map(() => 'internal'), 'internal'],
      [...byExt.map((r) => r.external_id), 'no-such-customer'],
    );
    const read = (await rowsRead(tx as unknown as Sql)) - before;
    // A customer is answered as its slot: the 16 bytes of its UUID as rows carry it.
    const customer = (slot: number) => (slot < 0 ? undefined : readUuid(view.wire, 16 * slot));
    t.same(
      [...view.ids].map(customer),
      [...byId.map((r) => r.id), undefined],
      'every id answered, the unknown one as unknown',
    );
    t.same([...view.external].map(customer), [...byExt.map((r) => r.id), undefined], 'every external id answered');
    t.ok(read <= 2 * 200, `${read} rows read for 200 references in a workspace of ${CUSTOMERS}`);
  });
});
