import fs from 'node:fs';
import { createHash, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { stackProfile, stackUrls } from '../infra/stack.js';

/**
 * What surface B's deduplication keys cost PostgreSQL when they are claimed in batches, off the
 * request path (issue 34): a consumer claims the keys of many requests at once with one statement,
 * and the rows it inserted are the events to store; a key another batch holds is a duplicate.
 *
 * A table of event_dedup's shape (its primary key order, the owner's batch id) is filled with
 * `--keys` keys in statements of `--batch`, `--dup` of each batch's keys already claimed by an
 * earlier batch. Figures: PostgreSQL backend CPU per key (read from /proc: the stack runs here),
 * WAL bytes per key, and the table's bytes per key with the size that gives for 1 billion keys.
 * `--ids seq` external ids that grow (sequence numbers, time-ordered ids), `--ids random` UUIDs.
 * `--shape text` stores the key as event_dedup does (customer_id, external_id); `--shape hash` stores
 * a 128-bit hash of the two (MD5, computed by the client) as a uuid: fixed-width and shorter rows.
 *
 *   node dist/bench/dedup-claims.js --profile test --keys 2000000 --batch 10000 --ids seq
 */

const { values: o } = parseArgs({
  options: {
    profile: { type: 'string', default: 'test' },
    keys: { type: 'string', default: '2000000' },
    batch: { type: 'string', default: '10000' },
    dup: { type: 'string', default: '0.1' },
    ids: { type: 'string', default: 'seq' },
    customers: { type: 'string', default: '5000' },
    shape: { type: 'string', default: 'text' },
  },
});
const KEYS = Number(o.keys);
const BATCH = Number(o.batch);
const DUP = Number(o.dup);
const TABLE = 'bench_dedup_claims';

const sql = postgres(stackUrls(stackProfile(o.profile!)).DATABASE_URL, { max: 1, onnotice: () => {} });
const cpuTicks = (pid: number) => {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
  const r = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return Number(r[11]) + Number(r[12]);
};

try {
  await sql.unsafe(`DROP TABLE IF EXISTS ${TABLE}`);
  await sql.unsafe(
    o.shape === 'hash'
      ? `CREATE TABLE ${TABLE} (tenant_id uuid NOT NULL, key uuid NOT NULL, batch_id uuid, PRIMARY KEY (tenant_id, key))`
      : `CREATE TABLE ${TABLE} (
          tenant_id uuid NOT NULL, customer_id uuid NOT NULL, external_id text NOT NULL, batch_id uuid,
          PRIMARY KEY (tenant_id, external_id, customer_id))`,
  );
  const hashKey = (e: string, c: string) => {
    const h = createHash('md5').update(c).update('\0').update(e).digest('hex');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  };
  const [{ pid }] = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
  const tenant = randomUUID();
  const customers = Array.from({ length: Number(o.customers) }, () => randomUUID());
  const claimed: Array<[string, string]> = [];
  let next = 0;
  const newKey = (): [string, string] => {
    const id = o.ids === 'random' ? randomUUID() : `evt-${String(next++).padStart(12, '0')}`;
    return [id, customers[Math.floor(Math.random() * customers.length)]];
  };
  const [{ lsn: lsn0 }] = await sql<{ lsn: string }[]>`SELECT pg_current_wal_lsn()::text AS lsn`;
  const t0 = cpuTicks(pid);
  const w0 = performance.now();
  let fresh = 0;
  let sent = 0;
  while (sent < KEYS) {
    const n = Math.min(BATCH, KEYS - sent);
    const ids: string[] = [];
    const cust: string[] = [];
    for (let i = 0; i < n; i++) {
      const k =
        claimed.length > 0 && Math.random() < DUP ? claimed[Math.floor(Math.random() * claimed.length)] : newKey();
      ids.push(k[0]);
      cust.push(k[1]);
    }
    const batchId = randomUUID();
    let inserted: Array<[string, string]>;
    if (o.shape === 'hash') {
      const byHash = new Map(ids.map((e, i) => [hashKey(e, cust[i]), [e, cust[i]] as [string, string]]));
      const rows = await sql<{ key: string }[]>`
        INSERT INTO ${sql(TABLE)} (tenant_id, key, batch_id)
        SELECT ${tenant}, k, ${batchId} FROM unnest(${[...byHash.keys()]}::uuid[]) AS k
        ON CONFLICT DO NOTHING RETURNING key`;
      inserted = rows.map((r) => byHash.get(r.key)!);
    } else {
      const rows = await sql<{ external_id: string; customer_id: string }[]>`
        INSERT INTO ${sql(TABLE)} (tenant_id, external_id, customer_id, batch_id)
        SELECT ${tenant}, e, c, ${batchId} FROM unnest(${ids}::text[], ${cust}::uuid[]) AS k(e, c)
        ON CONFLICT DO NOTHING RETURNING external_id, customer_id`;
      inserted = rows.map((r) => [r.external_id, r.customer_id]);
    }
    fresh += inserted.length;
    // Only a sample of claimed keys is kept for duplicates: enough to draw from, bounded memory.
    for (let i = 0; i < inserted.length; i += 10) claimed.push(inserted[i]);
    if (claimed.length > 200_000) claimed.splice(0, claimed.length - 200_000);
    sent += n;
  }
  const wallMs = performance.now() - w0;
  const cpuS = (cpuTicks(pid) - t0) / 100;
  const [{ wal }] = await sql<
    { wal: string }[]
  >`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), ${lsn0}::pg_lsn)::text AS wal`;
  await sql.unsafe(`VACUUM ANALYZE ${TABLE}`);
  const [{ bytes, rows }] = await sql<{ bytes: string; rows: string }[]>`
    SELECT pg_total_relation_size(${TABLE})::text AS bytes, (SELECT count(*) FROM ${sql(TABLE)})::text AS rows`;
  const perKey = Number(bytes) / Number(rows);
  console.log(
    JSON.stringify({
      keys: sent,
      fresh,
      batch: BATCH,
      ids: o.ids,
      shape: o.shape,
      pgCpuUsPerKey: Math.round(((cpuS * 1e6) / sent) * 100) / 100,
      pgCpuUsPerStoredKey: Math.round(((cpuS * 1e6) / fresh) * 100) / 100,
      keysPerSec: Math.round(sent / (wallMs / 1000)),
      walBytesPerKey: Math.round(Number(wal) / sent),
      bytesPerKey: Math.round(perKey),
      gbFor1BillionKeys: Math.round((perKey * 1e9) / 1e9),
    }),
  );
} finally {
  await sql.unsafe(`DROP TABLE IF EXISTS ${TABLE}`).catch(() => {});
  await sql.end();
}
