import fs from 'node:fs';
import path from 'node:path';
import { connect } from 'nats';
import postgres from 'postgres';
import { clickhouseUrl, ROOT, stackUrls, type StackProfile } from './stack.js';
import { migrate } from '../lib/migrate.js';
import { natsServers } from '../lib/nats.js';
import { applyStreams } from './streams.js';
import { InfraError } from './proc.js';

type Say = (line: string) => void;

/** The statements of infra/clickhouse/schema.sql, comments dropped, in order. */
export function clickhouseStatements(): string[] {
  return fs
    .readFileSync(path.join(ROOT, 'infra/clickhouse/schema.sql'), 'utf8')
    .split('\n')
    .filter((l) => !l.trim().startsWith('--'))
    .join('\n')
    .split(/;\s*(?:\n|$)/)
    .map((s) => s.trim())
    .filter(Boolean);
}

const DB = 'csp';
/** Where a cluster's storage tables live: csp holds the Distributed tables of the same names over them. */
export const LOCAL_DB = `${DB}_local`;

/** A MergeTree table of schema.sql: its database, name, columns, engine, engine arguments and the rest. */
const MERGE_TREE_TABLE =
  /^CREATE TABLE IF NOT EXISTS (\w+)\.(\w+)\s*(\([\s\S]*?\n\))\s*ENGINE = (\w*MergeTree)\(([^)]*)\)([\s\S]*)$/i;

/**
 * The DDL of a replicated, sharded ClickHouse, derived statement by statement from schema.sql's
 * single-server DDL, so the two cannot drift apart:
 * - a table becomes csp_local.<name>, its engine the Replicated variant (the part log in ZooKeeper
 *   under /clickhouse/tables/{shard}/csp/<name>, one replica per {replica} macro), plus
 *   csp.<name>, a Distributed table over it sharded by cityHash64(toString(tenant_id)): a
 *   workspace's rows stay on one shard, so per-workspace queries, the rollups fed by views, and the
 *   writer's exactly-once reconcile stay on one shard;
 * - materialized views move to csp_local (they run on each shard's own inserts);
 * - a view over a system table becomes a Distributed table over that table on every server
 *   (the cluster `<cluster>_nodes`, one shard per server);
 * - every statement runs ON CLUSTER (applyToCluster sends ALTERs to one server per shard instead);
 * - the Distributed tables come last, once their storage tables have every column (18.16 cannot
 *   ALTER a Distributed table ON CLUSTER over replicated shards: applyClickhouse recreates one
 *   whose columns no longer match).
 * A table without tenant_id (batch_ledger) is filled only by views on each shard; its Distributed
 * table only reads, and shards by rand().
 */
export function clusterStatements(statements: string[], cluster: string): string[] {
  const on = `ON CLUSTER ${cluster}`;
  const local = (sql: string) => sql.replace(new RegExp(`\\b${DB}\\.`, 'g'), `${LOCAL_DB}.`);
  const out: string[] = [];
  const distributed: string[] = [];
  for (const stmt of statements) {
    let m: RegExpExecArray | null;
    if ((m = new RegExp(`^CREATE DATABASE IF NOT EXISTS ${DB}$`, 'i').exec(stmt))) {
      out.push(`CREATE DATABASE IF NOT EXISTS ${DB} ${on}`, `CREATE DATABASE IF NOT EXISTS ${LOCAL_DB} ${on}`);
    } else if ((m = /^CREATE VIEW IF NOT EXISTS (\w+)\.(\w+) AS SELECT \* FROM system\.(\w+)$/i.exec(stmt))) {
      const [, db, name, table] = m;
      out.push(
        `CREATE TABLE IF NOT EXISTS ${db}.${name} ${on} AS system.${table} ` +
          `ENGINE = Distributed(${cluster}_nodes, system, ${table})`,
      );
    } else if ((m = MERGE_TREE_TABLE.exec(stmt))) {
      const [, db, name, columns, engine, args, rest] = m;
      const zkPath = `'/clickhouse/tables/{shard}/${db}/${name}', '{replica}'`;
      out.push(
        `CREATE TABLE IF NOT EXISTS ${LOCAL_DB}.${name} ${on} ${columns} ` +
          `ENGINE = Replicated${engine}(${[zkPath, args.trim()].filter(Boolean).join(', ')})${rest}`,
      );
      const shardBy = /^\s*tenant_id\s/m.test(columns) ? 'cityHash64(toString(tenant_id))' : 'rand()';
      distributed.push(
        `CREATE TABLE IF NOT EXISTS ${db}.${name} ${on} AS ${LOCAL_DB}.${name} ` +
          `ENGINE = Distributed(${cluster}, ${LOCAL_DB}, ${name}, ${shardBy})`,
      );
    } else if ((m = /^ALTER TABLE (\w+)\.(\w+) (ADD COLUMN [\s\S]*)$/i.exec(stmt))) {
      out.push(`ALTER TABLE ${LOCAL_DB}.${m[2]} ${on} ${m[3]}`);
    } else if ((m = /^CREATE MATERIALIZED VIEW IF NOT EXISTS (\w+)\.(\w+) ([\s\S]*)$/i.exec(stmt))) {
      out.push(`CREATE MATERIALIZED VIEW IF NOT EXISTS ${LOCAL_DB}.${m[2]} ${on} ${local(m[3])}`);
    } else if ((m = /^DROP TABLE IF EXISTS (\w+)\.(\w+)$/i.exec(stmt))) {
      out.push(`DROP TABLE IF EXISTS ${LOCAL_DB}.${m[2]} ${on}`);
    } else {
      throw new Error(`infra/clickhouse/schema.sql: no cluster form for the statement\n${stmt.slice(0, 200)}`);
    }
  }
  return [...out, ...distributed];
}

const DISTRIBUTED = /^CREATE TABLE IF NOT EXISTS (\w+)\.(\w+) ON CLUSTER (\w+) AS (\w+)\.(\w+) ENGINE = Distributed\(/;

/**
 * Drops a Distributed table whose columns differ from its storage table's, so that the CREATE that follows makes it
 * anew.
 */
async function refreshDistributed(ch: Run, stmt: string): Promise<void> {
  const m = DISTRIBUTED.exec(stmt);
  if (!m || m[4] === 'system') return;
  const [, db, name, cluster, localDb] = m;
  const columns = async (d: string) =>
    ch(`SELECT name, type FROM system.columns WHERE database = '${d}' AND table = '${name}' FORMAT TSVRaw`);
  const [mine, theirs] = await Promise.all([columns(db), columns(localDb)]);
  if (mine && mine !== theirs) await ch(`DROP TABLE IF EXISTS ${db}.${name} ON CLUSTER ${cluster}`);
}

/** A replicated ClickHouse to apply the DDL to: its name in remote_servers and every server. */
export interface ClusterTarget {
  name: string;
  nodes: Array<{ url: string; shard: string }>;
}

/**
 * Views that feed a table from their creation on, and the statement that fills the table once from
 * the rows stored before: run right after the view is created (on a cluster, once the Distributed
 * tables exist). Rows inserted between the two land twice; the tables named here are Replacing.
 */
const POPULATE: Record<string, string> = {
  event_keys_mv:
    'INSERT INTO csp.event_keys SELECT tenant_id, customer_id, external_id, batch_id FROM csp.events ' +
    "WHERE external_id != ''",
};
const MATERIALIZED_VIEW = /^CREATE MATERIALIZED VIEW IF NOT EXISTS (\w+)\.(\w+) /i;
const tableCount = (db: string, name: string) =>
  `SELECT count() FROM system.tables WHERE database = '${db}' AND name = '${name}' FORMAT TSVRaw`;

/** Applies schema.sql to a single server, or its cluster form (clusterStatements) to every server of a cluster. */
export async function applyClickhouse(url: string, cluster?: ClusterTarget): Promise<void> {
  if (cluster) return applyToCluster(url, cluster);
  await applyToServer(clickhouseDdl(url));
}

/**
 * schema.sql on one server through `ch`: over HTTP here, in process on a current ClickHouse in
 * test/clickhouse-current/ (chDB), so that both run the same statements in the same order.
 */
export async function applyToServer(ch: Run): Promise<void> {
  for (const stmt of clickhouseStatements()) {
    const view = MATERIALIZED_VIEW.exec(stmt);
    const populate = view && POPULATE[view[2]];
    const fresh = populate ? (await ch(tableCount(view[1], view[2]))).trim() === '0' : false;
    try {
      await ch(stmt);
    } catch (err) {
      // 18.16 has no ADD COLUMN IF NOT EXISTS: a column added by an earlier run is done.
      if (/^ALTER TABLE \S+ ADD COLUMN /i.test(stmt) && /already exists/i.test((err as Error).message)) continue;
      throw err;
    }
    if (fresh && populate) await ch(populate);
    await regranulate(ch, stmt);
  }
}

/**
 * A statement already in effect on every server is skipped, so that `infra:up` on a cluster that
 * is up to date sends nothing through the distributed DDL queue. ALTER TABLE … ADD COLUMN goes to
 * one server per shard without ON CLUSTER: a replicated table's ALTER reaches its other replicas
 * through ZooKeeper by itself, and 18.16's DDL worker, given the same ALTER on both replicas,
 * leaves the task unfinished when the second finds the column already there ("Node exists …
 * /executed") and `ON CLUSTER` waits for it until distributed_ddl_task_timeout.
 * Tables are created at the declared settings: there is nothing for regranulate to rebuild.
 */
async function applyToCluster(url: string, cluster: ClusterTarget): Promise<void> {
  const ch = clickhouseDdl(url);
  const everywhere = async (sql: string, want: (answer: string) => boolean) =>
    (await Promise.all(cluster.nodes.map((n) => clickhouseDdl(n.url)(sql)))).every(want);
  const tableExists = tableCount;
  const populates: string[] = [];
  // One server of each shard (a later one overwrites an earlier in the Map): where ALTERs go.
  const onePerShard = [...new Map(cluster.nodes.map((n) => [n.shard, n])).values()];
  for (const stmt of clusterStatements(clickhouseStatements(), cluster.name)) {
    let m: RegExpExecArray | null;
    if ((m = /^ALTER TABLE (\w+)\.(\w+) ON CLUSTER \w+ (ADD COLUMN (\w+) [\s\S]*)$/i.exec(stmt))) {
      const [, db, name, change, column] = m;
      const has =
        `SELECT count() FROM system.columns WHERE database = '${db}' AND table = '${name}' ` +
        `AND name = '${column}' FORMAT TSVRaw`;
      if (await everywhere(has, (a) => a.trim() === '1')) continue;
      for (const n of onePerShard) {
        if ((await clickhouseDdl(n.url)(has)).trim() === '1') continue;
        await clickhouseDdl(n.url)(`ALTER TABLE ${db}.${name} ${change}`);
      }
      continue;
    }
    await refreshDistributed(ch, stmt);
    if ((m = /^CREATE (?:TABLE|MATERIALIZED VIEW) IF NOT EXISTS (\w+)\.(\w+) /i.exec(stmt))) {
      if (await everywhere(tableExists(m[1], m[2]), (a) => a.trim() === '1')) continue;
      if (await attachDetached(cluster.nodes, m[1], m[2])) continue;
      const populate = POPULATE[m[2]];
      if (populate && (await everywhere(tableExists(m[1], m[2]), (a) => a.trim() === '0'))) populates.push(populate);
    } else if ((m = /^DROP TABLE IF EXISTS (\w+)\.(\w+) /i.exec(stmt))) {
      if (await everywhere(tableExists(m[1], m[2]), (a) => a.trim() === '0')) continue;
    } else if ((m = /^CREATE DATABASE IF NOT EXISTS (\w+) /i.exec(stmt))) {
      const has = `SELECT count() FROM system.databases WHERE name = '${m[1]}' FORMAT TSVRaw`;
      if (await everywhere(has, (a) => a.trim() === '1')) continue;
    }
    await ch(stmt);
  }
  for (const populate of populates) await ch(populate);
}

/** ClickHouse's "There is no metadata file for table": the server never had it. */
const NO_METADATA = 390;

/**
 * A table a server holds detached, its metadata file kept (a `SYSTEM RESTART REPLICA` that failed
 * to build it again while ZooKeeper was away, an operator's DETACH), is attached again: a
 * `CREATE … ON CLUSTER` would refuse its data folder and fail the whole statement. True when every
 * server has the table afterwards.
 */
async function attachDetached(nodes: ClusterTarget['nodes'], db: string, name: string): Promise<boolean> {
  let all = true;
  for (const n of nodes) {
    const run = clickhouseDdl(n.url);
    if ((await run(tableCount(db, name))).trim() === '1') continue;
    try {
      await run(`ATTACH TABLE ${db}.${name}`);
    } catch (err) {
      if (!(err as Error).message.includes(`Code: ${NO_METADATA},`)) throw err;
      all = false;
    }
  }
  return all;
}

export type Run = (sql: string) => Promise<string>;

export function clickhouseDdl(url: string): Run {
  return async (sql) => {
    const res = await fetch(url, { method: 'POST', body: sql });
    const text = await res.text();
    if (!res.ok) throw new InfraError(`ClickHouse DDL failed: ${text.trim()}\n${sql.slice(0, 200)}`);
    return text;
  };
}

const GRANULARITY = /\bSETTINGS\b[^;]*\bindex_granularity\s*=\s*(\d+)/i;

/**
 * ClickHouse 18.16 cannot change a table's index_granularity in place. When schema.sql declares
 * another one than an existing table was created with (the rollups got finer granules so that a
 * few customers' rows are read without their neighbours'), the table is rebuilt:
 * 1. an empty copy with the declared settings takes the table's name in one RENAME, so the
 *    materialized views write into it from that statement on (they find their target by name);
 * 2. the old rows are copied into it one partition at a time, each partition dropped from the old
 *    table once copied; a rerun after a crash goes on from the partitions left. Only a crash
 *    between one partition's copy and its drop would copy that partition twice.
 * Rollup rows are partial aggregates, so rows copied beside newer ones merge as any two parts do.
 * It runs at `infra:up`, before the tiers start, and once per change of the declared settings.
 */
export async function regranulate(ch: Run, stmt: string): Promise<void> {
  const table = /^CREATE TABLE IF NOT EXISTS (\w+)\.(\w+)\s*\(/i.exec(stmt);
  const declared = GRANULARITY.exec(stmt)?.[1];
  if (!table || !declared) return;
  const [, db, name] = table;
  const old = `${name}__old`;
  const engine = async (t: string) =>
    (await ch(`SELECT engine_full FROM system.tables WHERE database = '${db}' AND name = '${t}' FORMAT TSVRaw`)).trim();
  const stored = GRANULARITY.exec(await engine(name))?.[1] ?? '8192';
  if (stored !== declared && !(await engine(old))) {
    const fresh = `${name}__new`;
    await ch(`DROP TABLE IF EXISTS ${db}.${fresh}`);
    await ch(stmt.replace(`${db}.${name}`, `${db}.${fresh}`));
    await ch(`RENAME TABLE ${db}.${name} TO ${db}.${old}, ${db}.${fresh} TO ${db}.${name}`);
  }
  if (!(await engine(old))) return;
  const partitions = (
    await ch(`SELECT DISTINCT partition_id, partition FROM system.parts
      WHERE database = '${db}' AND table = '${old}' AND active FORMAT TSVRaw`)
  )
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split('\t'));
  for (const [id, value] of partitions) {
    await ch(`INSERT INTO ${db}.${name} SELECT * FROM ${db}.${old} WHERE _partition_id = '${id}'`);
    await ch(`ALTER TABLE ${db}.${old} DROP PARTITION ${value}`);
  }
  await ch(`DROP TABLE ${db}.${old}`);
}

export async function applyPostgres(url: string): Promise<string[]> {
  const u = new URL(url);
  const db = u.pathname.slice(1);
  const admin = postgres({ ...pgOpts(u), database: 'postgres' });
  try {
    const [exists] = await admin`SELECT 1 FROM pg_database WHERE datname = ${db}`;
    if (!exists)
      await admin.unsafe(`CREATE DATABASE "${db.replace(/"/g, '')}"`).catch((err: { code?: string }) => {
        if (err.code !== '42P04') throw err;
      });
  } finally {
    await admin.end();
  }
  const sql = postgres({ ...pgOpts(u), database: db });
  try {
    return await migrate(sql, path.join(ROOT, 'core-api/db/migrations'));
  } finally {
    await sql.end();
  }
}

function pgOpts(u: URL) {
  return {
    host: u.hostname,
    port: Number(u.port || 5432),
    username: decodeURIComponent(u.username || 'postgres'),
    password: decodeURIComponent(u.password),
    max: 1,
    onnotice: () => {},
  };
}

export async function applyAll(p: StackProfile, say: Say, maxBytes: number): Promise<void> {
  const urls = stackUrls(p);
  const nc = await connect({ servers: natsServers(urls.NATS_URL) });
  try {
    // Every stream on every server of a NATS cluster (3 replicas: a quorum of 2 acknowledges).
    await applyStreams(await nc.jetstreamManager(), { maxBytes, replicas: p.nats.length });
  } finally {
    await nc.close();
  }
  const nodes = p.clickhouse.map((n) => ({ url: clickhouseUrl(n), shard: n.shard }));
  await applyClickhouse(nodes[0].url, p.chCluster ? { name: p.chCluster, nodes } : undefined);
  const applied = await applyPostgres(urls.DATABASE_URL);
  if (applied.length) say(`migrations applied: ${applied.join(', ')}`);
}
