import t, { type Test } from '#tap';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'helpers', 'supervised.js');

/** Runs the supervised fixture for `ms`, then stops it (SIGTERM) and returns what its workers said. */
async function run(t: Test, ms: number, staggerMs: number): Promise<string[]> {
  const p = spawn(process.execPath, [FIXTURE], {
    env: { ...process.env, STAGGER_MS: String(staggerMs) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise((r) => setTimeout(r, ms));
  const exited = new Promise<number | null>((r) => p.once('exit', (code) => r(code)));
  p.kill('SIGTERM');
  t.equal(await exited, 0, 'the supervisor stops its workers and exits cleanly');
  return out.trim().split('\n').filter(Boolean);
}

t.test('a worker that starts listening after a sibling has every worker spread its connections again', async (t) => {
  // Clients that connected while only worker 0 listened (the tier answered /readyz from it) would
  // otherwise stay on it for as long as they keep their connections; and were worker 1 left out,
  // every client that worker 0 closed would in the end land on worker 1.
  const lines = await run(t, 2500, 400);
  t.ok(lines.includes('worker 0: listening') && lines.includes('worker 1: listening'), lines.join(' | '));
  t.equal(lines.filter((l) => l === 'worker 0: rebalance').length, 1, `worker 0 once: ${lines.join(' | ')}`);
  t.equal(lines.filter((l) => l === 'worker 1: rebalance').length, 1, `worker 1 once: ${lines.join(' | ')}`);
});

t.test('a worker much busier than its sibling, period after period, alone spreads its connections', async (t) => {
  // Keep-alive clients that stayed on one worker (a tier started under load) while the other idles.
  const p = spawn(process.execPath, [FIXTURE], {
    env: { ...process.env, STAGGER_MS: '0', BALANCE_EVERY_MS: '200', BUSY_SLOT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise((r) => setTimeout(r, 3000));
  const exited = new Promise<number | null>((r) => p.once('exit', (code) => r(code)));
  p.kill('SIGTERM');
  t.equal(await exited, 0, 'the supervisor stops its workers and exits cleanly');
  const lines = out.trim().split('\n');
  const busy = lines.filter((l) => l === 'worker 0: rebalance (load)').length;
  t.ok(busy >= 1, `the busy worker is asked to spread its connections (${busy} times): ${lines.join(' | ')}`);
  // Two periods of 200 ms in a row before each (the first has nothing to compare with), and the
  // count starts again after it: at most 7 in 3 s, where every period would be 14.
  t.ok(busy <= 7, `at most every second period (${busy} times in 3 s)`);
  t.equal(lines.filter((l) => l === 'worker 1: rebalance (load)').length, 0, 'the idle one never is');
});
