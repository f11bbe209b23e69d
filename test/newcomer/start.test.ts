import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from '#tap';
import { ROOT, stackProfile } from '../../infra/stack.js';
import { portOpen } from '../../infra/proc.js';
import { waitFor } from '../helpers/stack.js';

/**
 * The newcomer's path, as a root user who clones into a home folder of mode 0700 (as /root is)
 * meets it: the checkout (its working tree as it is, node_modules linked) in a folder that user
 * `postgres` cannot traverse, then `npm start` there. A start that fails after launching some
 * servers stops them again; the next start then brings the whole stack up, loads the demo workspace
 * (health spread over the three statuses, an event catalog, metrics, segments, playbooks that created
 * tasks, a usage_drop alert), prints credentials that work and a tour whose requests answer as it
 * says, and Ctrl-C ends it; a third start finds the demo there and adds nothing. It runs the dev profile's ports, so `npm run test:newcomer` runs
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

/** What the first start's demo workspace holds, counted (the second start must leave it so). */
let before: Record<string, number> = {};

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
  const loaded = /demo workspace loaded in ([\d.]+) s/.exec(out);
  t.ok(loaded, 'the demo workspace was loaded');
  t.comment(`demo workspace loaded in ${loaded?.[1]} s`);
  t.ok(Number(loaded?.[1]) < 60, 'in under a minute');

  await t.test('the tour answers what it promises', async (t) => {
    const lines = out.split('\n').filter((l) => l.startsWith('  curl -s '));
    t.equal(lines.length, 5, 'five copy-paste requests');
    const [portfolio, health, tasks, send] = await Promise.all(lines.slice(0, 4).map(curl));
    for (const r of [portfolio, health, tasks, send]) t.equal(r.status, 200, r.line.split(' -H ')[0]);
    const d = portfolio.body.health_distribution;
    t.ok(d.healthy > 0 && d.neutral > 0 && d.at_risk > 0, `health spread: ${JSON.stringify(d)}`);
    t.equal(health.body.status, 'at_risk', 'the customer shown is at risk');
    t.equal(health.body.dimensions.length, 5, 'with its five dimensions');
    t.ok(tasks.body.data.length > 0, `the playbook created ${tasks.body.data.length} tasks`);
    t.equal(send.body.accepted, 1, 'the event is accepted');
    const seen = await waitFor('the event in GET /v1/events', async () => {
      const r = await curl(lines[4]);
      return r.status === 200 && r.body.data.length > 0 && r;
    });
    t.equal(seen.body.data[0].event_name, 'report_exported', 'and listed by GET /v1/events');
  });

  const get = async (p: string) =>
    (await (await fetch(`${api}${p}`, { headers: { authorization: `Bearer ${apiKey}` } })).json()) as any;
  const catalog = await get('/event-catalog?limit=200');
  t.ok(catalog.data.length >= 15, `${catalog.data.length} event names in the catalog`);
  t.equal((await get('/metrics')).data.length, 3, 'three metrics');
  t.equal((await get('/segments')).data.length, 2, 'two segments');
  t.ok((await get('/alerts?type=usage_drop')).data.length > 0, 'a usage_drop alert');
  const playbooks = (await get('/playbooks')).data as Array<{ id: string; name: string }>;
  t.equal(playbooks.length, 2, 'two playbooks');
  for (const p of playbooks)
    t.ok((await get(`/tasks?playbook_id=${p.id}`)).data.length > 0, `tasks created by ${p.name}`);
  before = await counts(get, /Workspace:\s+(\S+)/.exec(out)![1]);

  // Ctrl-C, as a terminal sends it, to the whole foreground group: the launcher stops its tiers.
  process.kill(-run.child.pid!, 'SIGINT');
  await run.exited;
  for (const port of [dev.apiPort, dev.ingestPort])
    t.equal(await portOpen(port), false, `Ctrl-C stopped the tier on ${port}`);
});

t.test('a second start finds the demo workspace and adds nothing', async (t) => {
  const run = npmStart();
  const out = await waitFor('the credentials', () => /Admin sign-in:.*\n/.test(run.output()) && run.output(), 300_000);
  t.match(out, /demo workspace already loaded/);
  t.match(out, /curl -s .*\/v1\/analytics\/portfolio/, 'the tour again');
  const apiKey = /Admin API key:\s+(\S+)/.exec(out)![1];
  const api = /Core API:\s+(\S+)/.exec(out)![1];
  const get = async (p: string) =>
    (await (await fetch(`${api}${p}`, { headers: { authorization: `Bearer ${apiKey}` } })).json()) as any;
  t.same(
    await counts(get, /Workspace:\s+(\S+)/.exec(out)![1]),
    before,
    'the same customers, events, contacts, metrics, segments, playbooks, tasks, alerts',
  );
  process.kill(-run.child.pid!, 'SIGINT');
  await run.exited;
});

/** What the demo made, counted: a second start must leave each number as it was. */
async function counts(get: (p: string) => Promise<any>, tenantId: string): Promise<Record<string, number>> {
  const all = async (p: string) => {
    let n = 0;
    let cursor = '';
    for (;;) {
      const page = await get(`${p}${p.includes('?') ? '&' : '?'}limit=200${cursor}`);
      n += page.data.length;
      if (!page.has_more) return n;
      cursor = `&cursor=${encodeURIComponent(page.next_cursor)}`;
    }
  };
  const res = await fetch(`http://127.0.0.1:${dev.chHttpPort}/?database=csp`, {
    method: 'POST',
    body: `SELECT count() FROM csp.events WHERE tenant_id = toUUID('${tenantId}') AND surface = 'b'`,
  });
  return {
    customers: await all('/customers'),
    events: Number((await res.text()).trim()),
    metrics: await all('/metrics'),
    segments: await all('/segments'),
    playbooks: await all('/playbooks'),
    tasks: await all('/tasks'),
    alerts: await all('/alerts'),
  };
}

/** Runs a tour line as a newcomer pastes it, and reads its status and JSON answer. */
async function curl(line: string): Promise<{ line: string; status: number; body: any }> {
  const r = spawnSync('/bin/sh', ['-c', `${line.trim()} -w '\n%{http_code}'`], { encoding: 'utf8', env: shellEnv });
  const text = r.stdout.trimEnd();
  const cut = text.lastIndexOf('\n');
  return { line: line.trim(), status: Number(text.slice(cut + 1)), body: JSON.parse(text.slice(0, cut)) };
}
