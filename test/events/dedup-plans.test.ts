import t from '#tap';
import { randomUUID } from 'node:crypto';
import { connectPg } from '../../lib/pg.js';
import { DedupKeys, type KeySet } from '../../ingest/surface-b/dedup.js';
import { urls } from '../helpers/stack.js';

// Surface B's deduplication statements (ingest/surface-b/dedup.ts) find each key by the whole key,
// whatever PostgreSQL's statistics say about the workspace. A workspace that grew since the last
// ANALYZE (every new one) is estimated at one key; planned from that estimate, the statements
// read every key of the workspace, each time: surface B fell from 68k to 10k events/s once each
// workspace held 300k keys. Here a workspace of 100,000 keys the statistics do not know claims,
// takes over and releases 1000 keys, and the rows PostgreSQL read to do so are counted.
const sql = connectPg(urls.DATABASE_URL, 2);
t.teardown(() => sql.end({ timeout: 5 }));

const WORKSPACE_KEYS = 100_000;
const tenantId = randomUUID();
// Statistics taken before the workspace exists, and kept so while the test runs.
await sql`ALTER TABLE event_dedup SET (autovacuum_enabled = off)`;
t.teardown(async () => {
  await sql`ALTER TABLE event_dedup RESET (autovacuum_enabled)`;
  await sql`DELETE FROM event_dedup WHERE tenant_id = ${tenantId}`;
});
await sql`ANALYZE event_dedup`;
await sql`
  INSERT INTO event_dedup (tenant_id, customer_id, external_id)
  SELECT ${tenantId}, gen_random_uuid(), 'ext-' || g FROM generate_series(1, ${WORKSPACE_KEYS}) g`;

/** Rows of event_dedup the current transaction read, by index or sequential scan. */
async function rowsRead(db: typeof sql): Promise<number> {
  const [r] = await db<{ n: string }[]>`
    SELECT coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) AS n FROM pg_stat_xact_user_tables WHERE relname = 'event_dedup'`;
  return Number(r?.n ?? 0);
}

t.test('the planner takes the workspace for a far smaller one: the case under test', async (t) => {
  const [plan] = await sql<{ 'QUERY PLAN': Array<{ Plan: { 'Plan Rows': number } }> }[]>`
    EXPLAIN (FORMAT JSON) SELECT * FROM event_dedup WHERE tenant_id = ${tenantId}`;
  t.ok(
    plan['QUERY PLAN'][0].Plan['Plan Rows'] < WORKSPACE_KEYS / 10,
    `estimated ${plan['QUERY PLAN'][0].Plan['Plan Rows']} keys`,
  );
});

t.test('claiming, taking over and releasing 1000 keys reads about one row per key', async (t) => {
  // 300 keys stored, 200 held by a request that died (its reservation expired), 500 new.
  const stored = await sql<{ c: string; e: string }[]>`
    SELECT customer_id::text AS c, external_id AS e FROM event_dedup
    WHERE tenant_id = ${tenantId} AND external_id = ANY(${Array.from({ length: 500 }, (_, i) => `ext-${i + 1}`)})
    ORDER BY external_id`;
  const dead = randomUUID();
  const orphaned = stored.slice(300);
  await sql`
    UPDATE event_dedup SET batch_id = ${dead}
    WHERE tenant_id = ${tenantId} AND external_id = ANY(${orphaned.map((k) => k.e)})`;
  await sql`INSERT INTO event_dedup_pending (batch_id, tenant_id, expires_at) VALUES (${dead}, ${tenantId}, now() - interval '1 minute')`;
  t.teardown(() => sql`DELETE FROM event_dedup_pending WHERE batch_id = ${dead}`);
  const fresh = Array.from({ length: 500 }, () => ({ c: randomUUID(), e: `new-${randomUUID()}` }));
  const keys = [...stored, ...fresh];
  const s: KeySet = {
    tenantId,
    batchId: randomUUID(),
    customers: keys.map((k) => k.c),
    externals: keys.map((k) => k.e),
  };

  await sql.begin(async (db) => {
    const dedup = new DedupKeys(db as unknown as typeof sql, { reservationMs: 30_000, maxWaitMs: 2_000 });
    const before = await rowsRead(db as unknown as typeof sql);
    const mine = await dedup.claim(db as unknown as typeof sql, s, false);
    const claimed = (await rowsRead(db as unknown as typeof sql)) - before;
    t.same([...mine.slice(0, 300)].filter((x) => x === 1).length, 0, 'the stored keys are not this request’s to store');
    t.same([...mine.slice(300)].filter((x) => x === 1).length, 700, 'the orphaned and the new keys are');
    t.ok(
      claimed < 10 * keys.length,
      `the claim read ${claimed} rows for ${keys.length} keys in a workspace of ${WORKSPACE_KEYS}`,
    );

    await dedup.release(s, mine);
    const released = (await rowsRead(db as unknown as typeof sql)) - before - claimed;
    t.ok(released < 10 * keys.length, `the release read ${released} rows`);
    const [left] = await db<{ n: number }[]>`
      SELECT count(*)::int AS n FROM event_dedup WHERE tenant_id = ${tenantId} AND batch_id = ${s.batchId}`;
    t.equal(left.n, 0, 'the release removed every key the request owned');
    const [kept] = await db<{ n: number }[]>`SELECT count(*)::int AS n FROM event_dedup WHERE tenant_id = ${tenantId}`;
    t.equal(kept.n, WORKSPACE_KEYS - 200, 'and only those: the taken-over keys went with it, the stored ones stayed');
  });
});
