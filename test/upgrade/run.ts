import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import { ROOT } from '../../infra/stack.js';
import { fromCommit, lastSchemaCommit } from './release.js';

/**
 * npm run test:upgrade [-- <commit>…]: test/upgrade/upgrade.test.ts once from each commit. Without
 * arguments: from the previous release (test/upgrade/FROM), then from the newest commit before HEAD
 * that changed a migration, a stream or the ClickHouse DDL, when that one came after the release
 * (an upgrade across the latest such change, even before a release carries it). Stops at the first
 * failure; prints each run's time.
 *
 * npm run test:upgrade:rolling [-- <commit>]: `--rolling` runs test/upgrade/rolling.test.ts instead
 * (a rolling upgrade under load, minutes), from the newest schema-changing commit unless one is given.
 */
const rolling = process.argv.includes('--rolling');
const given = process.argv.slice(2).filter((a) => a !== '--rolling');
const release = fromCommit();
const froms = given.length ? given.map((c) => fromCommit(c)) : rolling ? [lastSchemaCommit()] : [release];
const file = rolling ? 'dist/test/upgrade/rolling.test.js' : 'dist/test/upgrade/upgrade.test.js';
if (!given.length && !rolling) {
  const schema = lastSchemaCommit();
  const newer = (a: string, b: string) =>
    a !== b && spawnSync('git', ['merge-base', '--is-ancestor', b, a], { cwd: ROOT }).status === 0;
  if (newer(schema, release)) froms.push(schema);
  else console.log(`test:upgrade: the last schema change (${schema.slice(0, 7)}) is in the release already`);
}

const tap = path.join(ROOT, 'node_modules', '.bin', 'tap');
const times: string[] = [];
for (const from of froms) {
  const subject = execFileSync('git', ['log', '-1', '--format=%h %cs %s', from], { cwd: ROOT, encoding: 'utf8' });
  console.log(`test:upgrade: from ${subject.trim().slice(0, 110)}`);
  const t0 = Date.now();
  const r = spawnSync(tap, ['--jobs', '1', '--timeout', '900', file], {
    cwd: ROOT,
    stdio: 'inherit',
    env: { ...process.env, UPGRADE_FROM: from },
  });
  times.push(`${from.slice(0, 7)}: ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  if (r.status !== 0) {
    console.log(`test:upgrade: the upgrade from ${from.slice(0, 7)} failed (${times.join(', ')})`);
    process.exit(r.status ?? 1);
  }
}
console.log(`test:upgrade: green (${times.join(', ')})`);
