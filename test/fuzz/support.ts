import fc from 'fast-check';
import { AckPolicy, DeliverPolicy, connect, nanos, nuid } from 'nats';
import type { Test } from '#tap';
import { startApi } from '../core-api/_helpers.js';
import { db, startTier, urls, type Teardowns, type Tier } from '../helpers/stack.js';
import { send, type Answer, type Answered, type Req } from './http.js';
import { KNOWN, knownIssue, stalls } from './known.js';
import { FAILURE_CLASSES, judge, Ledger, type FailureClass, type Rules, type Violation } from './properties.js';
import { saveFigures, type Figures } from './report.js';

export interface Settings {
  /** Cases per surface. */
  runs: number;
  /** Replays a run: the seed a failed run printed. */
  seed?: number;
  /** Only the surfaces whose name contains this (FUZZ_SURFACE): a long run split over processes, one per surface. */
  only?: string;
}

/** Small enough that every fuzz file together stays within a minute on two cores. */
const QUICK_RUNS = 100;
/** The surfaces built from route seeds mix several routes each and are many: fewer quick cases. */
export const QUICK_RUNS_SEEDED = 30;
/** Longest wait for an answer: far more than any answer takes, even on a loaded machine. */
const ANSWER_MS = 30_000;
/** Wait for a request a known issue leaves unanswered: a fixed server answers it in milliseconds. */
export const STALL_MS = 2_000;

/** FUZZ_RUNS (cases per surface), FUZZ_SEED and FUZZ_SURFACE, from the environment the test file was given. */
export function settings(env: Record<string, string | undefined>, quick = QUICK_RUNS): Settings {
  const runs = Number(env.FUZZ_RUNS ?? quick);
  const seed = env.FUZZ_SEED === undefined ? undefined : Number(env.FUZZ_SEED);
  if (!Number.isInteger(runs) || runs < 1)
    throw new Error(`FUZZ_RUNS must be a positive integer, not ${env.FUZZ_RUNS}`);
  if (seed !== undefined && !Number.isInteger(seed))
    throw new Error(`FUZZ_SEED must be an integer, not ${env.FUZZ_SEED}`);
  return { runs, seed, only: env.FUZZ_SURFACE || undefined };
}

/** One HTTP surface under fuzz: the cases, where they go and what the answers must be. */
export interface Surface {
  name: string;
  /** The routes' own methods: success shapes are checked for them only (other methods land on other routes). */
  methods: readonly string[];
  cases: fc.Arbitrary<Req>;
  port: number;
  rules: Rules;
  /** What a refused request must not change. */
  ledger?: Ledger<unknown>;
  /** Processes that must stay up: a case that kills one is a failure of its own. */
  tiers: Tier[];
}

/** A request as one line a developer can paste into a test: bodies are cut after 600 characters. */
export function showReq(r: Req): string {
  const body = r.body === undefined ? '' : r.body.toString('latin1');
  const cut =
    body.length > 600 ? `${JSON.stringify(body.slice(0, 600))}… (${r.body!.length} bytes)` : JSON.stringify(body);
  const more = r.headers.length - 12;
  const shown = r.headers
    .slice(0, 12)
    .map(([k, v]) => [k, v.length > 100 ? `${v.slice(0, 40)}… (${v.length} characters)` : v]);
  const headers = more > 0 ? [...shown, [`… ${more} more`]] : shown;
  const size = r.body === undefined ? '' : ` (${r.body.length} bytes)`;
  return `${r.method} ${r.path} ${JSON.stringify(headers)}${r.chunked ? ' chunked' : ''} body${size}=${cut}`;
}

const down = (tiers: Tier[]): Violation[] =>
  tiers
    .filter((t) => t.proc.exitCode !== null || t.proc.signalCode !== null)
    .map((t) => ({
      kind: 'tier_down' as const,
      message: `process ${t.proc.pid} exited (${t.proc.exitCode ?? t.proc.signalCode}): ${t.output().slice(-500)}`,
    }));

interface Outcome {
  answer: Answer;
  /** Failures not known yet. */
  violations: Violation[];
  /** Failures of a known issue (known.ts), by its id. */
  known: string[];
}

/** A request and what came back, in short: what a ledger failure names as the request before. */
const shortly = (r: Req, a: Answer) => `${showReq(r).slice(0, 300)} → ${a.ok ? a.status : a.failure}`;

/** One case; `previous` is the case sent before it (shortly), named when a refused request finds a change. */
async function oneCase(s: Surface, r: Req, previous?: string): Promise<Outcome> {
  const answer = await send(s.port, r, stalls(r) ? STALL_MS : ANSWER_MS);
  const success = s.rules.success;
  const rules = { ...s.rules, success: (a: Answered) => (s.methods.includes(r.method) ? success?.(a, r) : undefined) };
  const all = judge(rules, r, answer);
  if (s.ledger) all.push(...(await s.ledger.after(answer, previous)));
  all.push(...down(s.tiers));
  const known: string[] = [];
  const violations: Violation[] = [];
  for (const v of all) {
    const k = knownIssue(r, v);
    if (k) known.push(k.id);
    else violations.push(v);
  }
  return { answer, violations, known };
}

class TierDown extends Error {}

/**
 * Runs `settings.runs` cases through the surface. The first pass sends every case and counts the
 * failures by class without stopping, so a long run reports how often each class occurs. When
 * anything failed, a second pass with the same seed stops at the first failing case and lets
 * fast-check shrink it to the smallest request that still fails; that case and the seed to
 * replay it with (FUZZ_SEED) are printed. Failures of a known issue are counted apart, as todo.
 * The figures are saved for docs/reliability.md.
 */
export async function fuzz(t: Test, s: Surface, o: Settings): Promise<Figures | undefined> {
  if (o.only !== undefined && !s.name.includes(o.only)) {
    t.comment(`${s.name}: not run (FUZZ_SURFACE=${o.only})`);
    return undefined;
  }
  const seed = o.seed ?? (Math.random() * 2 ** 31) | 0;
  const statuses: Record<string, number> = {};
  const failures: Partial<Record<FailureClass, number>> = {};
  const known: Record<string, number> = {};
  // Up to three different examples of each class: one request may hide another kind of failure.
  const examples = new Map<string, string>();
  let last = '';
  let previous: string | undefined;
  let slowest = { ms: 0, req: '' };
  const started = performance.now();
  await s.ledger?.start();
  const first = await fc.check(
    fc.asyncProperty(s.cases, async (c) => {
      const t0 = performance.now();
      const out = await oneCase(s, c, previous);
      previous = shortly(c, out.answer);
      const ms = performance.now() - t0;
      if (ms > slowest.ms) slowest = { ms, req: showReq(c) };
      const k = out.answer.ok ? String(out.answer.status) : out.answer.failure;
      statuses[k] = (statuses[k] ?? 0) + 1;
      for (const id of out.known) known[id] = (known[id] ?? 0) + 1;
      for (const v of out.violations) {
        failures[v.kind] = (failures[v.kind] ?? 0) + 1;
        const sig = `${v.kind}: ${v.message.slice(0, 60)}`;
        const ofKind = [...examples.keys()].filter((x) => x.startsWith(`${v.kind}:`)).length;
        if (!examples.has(sig) && ofKind < 3) examples.set(sig, `${v.message}\n    request: ${showReq(c)}`);
      }
      last = showReq(c);
      // Every later case would fail for the same reason: stop here.
      if (out.violations.some((v) => v.kind === 'tier_down')) throw new TierDown(last);
    }),
    { numRuns: o.runs, seed, endOnFailure: true },
  );
  const durationMs = Math.round(performance.now() - started);
  const figures: Figures = { surface: s.name, cases: o.runs, seed, durationMs, statuses, failures, known };
  if (first.failed && !(first.errorInstance instanceof TierDown))
    t.fail(`${s.name}: the fuzz run itself failed (seed ${seed}): ${String(first.errorInstance)}`);
  for (const [sig, example] of examples) t.comment(`${s.name}: ${sig.split(':')[0]}: ${example.slice(0, 1500)}`);
  const failed = FAILURE_CLASSES.filter((k) => failures[k]);
  if (failed.length && !failures.tier_down) {
    const replay = await fc.check(
      fc.asyncProperty(s.cases, async (c) => {
        const { answer, violations } = await oneCase(s, c, previous);
        previous = shortly(c, answer);
        if (violations.length) throw new Error(violations.map((v) => `${v.kind}: ${v.message}`).join('; '));
      }),
      { numRuns: o.runs, seed },
    );
    if (replay.failed) {
      const r = replay.counterexample![0];
      figures.counterexample = showReq(r);
      figures.request = { ...r, body: r.body?.toString('base64') };
      figures.replay = `FUZZ_SEED=${seed} FUZZ_RUNS=${o.runs}`;
      t.comment(
        `${s.name}: smallest failing case after ${replay.numShrinks} shrinks (replay: ${figures.replay}):\n` +
          `  ${figures.counterexample}\n  ${String(replay.errorInstance).slice(0, 1500)}`,
      );
    }
  } else if (failures.tier_down) {
    figures.counterexample = last;
    figures.replay = `FUZZ_SEED=${seed} FUZZ_RUNS=${o.runs}`;
  }
  saveFigures(figures);
  t.comment(
    `${s.name}: ${o.runs} cases in ${(durationMs / 1000).toFixed(1)} s, seed ${seed}, ` +
      `answers ${JSON.stringify(statuses)}; ` +
      `slowest ${Math.round(slowest.ms)} ms: ${slowest.req.slice(0, 300)}`,
  );
  t.same(failures, {}, `${s.name}: no failure in ${o.runs} cases (seed ${seed})`);
  for (const k of KNOWN)
    if (known[k.id]) t.equal(known[k.id], 0, `${s.name}: ${known[k.id]} cases of ${k.id}`, { todo: k.reason });
  return figures;
}

/** After a run: every tier still the same process, and ready. */
export async function stillReady(t: Test, tiers: Tier[]): Promise<void> {
  for (const tier of tiers) {
    t.equal(tier.proc.exitCode ?? tier.proc.signalCode, null, `${tier.url}: process ${tier.proc.pid} still running`);
    const r = await fetch(`${tier.url}/readyz`).catch((e: unknown) => ({ status: String(e) }));
    t.equal(r.status, 200, `${tier.url}/readyz answers 200`);
  }
}

/** One ingest process (both surfaces) with every limit out of the way: fuzzing is not load. */
export async function ingestTier(t: Teardowns): Promise<Tier> {
  const tier = await startTier(t, 'ingest', {
    INGEST_PROCESSES: '1',
    INGEST_RATE_LIMIT_PER_MIN: '100000000',
    EVENTS_BATCHES_PER_MIN: '100000000',
    EVENTS_BACKFILLS_PER_MIN: '100000000',
    EVENTS_READS_PER_MIN: '100000000',
  });
  // Before startTier's SIGKILL: a clean stop.
  t.teardown(() => tier.stop('SIGTERM'));
  return tier;
}

export async function apiTier(t: Teardowns, env: Record<string, string> = {}): Promise<Tier> {
  const tier = await startApi(t, {
    API_READS_PER_MIN: '100000000',
    API_WRITES_PER_MIN: '100000000',
    API_BULK_IMPORTS_PER_HOUR: '100000000',
    ...env,
  });
  t.teardown(() => tier.stop('SIGTERM'));
  return tier;
}

/**
 * Counts the messages stored in the EVENTS stream on some subjects from now on (a consumer that
 * never reads; one per subject, as nats-server 2.9 takes one filter per consumer).
 */
export async function streamCount(t: Teardowns, subjects: string[]): Promise<() => Promise<number>> {
  const nc = await connect({ servers: urls.NATS_URL, name: 'test-fuzz' });
  t.teardown(() => nc.close());
  const jsm = await nc.jetstreamManager();
  const names: string[] = [];
  for (const subject of subjects) {
    const name = `test-fuzz-${nuid.next()}`;
    await jsm.consumers.add('EVENTS', {
      name,
      filter_subject: subject,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.New,
      headers_only: true,
      // Removed by the teardown; the threshold only covers a test process that died (a long run lasts hours).
      inactive_threshold: nanos(24 * 3600_000),
    });
    t.teardown(() => jsm.consumers.delete('EVENTS', name).catch(() => {}));
    names.push(name);
  }
  return async () => {
    let n = 0;
    for (const name of names) n += (await jsm.consumers.info('EVENTS', name)).num_pending;
    return n;
  };
}

/**
 * Everything a workspace holds in some tables, as one fingerprint per table (row count and a hash
 * of the rows' text): a refused request must leave every one as it was. A table given as
 * `name (col, …)` is read through those columns only, leaving out what a background process writes
 * (a webhook dispatcher's failure marks); `… WHERE <condition on x>` keeps only the rows a request
 * writes itself, leaving out those a background process adds (deliveries fanned out from events).
 *
 * The rows' text is hashed again only for a table whose row versions changed since the last
 * snapshot (their count, and a sum over each row's xmin and ctid, which any insert, update or
 * delete changes): hashing every row's text at every case made a long run slow down as the
 * workspace grew (0.13-0.17 s a snapshot for a table of 15,000 rows, against 7 ms for the versions).
 */
export function tenantLedger(
  tenantId: string,
  tables: readonly string[],
  stores?: (a: Answer) => boolean,
): Ledger<Record<string, string>> {
  const parts = tables.map((spec) => {
    const [, name, columns, where] = /^(\w+)(?:\s*\(([^)]+)\))?(?:\s+WHERE\s+(.+))?$/.exec(spec) ?? [];
    if (!name) throw new Error(`not a table: ${spec}`);
    const rows = `FROM ${name} x WHERE x.tenant_id = $1${where ? ` AND (${where})` : ''}`;
    const row = columns
      ? `(${columns
          .split(',')
          .map((c) => `x.${c.trim()}`)
          .join(', ')})::text`
      : 'x::text';
    return {
      name,
      versions:
        `(SELECT count(*) || ':' || coalesce(sum(hashtext(x.xmin::text || x.ctid::text)::bigint), 0) ` +
        `${rows}) AS ${name}`,
      content:
        `(SELECT count(*) || ':' || coalesce(md5(string_agg(${row}, ',' ORDER BY ${row})), '') ` +
        `${rows}) AS ${name}`,
    };
  });
  const versionsQuery = `SELECT ${parts.map((p) => p.versions).join(', ')}`;
  let versions: Record<string, string> = {};
  let content: Record<string, string> = {};
  const read = async (query: string) => (await db().unsafe<Array<Record<string, string>>>(query, [tenantId]))[0];
  return new Ledger(async () => {
    const now = await read(versionsQuery);
    const changed = parts.filter((p) => now[p.name] !== versions[p.name]);
    if (changed.length) content = { ...content, ...(await read(`SELECT ${changed.map((p) => p.content).join(', ')}`)) };
    versions = now;
    return content;
  }, stores);
}
