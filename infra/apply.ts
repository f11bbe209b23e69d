import fs from 'node:fs';
import path from 'node:path';
import { connect } from 'nats';
import postgres from 'postgres';
import { ROOT, stackUrls, type StackProfile } from './stack.js';
import { migrate } from '../lib/migrate.js';
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

export async function applyClickhouse(url: string): Promise<void> {
  const ddl = clickhouseStatements();
  const ch = clickhouseDdl(url);
  for (const stmt of ddl) {
    try {
      await ch(stmt);
    } catch (err) {
      // 18.16 has no ADD COLUMN IF NOT EXISTS: a column added by an earlier run is done.
      if (/^ALTER TABLE \S+ ADD COLUMN /i.test(stmt) && /already exists/i.test((err as Error).message)) continue;
      throw err;
    }
    await regranulate(ch, stmt);
  }
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
  const nc = await connect({ servers: urls.NATS_URL });
  try {
    await applyStreams(await nc.jetstreamManager(), { maxBytes, replicas: 1 });
  } finally {
    await nc.close();
  }
  await applyClickhouse(urls.CLICKHOUSE_URL);
  const applied = await applyPostgres(urls.DATABASE_URL);
  if (applied.length) say(`migrations applied: ${applied.join(', ')}`);
}
