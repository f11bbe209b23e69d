import { execFile, fork, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { ROOT, type StackProfile, type StackUrls, tierEntry } from '../infra/stack.js';
import { freePort } from '../infra/proc.js';
import { sampleSum } from '../lib/prometheus.js';

export { freePort };

const execFileP = promisify(execFile);
export const dist = (p: string) => path.join(ROOT, 'dist', p);

let tierDist = path.join(ROOT, 'dist');
/**
 * Runs the tiers from a copy of dist/ taken at the start, so that a rebuild of the working tree
 * during the run cannot swap modules under a tier that is restarting a worker. The copy lives
 * under bench/ so that node_modules still resolves from the repository root.
 */
export function snapshotDist(): void {
  const to = path.join(ROOT, 'bench', '.run', 'dist');
  fs.rmSync(to, { recursive: true, force: true });
  fs.cpSync(path.join(ROOT, 'dist'), to, { recursive: true, filter: (src) => !src.endsWith('.map') });
  tierDist = to;
}
export const say = (line: string) => process.stderr.write(`bench ${new Date().toISOString().slice(11, 19)}: ${line}\n`);

/** Every process this run started, so that an error or Ctrl-C never leaves one behind. */
const started = new Set<ChildProcess>();

function killTree(p: ChildProcess, signal: NodeJS.Signals): void {
  if (p.pid === undefined || p.exitCode !== null || p.signalCode !== null) return;
  try {
    // Tiers run in their own process group (detached) so their forked workers go with them.
    process.kill(-p.pid, signal);
  } catch {
    try {
      p.kill(signal);
    } catch {
      /* already gone */
    }
  }
}

export function killAllStarted(): void {
  for (const p of started) killTree(p, 'SIGKILL');
}

process.on('exit', killAllStarted);

/**
 * Steps that must run however the run ends (a server the benchmark stopped must be started
 * again), also on Ctrl-C, where no finally block runs. Each runs once: the scenario's finally
 * and the signal handler share the same promise.
 */
const undoSteps = new Set<() => Promise<void>>();

export function mustUndo(step: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  const once = () => {
    running ??= step().finally(() => undoSteps.delete(once));
    return running;
  };
  undoSteps.add(once);
  return once;
}

export function undoPending(): boolean {
  return undoSteps.size > 0;
}

export async function runUndo(): Promise<void> {
  for (const step of [...undoSteps])
    await step().catch((err: unknown) => say(`cleanup failed: ${(err as Error)?.message ?? String(err)}`));
}

export class BenchError extends Error {}

/** Runs `node dist/infra/cli.js up --profile X`: starts only what is not running yet. */
export async function stackUp(profile: StackProfile): Promise<void> {
  const p = spawn(process.execPath, [dist('infra/cli.js'), 'up', '--profile', profile.name], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  started.add(p);
  const code = await new Promise<number | null>((r) => p.once('exit', r));
  started.delete(p);
  if (code === 0) return;
  // A failing definition step should not stop a benchmark of servers that are up and answering.
  const up = await Promise.all([profile.natsPort, profile.chHttpPort, profile.pgPort].map(portOpen));
  if (up.every(Boolean))
    say(`warning: infra/cli.js up exited with ${code}, but NATS, ClickHouse and PostgreSQL answer; going on`);
  else throw new BenchError(`the ${profile.name} stack did not come up (infra/cli.js up exited with ${code})`);
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

export async function node(script: string, args: string[], env: Record<string, string>): Promise<string> {
  try {
    const { stdout } = await execFileP(process.execPath, [dist(script), ...args], {
      env: { ...process.env, ...env },
      maxBuffer: 64 * 1024 * 1024,
    });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new BenchError(`${script} ${args.join(' ')} failed: ${(e.stderr || e.message).trim()}`);
  }
}

export interface Tier {
  name: string;
  url: string;
  proc: ChildProcess;
  pid: number;
  startedMs: number;
  readyMs: number;
  /** The last few KB the tier wrote to stdout and stderr. */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts the tier's entry (infra/stack.ts `tierEntry`) on a free port in its own process group and waits for
 * GET /readyz = 200. A tier that exits or stays unready fails the run with its last output.
 */
export async function startTier(
  name: 'ingest' | 'processors' | 'core-api',
  portEnv: string,
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<Tier> {
  // The file the launchers start (a bundle for some tiers); a build from before the bundles has main.js only.
  const entry = path.join(tierDist, name, path.basename(tierEntry(name)));
  const script = fs.existsSync(entry) ? entry : path.join(tierDist, name, 'main.js');
  if (!fs.existsSync(script)) throw new BenchError(`${path.relative(ROOT, script)} does not exist (build it first)`);
  const port = await freePort();
  let out = '';
  const t0 = performance.now();
  // e.g. BENCH_INGEST_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile a tier under load.
  const nodeArgs = (process.env[`BENCH_${name.toUpperCase().replace('-', '_')}_NODE_ARGS`] ?? '')
    .split(' ')
    .filter(Boolean);
  const proc = spawn(process.execPath, [...nodeArgs, script], {
    env: { ...process.env, LOG_LEVEL: 'warn', ...env, [portEnv]: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  started.add(proc);
  // e.g. BENCH_TIER_LOG_DIR=/tmp/tiers to keep each tier's whole output (with --trace-gc above).
  const logDir = process.env.BENCH_TIER_LOG_DIR;
  const logFile = logDir ? fs.createWriteStream(path.join(logDir, `${name}-${port}.log`)) : undefined;
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-8000);
    logFile?.write(d);
  };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.exitCode !== null || proc.signalCode !== null)
      throw new BenchError(`${name} exited during start (${proc.exitCode ?? proc.signalCode}):\n${out.trim()}`);
    const ok = await fetch(`${url}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      killTree(proc, 'SIGKILL');
      throw new BenchError(`${name} was not ready on ${url}/readyz within ${timeoutMs} ms:\n${out.trim()}`);
    }
    await sleep(100);
  }
  const readyMs = Math.round(performance.now() - t0);
  return {
    name,
    url,
    proc,
    pid: proc.pid!,
    startedMs: t0,
    readyMs,
    output: () => out,
    async stop() {
      // The tier's own signal handling stops its workers; the group is only for the SIGKILL fallback.
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const t = setTimeout(() => killTree(proc, 'SIGKILL'), 20_000);
      await exited;
      clearTimeout(t);
      started.delete(proc);
      if (out.includes('"level":50') || out.includes('"level":60'))
        say(`${name} logged errors; last output:\n${out.trim().split('\n').slice(-5).join('\n')}`);
    },
  };
}

/** Forks a load process (bench/load.js or bench/publish.js), hands it its config, returns its result. */
export async function runChild<C, R>(script: string, config: C, onStart?: (pid: number) => void): Promise<R> {
  const child = fork(dist(script), [], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    // e.g. BENCH_CHILD_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the load generator.
    execArgv: ['--max-old-space-size=2048', ...(process.env.BENCH_CHILD_NODE_ARGS?.split(' ').filter(Boolean) ?? [])],
  });
  started.add(child);
  onStart?.(child.pid!);
  try {
    return await new Promise<R>((resolve, reject) => {
      child.once('message', (m: { result?: R; error?: string }) =>
        m.error ? reject(new BenchError(`${script}: ${m.error}`)) : resolve(m.result!),
      );
      child.once('exit', (code) => reject(new BenchError(`${script} exited with ${code} before reporting`)));
      child.send(config as object);
    });
  } finally {
    started.delete(child);
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class ClickHouse {
  constructor(private readonly url: string) {}

  async query(sql: string): Promise<string> {
    const res = await fetch(this.url, { method: 'POST', body: sql });
    const text = await res.text();
    if (!res.ok) throw new BenchError(`ClickHouse: ${text.trim().slice(0, 500)}`);
    return text;
  }

  async number(sql: string): Promise<number> {
    return Number((await this.query(sql)).trim());
  }

  /**
   * Rows in csp.events from the parts' metadata: costs ClickHouse nothing, so it can be polled
   * every 100 ms during a run without taking CPU from what is measured.
   */
  eventsRows(): Promise<number> {
    return this.number("SELECT sum(rows) FROM system.parts WHERE database = 'csp' AND table = 'events' AND active");
  }

  /**
   * Waits until no merge has run for three seconds in a row, or gives up after maxWaitS and says
   * so. After the suite, ClickHouse merged its tables' parts through the next load at 7 % of a
   * core, below what `waitQuiet` calls busy, and surface A measured that too.
   */
  async waitMerges(say: (line: string) => void, maxWaitS: number): Promise<void> {
    const deadline = Date.now() + maxWaitS * 1000;
    let idle = 0;
    let announced = false;
    while (idle < 3) {
      const merges = await this.number('SELECT count() FROM system.merges');
      idle = merges === 0 ? idle + 1 : 0;
      if (idle === 0 && !announced) {
        say(`ClickHouse is merging parts (${merges} merges); waiting up to ${maxWaitS} s for it to finish`);
        announced = true;
      }
      if (Date.now() > deadline) {
        say(`ClickHouse still merging after ${maxWaitS} s; measuring anyway (its CPU is in the report)`);
        return;
      }
      if (idle < 3) await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

export type { StackUrls };

/** The garbage collector's share of a tier's work over a run (`watchGc`). */
export interface GcDuring {
  /** Seconds of collection pauses and steps, summed over the tier's processes. */
  seconds: number;
  /** Full (mark-compact) collections a second, all processes together. */
  fullPerSec: number;
}

/**
 * Starts watching a tier's garbage collection through its /metrics (prom-client's
 * `nodejs_gc_duration_seconds`, summed over a supervised tier's processes); the function returned
 * gives what it did since, or undefined where the figures cannot be read. A process whose
 * collections take a tenth of its CPU instead of a hundredth is a cause of two runs' difference
 * that the CPU per event alone does not name (bench/RESULTS.md, 3 Dec).
 */
export async function watchGc(tier: Tier): Promise<() => Promise<GcDuring | undefined>> {
  const read = async () => {
    try {
      const text = await (await fetch(`${tier.url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
      return {
        seconds: sampleSum(text, 'nodejs_gc_duration_seconds_sum'),
        full: sampleSum(text, 'nodejs_gc_duration_seconds_count', { kind: 'major' }),
        at: performance.now(),
      };
    } catch {
      return undefined;
    }
  };
  const start = await read();
  return async () => {
    const end = await read();
    if (!start || !end) return undefined;
    return { seconds: end.seconds - start.seconds, fullPerSec: (end.full - start.full) / ((end.at - start.at) / 1000) };
  };
}
