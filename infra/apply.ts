import fs from 'node:fs';
import path from 'node:path';
import { connect } from 'nats';
import postgres from 'postgres';
import { ROOT, stackUrls, type StackProfile } from './stack.js';
import { migrate } from '../lib/migrate.js';
import { applyStreams } from './streams.js';
import { InfraError } from './proc.js';

type Say = (line: string) => void;

export async function applyClickhouse(url: string): Promise<void> {
  const ddl = fs
    .readFileSync(path.join(ROOT, 'infra/clickhouse/schema.sql'), 'utf8')
    .split('\n')
    .filter((l) => !l.trim().startsWith('--'))
    .join('\n')
    .split(/;\s*(?:\n|$)/)
    .map((s) => s.trim())
    .filter(Boolean);
  for (const stmt of ddl) {
    const res = await fetch(url, { method: 'POST', body: stmt });
    if (!res.ok && /^ALTER TABLE \S+ ADD COLUMN /i.test(stmt)) {
      const text = await res.text();
      if (/already exists/i.test(text)) continue;
      throw new InfraError(`ClickHouse DDL failed: ${text.trim()}\n${stmt.slice(0, 200)}`);
    }
    if (!res.ok) throw new InfraError(`ClickHouse DDL failed: ${(await res.text()).trim()}\n${stmt.slice(0, 200)}`);
  }
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
