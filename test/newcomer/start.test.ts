import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ROOT, stackProfile } from '../../infra/stack.js';
import { portOpen } from '../../infra/proc.js';
import { waitFor } from '../helpers/stack.js';

/**
 * The newcomer's path, as a root user who clones into a home folder of mode 0700 (as /root is)
 * meets it: the checkout (its working tree as it is, node_modules linked) in a folder that user
 * `postgres` cannot traverse, then `npm start` there. A start that fails after launching some
 * servers stops them again; the next start then brings the whole stack up, prints credentials
 * that work, and Ctrl-C ends it. It runs the dev profile's ports, so `npm run test:newcomer` runs
 * it on its own (CI does, after `npm test`), never beside a running `npm start`.
 */

const dev = stackProfile('dev');
const ports = [dev.natsPort, dev.chHttpPort, dev.pgPort, dev.edgePort, dev.apiPort];
const busy = [];
for (const port of ports) if (await portOpen(port)) busy.push(port);
if (busy.length) throw new Error(`dev-profile ports in use (${busy.join(', ')}): stop the dev stack first`);

const home = fs.mkdtempSync(path.join(os.tmpdir(), 'newcomer-'));
fs.chmodSync(home, 0o700);
const checkout = path.join(home, 'csp');
fs.mkdirSync(checkout);
// The working tree as git sees it (tracked and untracked files not ignored), without the build.
const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT })
  .toString()
  .split('\0')
  .filter((f) => f && fs.existsSync(path.join(ROOT, f)));
for (const f of files) fs.cpSync(path.join(ROOT, f), path.join(checkout, f), { recursive: true });
fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(checkout, 'node_modules'));

const pgData = path.join(checkout, '.data', 'dev', 'pg');
t.teardown(() => {
  spawnSync('/bin/sh', ['-c', 'unset NODE_OPTIONS; exec node dist/infra/cli.js down --profile dev'], {
    cwd: checkout,
    stdio: 'ignore',
    env: shellEnv,
  });
  const outside = fs.lstatSync(pgData, { throwIfNoEntry: false })?.isSymbolicLink() ? fs.readlinkSync(pgData) : null;
  if (outside) fs.rmSync(path.dirname(outside), { recursive: true, force: true });
  fs.rmSync(home, { recursive: true, force: true });
});

/**
 * A newcomer's shell: none of the test runner's settings, nor those that make it hook the node
 * processes a test spawns (its loader then meets TypeScript's own compiler), nor npm's.
 */
const shellEnv = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !/^(TAP|_TAP|npm_|NODE_OPTIONS$)/i.test(k)),
);

/** `npm start` in the checkout, its output so far, and its exit. */
function npmStart() {
  // Through a shell that drops NODE_OPTIONS: the test runner adds its loader to every spawn's.
  const child = spawn('/bin/sh', ['-c', 'unset NODE_OPTIONS; exec npm start'], {
    cwd: checkout,
    env: shellEnv,
    detached: true,
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGTERM');
  });
  return { child, output: () => out, exited };
}

t.test('the checkout sits where user postgres cannot reach', async (t) => {
  const r = spawnSync('runuser', ['-u', 'postgres', '--', 'test', '-x', checkout]);
  t.not(r.status, 0, 'postgres cannot traverse the parent folder');
});

t.test('a start that fails stops the servers it had launched', async (t) => {
  // The edge's port is held by another process: caddy cannot start, the others can.
  const blocker = net.createServer();
  await new Promise<void>((r) => blocker.listen(dev.edgePort, '127.0.0.1', () => r()));
  try {
    const run = npmStart();
    const code = await Promise.race([run.exited, new Promise((r) => setTimeout(r, 240_000, 'timeout').unref())]);
    t.not(code, 0, 'npm start failed');
    t.not(code, 'timeout', 'and ended by itself');
    t.notMatch(run.output(), /Admin API key:/, 'no credentials printed');
    t.match(run.output(), `port 127.0.0.1:${dev.edgePort} is already taken by another process`);
  } finally {
    await new Promise((r) => blocker.close(r));
  }
  for (const port of [dev.natsPort, dev.chHttpPort, dev.pgPort])
    t.equal(await portOpen(port), false, `nothing left listening on ${port}`);
});

t.test('npm start brings the stack up and its credentials work', async (t) => {
  const run = npmStart();
  const out = await waitFor('the credentials', () => /Admin sign-in:.*\n/.test(run.output()) && run.output(), 300_000);
  t.notMatch(out, /initdb failed|Permission denied/);
  const apiKey = /Admin API key:\s+(\S+)/.exec(out)?.[1];
  const api = /Core API:\s+(\S+)/.exec(out)?.[1];
  t.ok(apiKey && api, 'the API key and URL are printed');
  t.ok(fs.lstatSync(pgData).isSymbolicLink(), 'PostgreSQL keeps its data where user postgres can reach it');
  t.equal(fs.statSync(home).mode & 0o777, 0o700, 'the home folder was left as it was');
  const res = await waitFor(
    'the core API',
    async () => {
      const r = await fetch(`${api}/customers?limit=1`, { headers: { authorization: `Bearer ${apiKey}` } });
      return r.status === 200 && r;
    },
    60_000,
  );
  const body = (await res.json()) as { data: unknown[] };
  t.equal(body.data.length, 1, 'the printed admin API key lists the demo customers');
  // Ctrl-C, as a terminal sends it, to the whole foreground group: the launcher stops its tiers.
  process.kill(-run.child.pid!, 'SIGINT');
  await run.exited;
  for (const port of [dev.apiPort, dev.ingestPort])
    t.equal(await portOpen(port), false, `Ctrl-C stopped the tier on ${port}`);
});
