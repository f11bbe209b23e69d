import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import postgres from 'postgres';
import t from '#tap';
import { portOpen } from '../../infra/proc.js';
import { integrationTokenKey, stackProfile, stackUrls } from '../../infra/stack.js';
import type { NewWorkspace } from '../../infra/workspace.js';
import { waitFor } from '../helpers/stack.js';
import { startReceiver } from '../helpers/webhook-receiver.js';
import {
  buildRelease,
  checkoutRelease,
  DATA_DIR,
  fromCommit,
  LOG_DIR,
  lastSchemaCommit,
  type Release,
  runIn,
  startTier,
  stopTier,
  tail,
  type TierName,
  type TierProcess,
} from './release.js';
import { chRows, httpText } from './snapshot.js';

/**
 * A rolling upgrade under load (issue 49.3): HEAD's servers, migrations and definitions first
 * (expand-only, so the old tiers keep serving), then two processes of each tier of the previous
 * version (UPGRADE_FROM, default the newest commit that changed a migration, a stream or the DDL),
 * then each process replaced by HEAD's, one at a time, ingest, processors, core-api, old and new
 * side by side for HOLD_MS each, while steady surface-A, keyed surface-B and core-API traffic runs.
 * Every acknowledged event is stored exactly once (counted by the unique id each carries), every
 * accepted key once, every request answered (a 503 with Retry-After is counted and retried with
 * the same body; a connection refused by a stopped process goes to the other one, as a balancer
 * would), every `customer.created` delivered once whichever version wrote or relayed its outbox row.
 * Figures in .data/upgrade/logs/rolling.json (docs/reliability.md). Dev-profile ports: run alone.
 */

const HOLD_MS = Number(process.env.ROLLING_HOLD_MS ?? 30_000);
const dev = stackProfile('dev');
const urls = stackUrls(dev);
const CH = `http://127.0.0.1:${dev.chHttpPort}`;
const say = (line: string) => t.comment(line);
const ports: Record<TierName, [number, number]> = {
  ingest: [dev.ingestPort, dev.ingestPort + 1],
  'core-api': [dev.apiPort, dev.apiPort + 1],
  processors: [dev.ingestPort + 200, dev.ingestPort + 201],
};

const busy = [];
for (const port of [dev.natsPort, dev.chHttpPort, dev.pgPort, ...Object.values(ports).flat()])
  if (await portOpen(port)) busy.push(port);
if (busy.length) throw new Error(`dev-profile ports in use (${busy.join(', ')}): stop the dev stack first`);

const fromSha = fromCommit(process.env.UPGRADE_FROM || lastSchemaCommit());
const old = buildRelease(fromSha, say);
if (fs.existsSync(path.join(DATA_DIR, 'dev'))) runIn(old, 'infra/cli.js', ['down', '--profile', 'dev']);
fs.rmSync(path.join(DATA_DIR, 'dev'), { recursive: true, force: true });
const head = checkoutRelease(say);

const sql = postgres(urls.DATABASE_URL, { max: 2, onnotice: () => {} });
let serversUp = false;
const procs: Record<TierName, TierProcess[]> = { ingest: [], processors: [], 'core-api': [] };
const all = () => Object.values(procs).flat();
t.teardown(async () => {
  for (const p of all()) await stopTier(p, 10_000);
  await sql.end({ timeout: 5 });
  stopServers();
});
process.on('exit', () => {
  for (const p of all()) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  stopServers();
});
function stopServers(): void {
  if (!serversUp) return;
  serversUp = false;
  runIn(head, 'infra/cli.js', ['down', '--profile', 'dev'], {}, say);
}

// ---- HEAD's servers, migrations and definitions; the old version's workspace ----
let t0 = Date.now();
serversUp = true;
runIn(head, 'infra/cli.js', ['up', '--profile', 'dev'], {}, say);
say(`HEAD infra:up: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
const rx = await startReceiver(t);
const site = { api: `http://127.0.0.1:${dev.apiPort}`, ingest: `http://127.0.0.1:${dev.ingestPort}` };
const ws = JSON.parse(
  runIn(old, 'infra/bin/bootstrap.js', ['--json', '--name', 'Rolling'], {
    PUBLIC_INGEST_URL: site.ingest,
    PUBLIC_API_URL: site.api,
  }),
) as NewWorkspace;

/** The harness's operator configuration (upgrade.test.ts), with each process's own port. */
const baseEnv: Record<string, string> = {
  ...urls,
  CLICKHOUSE_CLUSTER: '',
  STACK_PROFILE: 'dev',
  PUBLIC_INGEST_URL: site.ingest,
  PUBLIC_API_URL: site.api,
  PUBLIC_BASE_URL: site.api,
  WEBHOOK_ALLOW_HTTP: 'true',
  WEBHOOK_ALLOW_PRIVATE: 'true',
  INGEST_PROCESSES: '1',
  API_PROCESSES: '1',
  API_READS_PER_MIN: '100000',
  API_WRITES_PER_MIN: '100000',
  // Surface B's load is two requests a second for one workspace (the default allows one).
  EVENTS_BATCHES_PER_MIN: '600',
  HEALTH_RECALC_INTERVAL_MS: '15000',
  LOG_LEVEL: 'info',
  INTEGRATION_TOKEN_KEY: integrationTokenKey({ ...dev, dataDir: path.join(DATA_DIR, 'dev') }),
};
const envFor = (tier: TierName, i: number): Record<string, string> => ({
  ...baseEnv,
  INGEST_PORT: String(tier === 'ingest' ? ports.ingest[i] : ports.ingest[0]),
  API_PORT: String(tier === 'core-api' ? ports['core-api'][i] : ports['core-api'][0]),
  PROCESSORS_PORT: String(tier === 'processors' ? ports.processors[i] : ports.processors[0]),
});

async function start(r: Release, tier: TierName, i: number, phase: string): Promise<TierProcess> {
  const p = startTier(r, tier, envFor(tier, i), `rolling-${phase}-${i + 1}`);
  procs[tier][i] = p;
  await waitFor(
    `${r.label} ${tier} ${i + 1} /readyz`,
    async () => {
      if (p.child.exitCode !== null) throw new Error(`exited ${p.child.exitCode}:\n${tail(p.log)}`);
      return (await fetch(`http://127.0.0.1:${ports[tier][i]}/readyz`).catch(() => undefined))?.ok === true;
    },
    90_000,
    200,
  );
  return p;
}

t0 = Date.now();
for (const tier of ['processors', 'core-api', 'ingest'] as TierName[])
  await Promise.all([0, 1].map((i) => start(old, tier, i, `old-${tier}`)));
say(`${old.label}: two processes of each tier ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

// ---- The load ----
interface Answer {
  status: number;
  retryAfter?: string;
  body: any;
  text: string;
}
/** One request on a connection of its own: a refused connection is known not to have been processed. */
function post(port: number, p: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: p, method: body === undefined ? 'GET' : 'POST', agent: false, headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown;
          try {
            parsed = text ? JSON.parse(text) : undefined;
          } catch {}
          const ra = res.headers['retry-after'];
          resolve({ status: res.statusCode ?? 0, retryAfter: ra ? String(ra) : undefined, body: parsed, text });
        });
      },
    );
    req.setTimeout(30_000, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

interface Counts {
  requests: number;
  ok: number;
  status503: number;
  longest503Run: number;
  rerouted: number;
  failures: string[];
}
const counts: Record<'a' | 'b' | 'api', Counts> = {
  a: { requests: 0, ok: 0, status503: 0, longest503Run: 0, rerouted: 0, failures: [] },
  b: { requests: 0, ok: 0, status503: 0, longest503Run: 0, rerouted: 0, failures: [] },
  api: { requests: 0, ok: 0, status503: 0, longest503Run: 0, rerouted: 0, failures: [] },
};
let rr = 0;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Sends one request as a client behind a balancer would: a refused connection goes to the other
 * process, a 503 with Retry-After is retried with the same body after it (at most 1 s here), anything
 * else is the answer. Undefined when no answer could be had (a failure).
 */
async function send(
  kind: keyof typeof counts,
  tier: TierName,
  p: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Answer | undefined> {
  const c = counts[kind];
  let run = 0;
  let i = rr++ % 2;
  for (let attempt = 0; attempt < 60; attempt++) {
    c.requests++;
    let a: Answer;
    try {
      a = await post(ports[tier][i], p, headers, body);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ECONNREFUSED') {
        c.requests--;
        c.rerouted++;
        i = 1 - i;
        await sleep(50);
        continue;
      }
      c.failures.push(`${kind} ${p} on ${ports[tier][i]}: no answer (${code ?? String(err)})`);
      return undefined;
    }
    if (a.status === 503 && a.retryAfter !== undefined) {
      c.status503++;
      c.longest503Run = Math.max(c.longest503Run, ++run);
      await sleep(Math.min(1000, Number(a.retryAfter) * 1000 || 1000));
      continue;
    }
    if (a.status >= 200 && a.status < 300) c.ok++;
    else c.failures.push(`${kind} ${p} on ${ports[tier][i]}: ${a.status} ${a.text.slice(0, 200)}`);
    return a;
  }
  c.failures.push(`${kind} ${p}: 60 attempts without an answer`);
  return undefined;
}

// The workspace's customers and a webhook subscription, through the old core-api.
const auth = { authorization: `Bearer ${ws.api_key}`, 'content-type': 'application/json' };
const sub = await send(
  'api',
  'core-api',
  '/v1/webhook-subscriptions',
  auth,
  JSON.stringify({
    url: rx.url('/hooks'),
    events: ['customer.created'],
    description: 'rolling',
  }),
);
if (sub?.status !== 201 && sub?.status !== 200) throw new Error(`webhook subscription: ${sub?.status} ${sub?.text}`);
const externals = Array.from({ length: 20 }, (_, i) => `roll-${String(i).padStart(3, '0')}`);
const customers = new Map<string, string>();
for (const ext of externals) {
  const r = await send(
    'api',
    'core-api',
    '/v1/customers',
    auth,
    JSON.stringify({ name: `Rolling ${ext}`, external_id: ext }),
  );
  if (!r || r.status !== 201) throw new Error(`customer ${ext}: ${r?.status} ${r?.text}`);
  customers.set(r.body.id, 'setup');
}

let phase = `${old.label} only`;
let loading = true;
const ackedA = new Set<string>();
const acceptedB = new Set<string>();
let sentB = 0;
let repeatedB = 0;

async function loadA(): Promise<void> {
  const headers = { 'x-api-key': ws.ingestion_key, 'content-type': 'application/json' };
  let n = 0;
  const inflight = new Set<Promise<void>>();
  for (let next = Date.now(); loading; next += 333) {
    await sleep(Math.max(0, next - Date.now()));
    const uids = Array.from({ length: 100 }, () => `a-${n++}`);
    const events = uids.map((uid, i) => ({
      event_name: i % 2 ? 'login' : 'report_exported',
      external_customer_id: externals[i % externals.length],
      user_id: `user-${i % 7}`,
      timestamp: new Date().toISOString(),
      properties: { uid, plan: i % 2 ? 'pro' : 'team' },
    }));
    const p = send('a', 'ingest', '/v1/ingest/events', headers, JSON.stringify({ events })).then((r) => {
      if (r?.status === 202 && r.body?.accepted === 100) for (const u of uids) ackedA.add(u);
      else if (r?.status === 202) counts.a.failures.push(`surface A: ${r.body?.accepted} of 100 accepted: ${r.text}`);
    });
    inflight.add(p);
    void p.finally(() => inflight.delete(p));
  }
  await Promise.all(inflight);
}

async function loadB(): Promise<void> {
  let n = 0;
  const sent: Array<Record<string, unknown>> = [];
  const inflight = new Set<Promise<void>>();
  for (let next = Date.now(); loading; next += 500) {
    await sleep(Math.max(0, next - Date.now()));
    // About a tenth repeats an event sent before, body and key the same.
    const events = Array.from({ length: 50 }, (_, i) => {
      if (sent.length > 100 && i % 10 === 9) {
        repeatedB++;
        return sent[Math.floor(Math.random() * sent.length)];
      }
      const key = `b-${n++}`;
      const e = {
        customer_id: [...customers.keys()][n % externals.length],
        event_name: 'feature_used',
        external_id: key,
        user_external_id: `u-${n % 5}`,
        timestamp: new Date().toISOString(),
        properties: { uid: key },
      };
      sent.push(e);
      return e;
    });
    sentB += events.length;
    const p = send('b', 'ingest', '/v1/events', auth, JSON.stringify({ events })).then((r) => {
      if (r?.status === 200 && r.body?.accepted === events.length)
        for (const e of events) acceptedB.add(String(e.external_id));
      else if (r?.status === 200) counts.b.failures.push(`surface B: ${r.body?.accepted} of 50 accepted: ${r.text}`);
    });
    inflight.add(p);
    void p.finally(() => inflight.delete(p));
  }
  await Promise.all(inflight);
}

async function loadApi(): Promise<void> {
  for (let k = 0; loading; k++) {
    const at = phase;
    const r = await send('api', 'core-api', '/v1/customers', auth, JSON.stringify({ name: `Load ${k}` }));
    if (r?.status === 201) customers.set(r.body.id, at);
    await send('api', 'core-api', '/v1/customers?limit=50', { authorization: auth.authorization });
    await sleep(500);
  }
}

// ---- The rolling upgrade ----
const steps: Array<{ step: string; replaceMs: number; stopCode: number | null }> = [];
const loads = [loadA(), loadB(), loadApi()];
await sleep(Math.min(HOLD_MS, 10_000));
const rollStart = Date.now();
for (const tier of ['ingest', 'processors', 'core-api'] as TierName[])
  for (const i of [0, 1]) {
    const s0 = Date.now();
    const stopCode = await stopTier(procs[tier][i]);
    await start(head, tier, i, `head-${tier}`);
    phase = `${tier} ${i + 1} replaced`;
    steps.push({ step: `${tier} ${i + 1}`, replaceMs: Date.now() - s0, stopCode });
    say(`${tier} ${i + 1}: old stopped (exit ${stopCode}) and HEAD ready in ${Date.now() - s0} ms`);
    await sleep(HOLD_MS);
  }
const rollMs = Date.now() - rollStart;
loading = false;
await Promise.all(loads);

/** Nothing left: outboxes relayed, deliveries made, every consumer at zero pending. */
async function quiet(): Promise<boolean> {
  const [o] = await sql<Array<{ n: number }>>`
    SELECT (SELECT count(*) FROM event_outbox WHERE published_at IS NULL)
         + (SELECT count(*) FROM webhook_outbox WHERE published_at IS NULL)
         + (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending') AS n`;
  if (Number(o.n) > 0) return false;
  const j = JSON.parse((await httpText(`http://127.0.0.1:${dev.natsMonitorPort}/jsz?consumers=true`)).text);
  for (const a of j.account_details ?? [])
    for (const s of a.stream_detail ?? [])
      for (const c of s.consumer_detail ?? []) if (c.num_pending > 0 || c.num_ack_pending > 0) return false;
  return true;
}
const q0 = Date.now();
await waitFor('every consumer at zero pending, every outbox relayed', quiet, 180_000, 500);
const drainMs = Date.now() - q0;

// ---- The checks ----
const tenant = `tenant_id = toUUID('${ws.tenant_id}')`;
const uidExpr = `if(indexOf(prop_keys, 'uid') > 0, prop_values[indexOf(prop_keys, 'uid')],
  visitParamExtractString(properties, 'uid'))`;
async function stored(surface: string, key: string): Promise<Map<string, number>> {
  const rows = await chRows<{ k: string; n: string }>(
    CH,
    `SELECT ${key} AS k, toString(count()) AS n FROM csp.events WHERE ${tenant} AND surface = '${surface}' GROUP BY k`,
  );
  return new Map(rows.map((r) => [r.k, Number(r.n)]));
}
function compare(acked: Set<string>, got: Map<string, number>) {
  const lost = [...acked].filter((k) => !got.has(k));
  const twice = [...got].filter(([, n]) => n > 1).map(([k]) => k);
  const unacked = [...got.keys()].filter((k) => !acked.has(k));
  return { lost, twice, unacked };
}
const a = compare(ackedA, await stored('a', uidExpr));
const b = compare(acceptedB, await stored('b', 'external_id'));
const deliveries = new Map<string, number>();
const createdDelivered = new Set<string>();
for (const r of rx.at('/hooks')) {
  deliveries.set(r.id, (deliveries.get(r.id) ?? 0) + 1);
  const id = (r.json.data as { id?: string; customer?: { id?: string } })?.id ?? '';
  if (r.json.type === 'customer.created') createdDelivered.add(id);
}
const byPhase: Record<string, { created: number; delivered: number }> = {};
for (const [id, at] of customers) {
  byPhase[at] ??= { created: 0, delivered: 0 };
  byPhase[at].created++;
  if (createdDelivered.has(id)) byPhase[at].delivered++;
}

const figures = {
  from: old.label,
  holdMs: HOLD_MS,
  rollMs,
  drainMs,
  steps,
  counts: Object.fromEntries(Object.entries(counts).map(([k, c]) => [k, { ...c, failures: c.failures.length }])),
  events: {
    a: { acked: ackedA.size, lost: a.lost.length, twice: a.twice.length, storedUnacked: a.unacked.length },
    b: {
      sent: sentB,
      repeated: repeatedB,
      keys: acceptedB.size,
      lost: b.lost.length,
      twice: b.twice.length,
      storedUnacked: b.unacked.length,
    },
  },
  webhooks: {
    deliveries: rx.at('/hooks').length,
    outboxIds: deliveries.size,
    twice: [...deliveries.values()].filter((n) => n > 1).length,
    byPhase,
  },
};
fs.mkdirSync(LOG_DIR, { recursive: true });
fs.writeFileSync(path.join(LOG_DIR, 'rolling.json'), `${JSON.stringify(figures, null, 2)}\n`);
say(JSON.stringify(figures));

t.test('every process replaced, each old one drained and exited 0', async (t) => {
  for (const s of steps) t.equal(s.stopCode, 0, `${s.step}: the old process exited 0`);
});

t.test('every request answered: 2xx, or 503 with Retry-After retried', async (t) => {
  for (const [kind, c] of Object.entries(counts)) {
    t.same(c.failures.slice(0, 10), [], `${kind}: no failure (${c.requests} requests, ${c.status503} answered 503)`);
    t.ok(c.ok > 0, `${kind}: ${c.ok} requests answered 2xx`);
  }
});

t.test('every acknowledged event stored exactly once', async (t) => {
  t.ok(ackedA.size > 10_000, `${ackedA.size} surface-A events acknowledged`);
  t.same(a.lost.slice(0, 10), [], `surface A: none lost (${a.lost.length})`);
  t.same(a.twice.slice(0, 10), [], `surface A: none stored twice (${a.twice.length})`);
  t.same(a.unacked.slice(0, 10), [], 'surface A: nothing stored that was not acknowledged');
  t.ok(acceptedB.size > 1000 && repeatedB > 100, `${acceptedB.size} surface-B keys, ${repeatedB} repeats`);
  t.same(b.lost.slice(0, 10), [], `surface B: no key lost (${b.lost.length})`);
  t.same(b.twice.slice(0, 10), [], `surface B: no key stored twice (${b.twice.length})`);
});

t.test('every customer.created delivered once, whichever version wrote or relayed its outbox row', async (t) => {
  t.equal(figures.webhooks.twice, 0, 'no outbox id delivered twice');
  for (const [at, n] of Object.entries(byPhase)) t.equal(n.delivered, n.created, `created during "${at}"`);
});
