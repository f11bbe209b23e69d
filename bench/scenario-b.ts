import { createHash, randomBytes } from 'node:crypto';
import { connectPg } from '../lib/pg.js';
import { sampler, type BenchContext } from './context.js';
import { Http1Connection, requestBuffer } from './http1.js';
import { connectionsAfter, type Usage } from './proc-stats.js';
import { purgeBenchSubjects } from './ingest-scenario.js';
import { type GcDuring, say, startTier, watchGc } from './tiers.js';

export interface ScenarioBResult {
  /** Where the duplicates were dropped: claims in PostgreSQL on the request path, or after the stream. */
  dedupAt: 'request' | 'stream';
  processes: number;
  connections: number;
  batchEvents: number;
  duplicateShare: number;
  durationS: number;
  requests: number;
  failures: number;
  /** Answers by status (and "error" for a lost connection). */
  statusCounts: Record<string, number>;
  /** Events the 200s listed as rejected (none expected: every event is valid). */
  rejected: number;
  eventsPerSec: number;
  /**
   * Events the service stores (accepted minus the silently ignored duplicates): with dedupAt
   * stream, what the keyed writer will store of what was accepted.
   */
  storedPerSec: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  usage: Usage;
  /** The ingest tier's garbage collection during the load (bench/tiers.ts watchGc). */
  gc?: GcDuring;
  /** The connections held by each ingest process half-way through, busiest first (as surface A's). */
  split?: number[];
}

const BATCH = 1000;
const DUPLICATES = 0.1;

/**
 * Surface B at full load: `connections` keep-alive clients each send 1000-event batches to
 * POST /v1/events with a bearer API key; every event carries an external_id and 10% repeat an id
 * already sent, so deduplication does real work. No processors run; what was stored is purged.
 * `dedupAt` is the ingest tier's SURFACE_B_DEDUP: with `stream` nothing is claimed on the request
 * path and the duplicates are published with the rest, for the keyed writer to drop.
 */
export async function scenarioB(ctx: BenchContext, dedupAt: 'request' | 'stream'): Promise<ScenarioBResult> {
  const sql = connectPg(ctx.urls.DATABASE_URL, 2);
  const keys = new Map<string, string>();
  try {
    for (const t of ctx.tenants) {
      const key = `svc_sk_test_${randomBytes(32).toString('base64url')}`;
      await sql`INSERT INTO api_keys (tenant_id, name, key_hash, prefix, last4, scopes, role)
        VALUES (${t.tenantId}, 'bench surface B', ${createHash('sha256').update(key).digest()}, 'svc_sk_test_', ${key.slice(-4)}, ${['events:write']}, 'admin')`;
      keys.set(t.tenantId, key);
    }
  } finally {
    await sql.end();
  }
  const ingest = await startTier('ingest', 'INGEST_PORT', {
    NATS_URL: ctx.urls.NATS_URL,
    DATABASE_URL: ctx.urls.DATABASE_URL,
    CLICKHOUSE_URL: ctx.urls.CLICKHOUSE_URL,
    STACK_PROFILE: ctx.profile.name,
    INGEST_PROCESSES: String(ctx.opts.ingestProcesses),
    INGEST_RATE_LIMIT_PER_MIN: '100000000',
    EVENTS_BATCHES_PER_MIN: '100000000',
    EVENTS_DAILY_QUOTAS: '',
    SURFACE_B_DEDUP: dedupAt,
  });
  say(`surface B (deduplication: ${dedupAt}): ${ctx.opts.ingestProcesses} ingest processes ready on ${ingest.url}`);
  const { hostname, port } = new URL(ingest.url);
  const latencies: number[] = [];
  let requests = 0;
  let failures = 0;
  let rejected = 0;
  const statusCounts: Record<string, number> = {};
  let events = 0;
  let stored = 0;
  let seq = 0;
  // Deduplication keys are kept forever: ids unique to this run keep earlier runs from counting as duplicates.
  const run = randomBytes(4).toString('hex');
  const dup = Math.floor(BATCH * DUPLICATES);
  const extId = (bn: number, bi: number) => `b-${run}-${String(bn).padStart(9, '0')}-${String(bi).padStart(4, '0')}`;
  // One request per tenant built once, with fixed-width ids patched in per batch: the load
  // generator shares the two cores with ingest, and serializing 1000 events per request would
  // take it a core of its own.
  const templates = ctx.tenants.map((t) => {
    const list = Array.from({ length: BATCH }, (_, i) => ({
      customer_id: t.customers[0][0],
      event_name: ['page_view', 'login', 'report_exported'][i % 3],
      external_id: extId(0, i),
      user_external_id: `u-${i % 50}`,
      properties: { i, plan: i % 2 ? 'pro' : 'free' },
    }));
    const buf = requestBuffer(
      hostname,
      Number(port),
      '/v1/events',
      { 'content-type': 'application/json', authorization: `Bearer ${keys.get(t.tenantId)}` },
      JSON.stringify({ events: list }),
    );
    const at = (key: string) => {
      const needle = Buffer.from(`"${key}":"`);
      const out: number[] = [];
      for (let i = buf.indexOf(needle); i >= 0; i = buf.indexOf(needle, i + needle.length)) out.push(i + needle.length);
      return out;
    };
    return { t, buf, customerAt: at('customer_id'), extAt: at('external_id') };
  });
  const body = (): { buf: Buffer; fresh: number } => {
    const tpl = templates[seq % templates.length];
    const t = tpl.t;
    const n = seq++;
    const prev = n - ctx.tenants.length;
    const buf = Buffer.from(tpl.buf);
    for (let i = 0; i < BATCH; i++) {
      // The first tenth repeats (customer, external_id) pairs of the tenant's previous batch; the rest are new.
      const repeat = i < dup && prev >= 0;
      const bn = repeat ? prev : n;
      const bi = repeat ? i + dup : i;
      buf.write(t.customers[(bn * 7 + bi) % t.customers.length][0], tpl.customerAt[i], 'latin1');
      buf.write(extId(bn, bi), tpl.extAt[i], 'latin1');
    }
    return { buf, fresh: n >= ctx.tenants.length ? BATCH - dup : BATCH };
  };
  const durationMs = ctx.opts.durationS * 1000;
  const gcSince = await watchGc(ingest);
  // The batches are built in this process, so it is the load generator here.
  const s0 = sampler(ctx, { ingest: () => [ingest.pid], load: () => [process.pid] }, ['load']);
  const started = performance.now();
  const lane = () =>
    new Promise<void>((resolve) => {
      const conn = new Http1Connection(hostname, Number(port));
      const next = () => {
        if (performance.now() - started > durationMs) {
          conn.close();
          resolve();
          return;
        }
        const { buf, fresh } = body();
        const t0 = performance.now();
        conn.send(buf, (err, status, reply) => {
          requests++;
          const code = err ? 'error' : String(status);
          statusCounts[code] = (statusCounts[code] ?? 0) + 1;
          if (err || status !== 200) failures++;
          else {
            latencies.push(performance.now() - t0);
            // The answer's own count: a silently ignored duplicate is counted as accepted, a rejected event is not.
            const r = JSON.parse(reply) as { accepted: number; rejected: number };
            events += r.accepted;
            rejected += r.rejected;
            stored += r.rejected ? Math.max(0, fresh - r.rejected) : fresh;
          }
          next();
        });
      };
      next();
    });
  let usage: Usage;
  const splitTaken = connectionsAfter(ingest.pid, Number(port), durationMs / 2);
  let split: number[];
  let gc: GcDuring | undefined;
  try {
    await Promise.all(Array.from({ length: ctx.opts.connections }, lane));
  } finally {
    split = splitTaken();
    usage = s0.stop();
    gc = await gcSince();
    await ingest.stop();
    await purgeBenchSubjects(ctx);
  }
  const s = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const q = (p: number) =>
    Math.round((latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0) * 10) / 10;
  return {
    dedupAt,
    processes: ctx.opts.ingestProcesses,
    connections: ctx.opts.connections,
    batchEvents: BATCH,
    duplicateShare: DUPLICATES,
    durationS: Math.round(s),
    requests,
    failures,
    statusCounts,
    rejected,
    eventsPerSec: Math.round(events / s),
    storedPerSec: Math.round(stored / s),
    latencyMs: {
      p50: q(0.5),
      p90: q(0.9),
      p99: q(0.99),
      max: Math.round((latencies[latencies.length - 1] ?? 0) * 10) / 10,
    },
    usage,
    gc,
    split,
  };
}
