import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Test } from '#tap';
import { ROOT } from '../../infra/stack.js';
import {
  bootstrap,
  ch,
  db,
  profile,
  seed,
  stackUp as serversUp,
  startTier,
  type Tier,
  type Workspace,
} from '../helpers/stack.js';

/**
 * Steady load on both ingestion surfaces while one fault is injected, then the questions a user
 * of the system asks: was any acknowledged event lost or stored twice, what did clients see, how
 * long until full throughput was back, and did every tier recover by itself.
 */

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Answer {
  at: number;
  status: number | 'network';
  trace?: string;
  accepted: number;
  retryAfter?: string | null;
  /** Surface-B events with external_id: their keys (a tenth repeat earlier ones), counted by key. */
  keys?: string[];
}

export interface Stack {
  ws: Workspace;
  ingest: Tier;
  processors: Tier;
  api: Tier;
  /** Starts a tier again after its process was killed (new port for processors and the API). */
  restart(tier: 'processors' | 'api'): Promise<void>;
}

export interface Fault {
  name: string;
  /** What clients may see while it lasts, for the report. */
  expected: string;
  inject(s: Stack): Promise<void>;
  /** How long the fault lasts before recovery starts. */
  downMs: number;
  /** Brings the failed part back (a restart by the operator or the supervisor). */
  recover(s: Stack): Promise<void>;
  /** How long the pipeline may make no progress before unstored events count as lost (default 30 s). */
  stallMs?: number;
  /** Tiers this fault kills on purpose: not counted as "restarted". */
  kills?: Array<'ingest' | 'processors' | 'api'>;
}

export interface Outcome {
  fault: string;
  acknowledged: number;
  lost: number;
  doubled: number;
  errors: Record<string, number>;
  errorsWithoutRetryAfter: number;
  failedButStored: number;
  /** Keys of acknowledged keyed requests: none stored, or stored more than once. */
  keysAcknowledged: number;
  keysLost: number;
  keysStoredTwice: number;
  recoverySeconds: number;
  /** Seconds from the end of the load until every acknowledged event was stored. */
  settleSeconds: number;
  /** What readers saw during the fault, when a fault measures it. */
  reads?: string;
  recoveredByThemselves: boolean;
  expected: string;
}

/** Brings the stack's servers back (the helpers' stackUp, retried); the suite cannot go on without them. */
export async function stackUp(): Promise<void> {
  if ((await serversUp()) !== 0) throw new Error(`the ${profile.name} stack did not come back up`);
}

export function pidOf(file: string): number {
  return Number(fs.readFileSync(path.join(profile.dataDir, file), 'utf8').split('\n')[0]);
}

export function childrenOf(pid: number): number[] {
  const out = execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' });
  return out
    .split('\n')
    .map((l) => Number(l.trim()))
    .filter((n) => n > 0);
}

/** Surface B's duplicates are dropped after the stream, by the keyed writer (docs/ingestion.md). */
const STREAM_DEDUP = { SURFACE_B_DEDUP: 'stream', KEYED_WRITER_LEASE_MS: '3000' };

async function startStack(t: Test): Promise<Stack> {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 200);
  const lim = { INGEST_RATE_LIMIT_PER_MIN: '10000000', EVENTS_BATCHES_PER_MIN: '10000000' };
  const ingest = await startTier(t, 'ingest', { INGEST_PROCESSES: '2', ...lim, ...STREAM_DEDUP });
  t.teardown(() => ingest.stop('SIGTERM'));
  const s: Stack = {
    ws,
    ingest,
    processors: await startTier(t, 'processors', {
      WRITER_BATCH_MS: '50',
      LOG_LEVEL: process.env.CHAOS_LOG_LEVEL ?? 'warn',
      ...STREAM_DEDUP,
    }),
    api: await startTier(t, 'core-api', { API_READS_PER_MIN: '1000000', API_WRITES_PER_MIN: '1000000' }),
    async restart(tier) {
      if (tier === 'processors')
        s.processors = await startTier(t, 'processors', { WRITER_BATCH_MS: '50', ...STREAM_DEDUP });
      else s.api = await startTier(t, 'core-api', { API_READS_PER_MIN: '1000000', API_WRITES_PER_MIN: '1000000' });
    },
  };
  return s;
}

/**
 * Surface A lanes (50-event batches by external id), surface B lanes (100 events by UUID) and keyed
 * surface B lanes (100 events with external_id, a tenth of them repeating a key sent before).
 */
function startLoad(s: Stack, customerIds: string[]) {
  const answers: Answer[] = [];
  let running = true;
  let seq = 0;
  let nextKey = 0;
  const keyOf = (k: number) => `k-${k}`;
  const lane = async (surface: 'a' | 'b' | 'keyed') => {
    while (running) {
      const n = seq++;
      const a = surface === 'a';
      const keys =
        surface === 'keyed'
          ? Array.from({ length: 100 }, (_, i) =>
              i % 10 === 9 && nextKey > 0 ? Math.floor(Math.random() * nextKey) : nextKey++,
            )
          : undefined;
      const events = Array.from({ length: a ? 50 : 100 }, (_, i) => ({
        event_name: ['login', 'report_exported', 'page_view'][(n + i) % 3],
        ...(a
          ? { external_customer_id: `cust-${String(((n * 7 + i) % 200) + 1).padStart(6, '0')}` }
          : { customer_id: customerIds[((keys?.[i] ?? n) * 7 + i * (keys ? 0 : 1)) % customerIds.length] }),
        ...(keys ? { external_id: keyOf(keys[i]) } : {}),
        [a ? 'user_id' : 'user_external_id']: `u${i % 9}`,
        properties: { n, i },
      }));
      try {
        const res = await fetch(`${s.ingest.url}${a ? '/v1/ingest/events' : '/v1/events'}`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(a ? { 'x-api-key': s.ws.ingestion_key } : { authorization: `Bearer ${s.ws.api_key}` }),
          },
          body: JSON.stringify({ events }),
          signal: AbortSignal.timeout(30_000),
        });
        const body = (await res.json().catch(() => ({}))) as { accepted?: number };
        answers.push({
          at: Date.now(),
          status: res.status,
          trace: res.headers.get('x-trace-id') ?? undefined,
          accepted: body.accepted ?? 0,
          retryAfter: res.headers.get('retry-after'),
          keys: keys?.map(keyOf),
        });
      } catch {
        answers.push({ at: Date.now(), status: 'network', accepted: 0 });
        await sleep(100);
      }
    }
  };
  const lanes = [
    ...Array.from({ length: 4 }, () => lane('a')),
    ...Array.from({ length: 2 }, () => lane('b')),
    ...Array.from({ length: 2 }, () => lane('keyed')),
  ];
  return {
    answers,
    stop: async () => {
      running = false;
      await Promise.all(lanes);
    },
  };
}

const ok = (a: Answer) => a.status === 202 || a.status === 200;

/** Seconds from `back` until answers per half second are again ≥ 80 % of the rate before `from`. */
function recoverySeconds(answers: Answer[], start: number, from: number, back: number): number {
  const BIN = 500;
  const bins = new Map<number, number>();
  for (const a of answers) if (ok(a)) bins.set(Math.floor(a.at / BIN), (bins.get(Math.floor(a.at / BIN)) ?? 0) + 1);
  const before: number[] = [];
  for (let b = Math.floor((start + 1000) / BIN); b < Math.floor(from / BIN); b++) before.push(bins.get(b) ?? 0);
  before.sort((x, y) => x - y);
  const baseline = before[Math.floor(before.length / 2)] ?? 0;
  const last = Math.max(...answers.map((a) => Math.floor(a.at / BIN)));
  for (let b = Math.floor(back / BIN); b < last; b++) {
    if ((bins.get(b) ?? 0) >= 0.8 * baseline && (bins.get(b + 1) ?? 0) >= 0.8 * baseline)
      return Math.max(0, (b * BIN - back) / 1000);
  }
  return Number.POSITIVE_INFINITY;
}

/** Runs one fault under load and measures it. */
export async function runFault(t: Test, f: Fault): Promise<Outcome> {
  const s = await startStack(t);
  const customers = (
    await db()<{ id: string }[]>`SELECT id::text FROM customers WHERE tenant_id = ${s.ws.tenant_id}`
  ).map((r) => r.id);
  const initial = { ingest: s.ingest.proc.pid, processors: s.processors.proc.pid, api: s.api.proc.pid };
  const load = startLoad(s, customers);
  const start = Date.now();
  await sleep(6000);
  const from = Date.now();
  try {
    await f.inject(s);
    await sleep(f.downMs);
    await f.recover(s);
  } catch (err) {
    // The load's lanes would keep the file running until its timeout.
    await load.stop();
    throw err;
  }
  const back = Date.now();
  // 15 s of load after the recovery, and up to 15 s more while the throughput has not come back:
  // on a slow machine a restarted server's catching up can hold it below 80 % for longer.
  await sleep(15_000);
  while (recoverySeconds(load.answers, start, from, back) === Number.POSITIVE_INFINITY && Date.now() - back < 30_000)
    await sleep(1000);
  await load.stop();
  const loadEnd = Date.now();

  // Keyed requests are counted by key: their duplicates are accepted and never stored.
  const acked = new Map<string, number>();
  const ackedKeys = new Set<string>();
  for (const a of load.answers) {
    if (!ok(a) || !a.trace) continue;
    if (a.keys) for (const k of a.keys) ackedKeys.add(k);
    else acked.set(a.trace.toLowerCase(), a.accepted);
  }
  const storedKeys = async () =>
    new Map(
      (
        await ch<{ k: string; c: string }>(
          `SELECT external_id AS k, count() AS c FROM events WHERE tenant_id = '${s.ws.tenant_id}' AND external_id != '' GROUP BY k`,
        )
      ).map((r) => [r.k, Number(r.c)]),
    );
  let keyCounts = await storedKeys();
  const keysMissing = () => [...ackedKeys].some((k) => (keyCounts.get(k) ?? 0) === 0);
  const stored = async () =>
    new Map(
      (
        await ch<{ b: string; c: string }>(
          `SELECT lower(toString(batch_id)) AS b, count() AS c FROM events WHERE tenant_id = '${s.ws.tenant_id}' GROUP BY b`,
        )
      ).map((r) => [r.b, Number(r.c)]),
    );
  // Lost means not stored once the pipeline stopped making progress: a long outage leaves a backlog
  // that takes its time to land, and a fixed wait would count its tail as lost.
  let counts = await stored();
  const rows = (c: Map<string, number>) => [...c.values()].reduce((a, b) => a + b, 0);
  let progressAt = Date.now();
  const deadline = Date.now() + 900_000;
  while (
    ([...acked].some(([b, n]) => (counts.get(b) ?? 0) < n) || keysMissing()) &&
    Date.now() - progressAt < (f.stallMs ?? 30_000) &&
    Date.now() < deadline
  ) {
    await sleep(1000);
    const before = rows(counts) + keyCounts.size;
    counts = await stored();
    keyCounts = await storedKeys();
    if (rows(counts) + keyCounts.size > before) progressAt = Date.now();
  }
  const settleSeconds = (Date.now() - loadEnd) / 1000;
  await sleep(1500); // a late second copy would show by now
  counts = await stored();
  keyCounts = await storedKeys();

  const errors: Record<string, number> = {};
  let errorsWithoutRetryAfter = 0;
  let failedButStored = 0;
  for (const a of load.answers) {
    if (ok(a)) continue;
    errors[a.status] = (errors[a.status] ?? 0) + 1;
    if (a.status === 'network' || (a.status >= 500 && !a.retryAfter)) errorsWithoutRetryAfter++;
    if (a.trace && (counts.get(a.trace.toLowerCase()) ?? 0) > 0) failedButStored++;
  }
  const alive = async (tier: Tier) => tier.proc.exitCode === null && (await fetch(`${tier.url}/readyz`)).ok;
  let recovered = false;
  for (let i = 0; i < 30 && !recovered; i++) {
    recovered =
      (await alive(s.ingest)) &&
      (await alive(s.processors)) &&
      (await alive(s.api)) &&
      (f.kills?.includes('ingest') || s.ingest.proc.pid === initial.ingest) &&
      (f.kills?.includes('processors') || s.processors.proc.pid === initial.processors) &&
      (f.kills?.includes('api') || s.api.proc.pid === initial.api);
    if (!recovered) await sleep(1000);
  }
  const missing = [...acked].filter(([b, n]) => (counts.get(b) ?? 0) < n).map(([b]) => b);
  const doubled = [...acked].filter(([b, n]) => (counts.get(b) ?? 0) > n).map(([b]) => b);
  if (missing.length) t.comment(`acknowledged but not stored: ${missing.slice(0, 20).join(' ')}`);
  if (doubled.length) t.comment(`acknowledged and stored twice: ${doubled.slice(0, 20).join(' ')}`);
  // What a diagnosis needs: the batches, and what the processors said about them.
  if (missing.length || doubled.length) t.comment(`processors output:\n${s.processors.output().slice(-20000)}`);
  return {
    fault: f.name,
    acknowledged: acked.size,
    lost: missing.length,
    doubled: doubled.length,
    errors,
    errorsWithoutRetryAfter,
    failedButStored,
    keysAcknowledged: ackedKeys.size,
    keysLost: [...ackedKeys].filter((k) => (keyCounts.get(k) ?? 0) === 0).length,
    keysStoredTwice: [...keyCounts.values()].filter((c) => c > 1).length,
    recoverySeconds: recoverySeconds(load.answers, start, from, back),
    settleSeconds: Math.round(settleSeconds * 10) / 10,
    recoveredByThemselves: recovered,
    expected: f.expected,
  };
}

/**
 * Runs the faults whose name contains CHAOS_ONLY (all by default) one at a time, each with the
 * assertions every fault suite shares, plus `more`, a suite's own; then brings the stack back.
 */
export async function runFaults(
  t: Test,
  faults: Fault[],
  more: (t: Test, f: Fault, o: Outcome) => void,
): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  const only = process.env.CHAOS_ONLY;
  for (const f of faults.filter((x) => !only || x.name.includes(only))) {
    await t.test(f.name, async (t) => {
      const o = await runFault(t, f);
      outcomes.push(o);
      t.comment(JSON.stringify(o));
      t.ok(o.acknowledged > 50, `${o.acknowledged} requests acknowledged`);
      t.equal(o.lost, 0, 'no acknowledged request lost');
      t.equal(o.doubled, 0, 'no acknowledged request stored twice');
      t.ok(o.keysAcknowledged > 500, `${o.keysAcknowledged} keys acknowledged in keyed requests`);
      t.equal(o.keysLost, 0, 'every acknowledged key stored');
      t.equal(o.keysStoredTwice, 0, 'no key stored twice');
      t.ok(o.recoveredByThemselves, 'every tier ready again without a restart');
      more(t, f, o);
    });
    await sleep(1000);
  }
  await stackUp();
  return outcomes;
}

/** Rewrites one `## heading` section of a markdown file, keeping the rest. */
export function writeSection(file: string, heading: string, body: string): void {
  const full = path.join(ROOT, file);
  const text = fs.existsSync(full) ? fs.readFileSync(full, 'utf8') : '# Reliability\n';
  const start = text.indexOf(`\n## ${heading}\n`);
  const section = `\n## ${heading}\n\n${body.trim()}\n`;
  if (start < 0) {
    fs.writeFileSync(full, `${text.trimEnd()}\n${section}`);
    return;
  }
  const next = text.indexOf('\n## ', start + 4);
  fs.writeFileSync(full, text.slice(0, start) + section + (next < 0 ? '' : text.slice(next)));
}
