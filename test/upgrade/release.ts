import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from '../../infra/stack.js';

/**
 * The two versions of an upgrade, each a built tree of its own that runs the `dev` profile on one
 * shared data folder, as an operator's two releases would run on one machine's data:
 *
 * - the previous release (`test/upgrade/FROM`, or UPGRADE_FROM): `git archive` of that commit into
 *   `.data/upgrade/<commit>/`, the packages of this checkout linked when its lock file installs the
 *   same versions of every package it names (else its own `npm ci`), then its own `npm run build`;
 *   kept for the next run (`.built` names the commit);
 * - this checkout (HEAD in CI): its working tree and its `dist/` (npm run test:upgrade builds it
 *   first) copied into `.data/upgrade/head/`, packages linked.
 *
 * Both trees' `.data` is a link to `.data/upgrade/data/`: every path a version derives from its
 * root (`.data/dev/…`: the servers' data, pid files, the integration token key) is the same folder.
 * A copy and not this checkout itself, because a tree's data folder is `<its root>/.data/<profile>`
 * and this checkout's `.data/dev` belongs to its own `npm start`. An old version knows no other
 * way: it must be run as it was released.
 */

export interface Release {
  /** What the report calls it: a short commit, or `HEAD`. */
  label: string;
  root: string;
}

export const UPGRADE_DIR = path.join(ROOT, '.data', 'upgrade');
export const DATA_DIR = path.join(UPGRADE_DIR, 'data');
export const LOG_DIR = path.join(UPGRADE_DIR, 'logs');

type Say = (line: string) => void;

const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();

/** The commit to upgrade from: UPGRADE_FROM, else the first line of test/upgrade/FROM that is not a comment. */
export function fromCommit(given = ''): string {
  const line =
    given ||
    fs
      .readFileSync(path.join(ROOT, 'test', 'upgrade', 'FROM'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l && !l.startsWith('#'));
  if (!line) throw new Error('test/upgrade/FROM names no commit');
  return git('rev-parse', '--verify', `${line}^{commit}`);
}

/**
 * The newest commit before HEAD that changed what an upgrade must carry over: a PostgreSQL
 * migration, a stream or consumer definition, or the ClickHouse DDL.
 */
export function lastSchemaCommit(): string {
  return git(
    'log',
    '-1',
    '--format=%H',
    'HEAD~1',
    '--',
    'core-api/db/migrations',
    'infra/streams.ts',
    'infra/clickhouse/schema.sql',
  );
}

/** Whether this checkout's node_modules holds every package of `lockFile` at the version it pins. */
function samePackages(lockFile: string): boolean {
  type Lock = { packages?: Record<string, { version?: string; integrity?: string }> };
  const theirs = JSON.parse(fs.readFileSync(lockFile, 'utf8')) as Lock;
  const ours = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as Lock;
  for (const [name, p] of Object.entries(theirs.packages ?? {})) {
    if (name === '') continue;
    const o = ours.packages?.[name];
    if (!o || o.version !== p.version || o.integrity !== p.integrity) return false;
  }
  return true;
}

/**
 * `cmd <args>` as a file and arguments to spawn without the hooks tap puts into NODE_OPTIONS of
 * every process a test spawns (test/helpers/stack.ts plainNode): the shell drops them and becomes
 * the command (`exec`: the same pid, so signals reach it).
 */
export function plain(cmd: string, args: string[]): [string, string[]] {
  return ['/bin/sh', ['-c', 'unset NODE_OPTIONS; exec "$0" "$@"', cmd, ...args]];
}

/** An environment without the test runner's and npm's settings. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(TAP|_TAP|npm_|NODE_OPTIONS$|TEST_)/i.test(k)),
  );
  return { ...env, ...extra };
}

/** The previous release, extracted and built (reused when already built). */
export function buildRelease(commit: string, say: Say): Release {
  const label = commit.slice(0, 7);
  const root = path.join(UPGRADE_DIR, commit.slice(0, 12));
  const stamp = path.join(root, '.built');
  if (fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8').trim() === commit) {
    say(`${label}: built already in ${path.relative(ROOT, root)}`);
    linkData(root);
    return { label, root };
  }
  const t0 = Date.now();
  fs.rmSync(root, { recursive: true, force: true });
  fs.mkdirSync(root, { recursive: true });
  execFileSync('/bin/sh', ['-c', `git archive ${commit} | tar -x -C '${root}'`], { cwd: ROOT });
  if (samePackages(path.join(root, 'package-lock.json'))) {
    fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(root, 'node_modules'));
    say(`${label}: this checkout's packages hold every version its lock file pins (linked)`);
  } else {
    say(`${label}: npm ci (its lock file pins other versions)`);
    execFileSync(...plain('npm', ['ci', '--no-audit', '--no-fund']), {
      cwd: root,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: cleanEnv(),
    });
  }
  execFileSync(...plain('npm', ['run', '-s', 'build']), {
    cwd: root,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: cleanEnv(),
  });
  linkData(root);
  fs.writeFileSync(stamp, `${commit}\n`);
  say(`${label}: extracted and built in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return { label, root };
}

/** This checkout as the new release: its files and its build, copied. */
export function checkoutRelease(say: Say): Release {
  const t0 = Date.now();
  const root = path.join(UPGRADE_DIR, 'head');
  fs.rmSync(root, { recursive: true, force: true });
  fs.mkdirSync(root, { recursive: true });
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT })
    .toString()
    .split('\0')
    // node_modules may be a link git does not ignore (`node_modules/` matches folders only).
    .filter((f) => f && f !== 'node_modules' && fs.existsSync(path.join(ROOT, f)));
  for (const f of files) fs.cpSync(path.join(ROOT, f), path.join(root, f), { recursive: true });
  fs.cpSync(path.join(ROOT, 'dist'), path.join(root, 'dist'), { recursive: true });
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(root, 'node_modules'));
  linkData(root);
  say(`HEAD: this checkout and its build copied in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return { label: 'HEAD', root };
}

function linkData(root: string): void {
  fs.mkdirSync(DATA_DIR, { recursive: true });
  const link = path.join(root, '.data');
  fs.rmSync(link, { recursive: true, force: true });
  fs.symlinkSync(DATA_DIR, link);
}

/**
 * Runs one of a release's own commands (`infra/cli.js up`, `bootstrap.js`, …) to its end: its
 * standard output; `say` gets each line of its standard error (infra's progress).
 */
export function runIn(
  r: Release,
  script: string,
  args: string[],
  env: Record<string, string> = {},
  say?: (line: string) => void,
): string {
  const out = spawnSync(...plain(process.execPath, [path.join(r.root, 'dist', script), ...args]), {
    cwd: r.root,
    env: cleanEnv({ STACK_PROFILE: 'dev', ...env }),
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (out.status !== 0)
    throw new Error(`${r.label} ${script} ${args.join(' ')} failed (${out.status}):\n${out.stdout}\n${out.stderr}`);
  if (say) for (const line of out.stderr.split('\n').filter(Boolean)) say(`${r.label} ${line}`);
  return out.stdout;
}

export type TierName = 'ingest' | 'processors' | 'core-api';

/** A running tier process of a release. */
export interface TierProcess {
  name: TierName;
  release: Release;
  child: ChildProcess;
  log: string;
  exited: Promise<number | null>;
}

/** The file a release starts a tier from: its bundle when its build makes one, else main.js. */
export function tierEntry(r: Release, tier: TierName): string {
  const bundle = path.join(r.root, 'dist', tier, 'bundle.js');
  return tier !== 'ingest' && fs.existsSync(bundle) ? bundle : path.join(r.root, 'dist', tier, 'main.js');
}

/** Starts one tier of a release with `env`, its output in .data/upgrade/logs/<phase>-<tier>.log. */
export function startTier(r: Release, tier: TierName, env: Record<string, string>, phase: string): TierProcess {
  fs.mkdirSync(LOG_DIR, { recursive: true });
  const log = path.join(LOG_DIR, `${phase}-${tier}.log`);
  const out = fs.openSync(log, 'w');
  const child = spawn(...plain(process.execPath, [tierEntry(r, tier)]), {
    cwd: r.root,
    env: cleanEnv(env),
    stdio: ['ignore', out, out],
    detached: true,
  });
  fs.closeSync(out);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { name: tier, release: r, child, log, exited };
}

/** SIGTERM (a tier drains and exits), SIGKILL after `graceMs`; the exit code, null when it had to be killed. */
export async function stopTier(p: TierProcess, graceMs = 30_000): Promise<number | null> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return p.child.exitCode;
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), graceMs);
  const code = await p.exited;
  clearTimeout(timer);
  return code;
}

export function tail(file: string, lines = 20): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
