import { type ChildProcessByStdio, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { ROOT } from '../infra/stack.js';
import { ALONE, LONGEST_FIRST, SERIAL, SUITE_STARTED } from './suites.js';

/**
 * node dist/test/run.js [--unit] [pattern…]
 * Runs test files from dist/, each in a node process of its own, and prints their TAP output as
 * tap's runner does (a file's output as one subtest, then `ok N - file # time=…`):
 * - with `--unit`, the fast layer, which needs no server: test/unit/ and the architecture test,
 *   TEST_JOBS (default 4) at a time;
 * - otherwise the stack tests of one profile against its running stack: the files that only need
 *   their own workspaces side by side, TEST_JOBS (default 3: on two cores more starve each other's
 *   tier start-ups) at a time, the longest first (LONGEST_FIRST); beside them the serial group
 *   (test/suites.ts) one at a time on the `serial` stack, the test stack's twin, which the run
 *   brings up; last, the files of the serial group that need the whole machine (ALONE), one at a
 *   time on the test stack with nothing beside them.
 *   TEST_STACK_PROFILE=cluster runs test/cluster/ instead, its serial files after the others.
 * A pattern keeps the files whose path contains it (`events/dedup`, `test/health/`,
 * `dist/test/ingest/body.test.js` alike); with none, every file of the suite.
 *
 * Each file runs as `node --enable-source-maps --liftoff-only <file>`: the file's own `tap` import prints TAP and
 * sets the exit code. tap's runner would add two import hooks to every test process (its process
 * info and its module mocks, neither used here), which about doubled the CPU of a test process's
 * start-up (1.9 against 0.8 CPU-seconds for a small file); over 150 files that is minutes of a
 * two-core machine. A file that outlives its timeout (TAP_TIMEOUT, which the file's tap enforces
 * itself) by a minute is killed and fails.
 */

const unit = process.argv.includes('--unit');
const profile = process.env.TEST_STACK_PROFILE ?? 'test';
const jobs = Number(process.env.TEST_JOBS ?? (unit ? 4 : 3));
const timeoutS = Number(process.env.TAP_TIMEOUT ?? (profile === 'cluster' ? 1800 : 600));
const patterns = process.argv
  .slice(2)
  .filter((a) => !a.startsWith('-'))
  .map((p) => p.replace(/^dist\//, '').replace(/\.(js|ts)$/, ''));

/** Folders of test/ that are not the stack suite: the fast layer and the suites run on their own. */
const OTHER =
  profile === 'cluster'
    ? []
    : ['test/unit', 'test/cluster', 'test/newcomer', 'test/upgrade', 'test/clickhouse-current'];

function testFiles(dir: string, skip: string[]): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(ROOT, 'dist', dir), { withFileTypes: true })) {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory() && !skip.includes(rel)) out.push(...testFiles(rel, skip));
    else if (e.isFile() && e.name.endsWith('.test.js') && rel !== 'test/architecture.test.js') out.push(rel);
  }
  return out.sort();
}

const suite = unit
  ? [...testFiles('test/unit', []), 'test/architecture.test.js']
  : testFiles(profile === 'cluster' ? 'test/cluster' : 'test', OTHER);
const selected = suite.filter((f) => patterns.length === 0 || patterns.some((p) => f.replace(/\.js$/, '').includes(p)));
if (selected.length === 0) {
  console.error(`no test file of the ${unit ? 'fast layer' : `${profile} suite`} matches ${patterns.join(', ')}`);
  process.exit(1);
}
const isSerial = (f: string) => !unit && SERIAL[f.replace(/\.js$/, '.ts')] !== undefined;
const rank = (f: string) => {
  const i = LONGEST_FIRST.indexOf(f.replace(/\.js$/, '.ts'));
  return i < 0 ? LONGEST_FIRST.length : i;
};
const concurrent = selected.filter((f) => !isSerial(f)).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
/** The stack the serial group runs on beside the concurrent group; none: after it, on the same stack. */
const twin = !unit && profile === 'test' ? 'serial' : undefined;
const isAlone = (f: string) => twin === undefined || ALONE.has(f.replace(/\.js$/, '.ts'));
const serial = selected.filter((f) => isSerial(f) && !isAlone(f));
const alone = selected.filter((f) => isSerial(f) && isAlone(f));

interface Result {
  file: string;
  ok: boolean;
  ms: number;
  output: string;
}

/**
 * The teardowns of the tiers the run shares (test/core-api/_helpers.ts `sharedApi`): started before
 * the first file, stopped after the last; their addresses reach the files in the environment.
 */
const sharedTeardowns: Array<() => unknown> = [];

/** The process groups of the files running now. */
const running = new Set<number>();
function killGroup(group: number): void {
  try {
    process.kill(-group, 'SIGKILL');
  } catch {
    // nothing left in it
  }
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, async () => {
    for (const group of running) killGroup(group);
    for (const fn of sharedTeardowns) await fn();
    process.exit(130);
  });
}

/** Everything a child writes on stdout and stderr, in the order it came. */
function collect(child: ChildProcessByStdio<null, Readable, Readable>): string[] {
  const chunks: string[] = [];
  child.stdout.setEncoding('utf8').on('data', (d: string) => chunks.push(d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => chunks.push(d));
  return chunks;
}

/** Runs one file; its output is kept and printed whole when it ends, so files never interleave. */
function runFile(file: string, stack: string, alone: boolean): Promise<Result> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TEST_STACK_PROFILE: stack,
    TAP_TIMEOUT: String(timeoutS),
    // No other file runs beside it on its stack (the serial group).
    ...(alone ? { TEST_ALONE: '1' } : {}),
  };
  // The shared core-api serves the run's own stack only.
  if (stack !== profile) delete env.TEST_SHARED_API;
  const started = performance.now();
  // A process group of its own: whatever the file started and left behind (a tier it never stopped
  // because it crashed or was killed) is killed with it when it ends. The stack's servers, which
  // files restart through infra/cli.js, start in sessions of their own and stay.
  // --liftoff-only: a test process's first fetch compiles undici's HTTP parser (WebAssembly), and
  // V8 then optimizes it again on background threads, about 0.2 CPU-seconds that a test file never
  // earns back (1.41 against 1.19 CPU-s for a small file); the baseline compiler's code is enough
  // for a test's requests. The tiers the files start run as they do in production.
  const child = spawn(process.execPath, ['--enable-source-maps', '--liftoff-only', path.join('dist', file)], {
    cwd: ROOT,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  const group = child.pid!;
  running.add(group);
  const chunks = collect(child);
  let killed = false;
  const timer = setTimeout(
    () => {
      killed = true;
      killGroup(group);
    },
    (timeoutS + 60) * 1000,
  );
  // On exit, what it left behind goes too (it might hold the output pipes open).
  child.on('exit', () => killGroup(group));
  return new Promise((resolve) =>
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(group);
      const ms = performance.now() - started;
      if (killed) chunks.push(`\n# killed: still running ${timeoutS + 60} s after it started\n`);
      else if (signal) chunks.push(`\n# ended by ${signal}\n`);
      resolve({ file: `dist/${file}`, ok: code === 0 && !killed, ms, output: chunks.join('') });
    }),
  );
}

/** Each failed assertion of the run with the diagnostic block under it: printed again at the end. */
const failures: string[] = [];

/** The `not ok` lines of a file's output (but a todo's or a skip's), each with at most 30 lines of its YAML block. */
function notOks(group: string, output: string): string[] {
  const found: string[][] = [];
  let open: { indent: string; lines: string[] } | undefined;
  for (const line of output.split('\n')) {
    const m = /^(\s*)not ok \d+ - /.exec(line);
    if (m) {
      open = / # (TODO|SKIP)\b/.test(line) ? undefined : { indent: m[1], lines: [`[${group}]     ${line}`] };
      if (open) found.push(open.lines);
    } else if (open && line.startsWith(`${open.indent}  `)) {
      if (open.lines.length < 30) open.lines.push(`    ${line}`);
      if (/^\s*\.\.\.$/.test(line)) open = undefined;
    } else open = undefined;
  }
  return found.map((lines) => lines.join('\n'));
}

/** The assertion counts of every file, from the `# { total: …, pass: … }` line its tap prints last. */
const counts: Record<string, number> = {};
function addCounts(output: string): void {
  const line = output.match(/^# \{ total: .*\}$/gm)?.at(-1);
  for (const [, key, n] of line?.matchAll(/(\w+): (\d+)/g) ?? []) counts[key] = (counts[key] ?? 0) + Number(n);
}

let counter = 0;
function report(group: string, r: Result): void {
  counter += 1;
  addCounts(r.output);
  const indented = r.output.replace(/\n$/, '').replace(/^(?=.)/gm, '    ');
  const line = `${r.ok ? 'ok' : 'not ok'} ${counter} - ${r.file} # time=${r.ms.toFixed(3)}ms`;
  process.stdout.write(`# Subtest: ${r.file}\n${indented}\n${line}\n\n`);
  if (!r.ok) {
    const found = notOks(group, r.output);
    const tail = r.output.trimEnd().split('\n').slice(-15).join('\n');
    failures.push(
      ...(found.length > 0
        ? found
        : [`[${group}] ${line}: no failed assertion, it crashed or timed out; it ended:\n${tail}`]),
    );
  }
}

/** Runs `files` `j` at a time against `stack`; resolves to whether all passed. */
async function runGroup(group: string, files: string[], j: number, stack = profile): Promise<boolean> {
  let next = 0;
  let allOk = true;
  const worker = async () => {
    while (next < files.length) {
      const r = await runFile(files[next++], stack, j === 1);
      report(group, r);
      allOk &&= r.ok;
    }
  };
  await Promise.all(Array.from({ length: Math.min(j, files.length) }, worker));
  return allOk;
}

const what = unit ? 'the fast layer' : `the ${profile} stack suite`;
if (!unit) {
  const { startApi } = await import('./core-api/_helpers.js');
  const api = await startApi({ teardown: (fn) => sharedTeardowns.push(fn) });
  process.env.TEST_SHARED_API = api.url;
}

/**
 * `infra/cli.js up` for the twin stack, which starts what is not running yet; resolves to whether
 * it is up. Its output goes into the failures when it is not.
 */
function twinUp(stack: string): Promise<boolean> {
  const child = spawn(process.execPath, [path.join('dist', 'infra', 'cli.js'), 'up', '--profile', stack], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const chunks = collect(child);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      if (code !== 0) failures.push(`[serial] the ${stack} stack did not come up:\n${chunks.join('')}`);
      resolve(code === 0);
    }),
  );
}

console.log(
  `TAP version 14\n# ${what}: ${concurrent.length} files ${jobs} at a time` +
    // Without a twin every serial file is in `alone`, so `serial` is empty.
    (serial.length > 0 ? `, beside them ${serial.length} serial on the ${twin} stack` : '') +
    (alone.length > 0 ? `, then ${alone.length} alone` : '') +
    (serial.length + alone.length > 0 ? ' (test/suites.ts)' : ''),
);
const started = Date.now();
// When the whole suite of the test stack starts: test:clickhouse-current reads the statements logged since.
if (!unit && profile === 'test' && patterns.length === 0)
  fs.writeFileSync(path.join(ROOT, SUITE_STARTED), String(Math.floor(started / 1000)));
const groupsOk = await Promise.all([
  runGroup('concurrent', concurrent, jobs),
  twin && serial.length > 0 ? twinUp(twin).then((up) => up && runGroup('serial', serial, 1, twin)) : true,
]);
const lastOk = await runGroup('alone', alone, 1);
for (const fn of sharedTeardowns) await fn();
const seconds = Math.round((Date.now() - started) / 1000);
console.log(`1..${counter}\n# assertions ${JSON.stringify(counts)}`);
if (!groupsOk.every(Boolean) || !lastOk) {
  // CI keeps the end of the output: the failures again, whichever group they were in.
  console.log(`\n# FAILED: ${what}, ${seconds} s; what failed:\n${failures.join('\n')}`);
  process.exit(1);
}
console.log(`# ${what}: all ${selected.length} files passed in ${seconds} s`);
