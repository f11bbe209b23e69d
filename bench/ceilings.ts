import { clickhouseStatements } from '../infra/apply.js';
import { insertColumns, ROW_FORMAT } from '../lib/row-binary.js';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { DiscardPolicy, RetentionPolicy, StorageType, nanos } from 'nats';
import { sampler, type BenchContext } from './context.js';
import type { LoadResult } from './meter.js';
import type { Usage } from './proc-stats.js';
import { BenchError, runChild, say } from './tiers.js';
import type { PublishConfig } from './publish.js';
import { rowsPayload, Workload } from './workload.js';

export interface InsertRun {
  method: string;
  streams: number;
  /** Into a copy of csp.events with copies of its materialized views (absent: the bare table). */
  views?: boolean;
  rows: number;
  seconds: number;
  rowsPerSec: number;
  mbPerSec: number;
  usage: Usage;
}

export type JetStreamCeiling = LoadResult & { usage: Usage; payloadBytes: number };

export interface CeilingsResult {
  /** Publishing the rows ingest publishes. */
  jetstream: JetStreamCeiling;
  /** Publishing the request bodies as the clients sent them (absent in results of older runs). */
  jetstreamBody?: JetStreamCeiling;
  clickhouse: { runs: InsertRun[]; best: InsertRun; rowBytes: number };
}

const BENCH_STREAM = 'BENCH';
const BENCH_TABLE = 'csp.bench_events';
/** The writer's own statement for the rows producers write (processors/clickhouse.ts). */
const INSERT_ROWS = `INSERT INTO ${BENCH_TABLE} ${insertColumns(ROW_FORMAT, 'events')} FORMAT RowBinary`;
const BENCH_PREFIX = 'bench_';

/**
 * The materialized views schema.sql puts on csp.events, rewritten onto the bench table, each
 * into a copy of its target: an insert into the bench table then does what an insert into
 * csp.events does, without touching the real tables.
 */
function viewCopies(): { create: string[]; drop: string[] } {
  const create: string[] = [];
  const drop: string[] = [];
  for (const stmt of clickhouseStatements()) {
    const m = /^CREATE MATERIALIZED VIEW IF NOT EXISTS csp\.(\w+) TO csp\.(\w+) AS\s+([\s\S]+)$/.exec(stmt);
    if (!m || !/\bFROM csp\.events\b/.test(m[3])) continue;
    const [, view, target, select] = m;
    create.push(
      `CREATE TABLE csp.${BENCH_PREFIX}${target} AS csp.${target}`,
      `CREATE MATERIALIZED VIEW csp.${BENCH_PREFIX}${view} TO csp.${BENCH_PREFIX}${target} AS ${select.replace(/\bcsp\.events\b/g, BENCH_TABLE)}`,
    );
    drop.push(`DROP TABLE IF EXISTS csp.${BENCH_PREFIX}${view}`, `DROP TABLE IF EXISTS csp.${BENCH_PREFIX}${target}`);
  }
  return { create, drop };
}

/** Raw JetStream publish from one Node process, into a temporary stream shaped like EVENTS. */
export async function jetstreamCeiling(
  ctx: BenchContext,
  payload: PublishConfig['payload'],
  label = `jetstream-${payload}`,
  durationS = ctx.opts.durationS,
): Promise<JetStreamCeiling> {
  const { jsm } = ctx;
  await jsm.streams.delete(BENCH_STREAM).catch(() => undefined);
  // Limits retention with a byte cap keeps the disk bounded however fast the run goes; file
  // storage and the duplicate window match EVENTS, so nats-server does the same work per message.
  await jsm.streams.add({
    name: BENCH_STREAM,
    subjects: ['bench.raw.>'],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    max_bytes: 4 * 1024 ** 3,
    max_msg_size: 8 * 1024 * 1024,
    duplicate_window: nanos(2 * 60_000),
    num_replicas: 1,
  });
  let loadPid = 0;
  const s = sampler(ctx, { 'bench-publisher': () => (loadPid ? [loadPid] : []) });
  try {
    const result = await runChild<PublishConfig, LoadResult>(
      'bench/publish.js',
      {
        label,
        natsUrl: ctx.urls.NATS_URL,
        subjectPrefix: 'bench.raw',
        tenants: ctx.tenants,
        workload: ctx.workload,
        inflight: ctx.opts.publishInflight,
        durationS,
        payload,
      },
      (pid) => (loadPid = pid),
    );
    return {
      ...result,
      usage: s.stop(),
      payloadBytes: Math.round(result.bytesPerSec / Math.max(1, result.requestsPerSec)),
    };
  } finally {
    s.stop();
    await jsm.streams.delete(BENCH_STREAM).catch(() => undefined);
  }
}

/** The rows ingest would publish for the benchmark's bodies: message payloads one after another. */
function writeRowsFile(
  ctx: BenchContext,
  rows: number,
): { file: string; rows: number; bytes: number; httpChunk: { body: Buffer; rows: number } } {
  const now = Date.now();
  const payloads = new Workload(ctx.tenants, ctx.workload)
    .bodies()
    .map((b) => ({ payload: rowsPayload(ctx.tenants[b.tenant], b.events, now).payload, rows: b.events.length }));
  const file = path.join(os.tmpdir(), `bench-rows-${process.pid}.bin`);
  const fd = fs.openSync(file, 'w');
  let n = 0;
  let bytes = 0;
  const chunk: Buffer[] = [];
  let chunkRows = 0;
  try {
    for (let i = 0; n < rows; i = (i + 1) % payloads.length) {
      bytes += fs.writeSync(fd, payloads[i].payload);
      n += payloads[i].rows;
      // The first HTTP_BATCH_ROWS rows (or all), the body of each HTTP insert.
      if (chunkRows < Math.min(HTTP_BATCH_ROWS, rows)) {
        chunk.push(payloads[i].payload);
        chunkRows += payloads[i].rows;
      }
    }
  } finally {
    fs.closeSync(fd);
  }
  return { file, rows: n, bytes, httpChunk: { body: Buffer.concat(chunk), rows: chunkRows } };
}

function clientInsert(ctx: BenchContext, file: string, onPid: (pid: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const fd = fs.openSync(file, 'r');
    // A stream of --ch-rows (a million) is one insert block of about 520 MB, whose parsing can take
    // more than the stack's 4 GB per query (infra/clickhouse/users.xml): it did once, 3 Dec 2026,
    // "would use 3.81 GiB". The ceiling measures the insert, not that limit: its clients may use 8 GB.
    const p = spawn(
      'clickhouse-client',
      [
        '--host',
        '127.0.0.1',
        '--port',
        String(ctx.profile.chTcpPort),
        '--max_memory_usage',
        String(8e9),
        '--query',
        INSERT_ROWS,
      ],
      { stdio: [fd, 'ignore', 'pipe'] },
    );
    fs.closeSync(fd);
    onPid(p.pid!);
    let err = '';
    p.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    p.on('error', reject);
    p.on('exit', (code) =>
      code === 0
        ? resolve()
        : reject(new BenchError(`clickhouse-client exited with ${code}: ${err.trim().slice(0, 500)}`)),
    );
  });
}

function httpPost(ctx: BenchContext, body: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const q = new URLSearchParams({ query: INSERT_ROWS });
    const req = http.request(
      `${ctx.urls.CLICKHOUSE_URL}/?${q}`,
      { method: 'POST', headers: { 'Content-Length': body.length } },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () =>
          res.statusCode === 200
            ? resolve()
            : reject(new BenchError(`ClickHouse HTTP insert: ${res.statusCode} ${text.slice(0, 300)}`)),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * The same rows POSTed in inserts of HTTP_BATCH_ROWS, one after another, as a writer batching
 * its messages would (a single 1 GB body runs 18.16 out of its per-query memory).
 */
async function httpInsert(ctx: BenchContext, chunk: { body: Buffer; rows: number }, rows: number): Promise<void> {
  for (let done = 0; done < rows; done += chunk.rows) await httpPost(ctx, chunk.body);
}

const HTTP_BATCH_ROWS = 100_000;

/**
 * `clickhouse-client` inserting the same rows (one stream, then two at once), and for reference
 * the same body POSTed over HTTP, which is how a Node writer talks to ClickHouse.
 */
async function clickhouseCeiling(ctx: BenchContext): Promise<CeilingsResult['clickhouse']> {
  const f = writeRowsFile(ctx, ctx.opts.chRows);
  say(
    `clickhouse ceiling: ${f.rows.toLocaleString('en-US')} rows, ${(f.bytes / 1024 / 1024).toFixed(0)} MB per stream`,
  );
  const runs: InsertRun[] = [];
  const copies = viewCopies();
  const chunk = f.httpChunk;
  const httpRows = Math.ceil(f.rows / chunk.rows) * chunk.rows;
  try {
    for (const [method, streams, views] of [
      ['clickhouse-client', 1, false],
      ['clickhouse-client', 2, false],
      ['http', 1, false],
      ['http', 2, false],
      ['clickhouse-client', 2, true],
    ] as const) {
      for (const q of [...copies.drop, `DROP TABLE IF EXISTS ${BENCH_TABLE}`]) await ctx.ch.query(q);
      await ctx.ch.query(`CREATE TABLE ${BENCH_TABLE} AS csp.events`);
      if (views) for (const q of copies.create) await ctx.ch.query(q);
      const clients: number[] = [];
      const s = sampler(ctx, { 'clickhouse-client': () => clients });
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: streams }, () =>
          method === 'http' ? httpInsert(ctx, chunk, f.rows) : clientInsert(ctx, f.file, (pid) => clients.push(pid)),
        ),
      );
      const seconds = (performance.now() - t0) / 1000;
      const usage = s.stop();
      const stored = await ctx.ch.number(`SELECT count() FROM ${BENCH_TABLE}`);
      const expected = (method === 'http' ? httpRows : f.rows) * streams;
      if (stored !== expected) throw new BenchError(`${method} stored ${stored} rows, expected ${expected}`);
      const run: InsertRun = {
        method,
        streams,
        ...(views ? { views } : {}),
        rows: stored,
        seconds: Math.round(seconds * 100) / 100,
        rowsPerSec: Math.round(stored / seconds),
        mbPerSec: Math.round((stored * (f.bytes / f.rows)) / seconds / 1024 / 1024),
        usage,
      };
      say(
        `clickhouse ceiling: ${method} × ${streams}${views ? ' with the views' : ''}: ${run.rowsPerSec.toLocaleString('en-US')} rows/s (${run.mbPerSec} MB/s)`,
      );
      runs.push(run);
    }
  } finally {
    fs.rmSync(f.file, { force: true });
    for (const q of [...copies.drop, `DROP TABLE IF EXISTS ${BENCH_TABLE}`])
      await ctx.ch.query(q).catch(() => undefined);
  }
  const client = runs.filter((r) => r.method === 'clickhouse-client' && !r.views);
  const best = client.reduce((a, b) => (b.rowsPerSec > a.rowsPerSec ? b : a));
  return { runs, best, rowBytes: Math.round(f.bytes / f.rows) };
}

export async function ceilings(ctx: BenchContext): Promise<CeilingsResult> {
  say('ceiling 1/3: raw JetStream publish of the rows ingest publishes');
  const jetstream = await jetstreamCeiling(ctx, 'rows');
  say('ceiling 2/3: raw JetStream publish of the request bodies as sent');
  const jetstreamBody = await jetstreamCeiling(ctx, 'body');
  say(`ceiling 3/3: ClickHouse insert`);
  const clickhouse = await clickhouseCeiling(ctx);
  return { jetstream, jetstreamBody, clickhouse };
}
