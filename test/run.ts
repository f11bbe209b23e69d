import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../infra/stack.js';
import { SERIAL } from './suites.js';

/**
 * node dist/test/run.js [pattern…] [tap options…]
 * Runs the stack tests of one profile against its running stack: the files that only need their
 * own workspaces side by side (tap --jobs), then the serial group (test/suites.ts) one at a time.
 * A pattern keeps the files whose path contains it (`events/dedup`, `test/health/`,
 * `dist/test/ingest/body.test.js` alike); with none, every file of the suite. Arguments starting
 * with `-` go to tap. TEST_STACK_PROFILE=cluster runs test/cluster/ instead; TEST_JOBS sets how many
 * files run at once (default 3: on two cores more starve each other's tier start-ups).
 */

const profile = process.env.TEST_STACK_PROFILE ?? 'test';
const jobs = Number(process.env.TEST_JOBS ?? 3);
const args = process.argv.slice(2);
const tapArgs = args.filter((a) => a.startsWith('-'));
const patterns = args.filter((a) => !a.startsWith('-')).map((p) => p.replace(/^dist\//, '').replace(/\.(js|ts)$/, ''));

/** Folders of test/ that are not this suite: the fast layer and the suites run on their own. */
const OTHER = profile === 'cluster' ? [] : ['test/unit', 'test/cluster', 'test/newcomer'];
const base = profile === 'cluster' ? 'test/cluster' : 'test';

function testFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(ROOT, 'dist', dir), { withFileTypes: true })) {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory() && !OTHER.includes(rel)) out.push(...testFiles(rel));
    else if (e.isFile() && e.name.endsWith('.test.js') && rel !== 'test/architecture.test.js') out.push(rel);
  }
  return out.sort();
}

const selected = testFiles(base).filter(
  (f) => patterns.length === 0 || patterns.some((p) => f.replace(/\.js$/, '').includes(p)),
);
if (selected.length === 0) {
  console.error(`no test file of ${base}/ matches ${patterns.join(', ')}`);
  process.exit(1);
}
const isSerial = (f: string) => SERIAL[f.replace(/\.js$/, '.ts')] !== undefined;
const concurrent = selected.filter((f) => !isSerial(f));
const serial = selected.filter(isSerial);

const tap = path.join(ROOT, 'node_modules', '.bin', os.platform() === 'win32' ? 'tap.cmd' : 'tap');
function runTap(files: string[], j: number): number {
  if (files.length === 0) return 0;
  const timeout = profile === 'cluster' ? ['--timeout', '1800'] : [];
  const r = spawnSync(tap, ['--jobs', String(j), ...timeout, ...tapArgs, ...files.map((f) => `dist/${f}`)], {
    cwd: ROOT,
    stdio: 'inherit',
    env: { ...process.env, TEST_STACK_PROFILE: profile },
  });
  return r.status ?? 1;
}

console.log(`# ${concurrent.length} files ${jobs} at a time, then ${serial.length} serial (test/suites.ts)`);
const first = runTap(concurrent, jobs);
const second = runTap(serial, 1);
process.exit(first || second);
