import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { connect } from 'nats';
import { connectPg } from '../lib/pg.js';
import { applyClickhouse } from '../infra/apply.js';
import { ROOT, stackProfile, stackUrls } from '../infra/stack.js';
import { HOST_PROBE_KIND, hostProbe } from './host-probe.js';
import { parseScenario } from './parse.js';
import { ceilings } from './ceilings.js';
import type { BenchContext, BenchOptions } from './context.js';
import { e2eScenario } from './e2e.js';
import { analyticsScenario } from './analytics.js';
import { webhooksScenario } from './webhooks.js';
import { healthScenario } from './health.js';
import { metricsScenario } from './metrics.js';
import { playbooksScenario } from './playbooks.js';
import { ingestScenario } from './ingest-scenario.js';
import { outageScenario } from './outage.js';
import { machine, reproducible, rows, runExtras, table, writeResults, type Section, type Stored } from './report.js';
import { waitQuiet } from './proc-stats.js';
import { scenarioB } from './scenario-b.js';
import {
  BenchError,
  ClickHouse,
  killAllStarted,
  node,
  runUndo,
  say,
  snapshotDist,
  stackUp,
  undoPending,
} from './tiers.js';
import type { BenchTenant } from './workload.js';

/**
 * npm run bench [-- --only parse,ceilings,ingest,events-b,e2e,outage] [--duration S] [--half-rate N] [--e2e-duration S] [--e2e-rate N]
 *   [--outage-events N] [--connections N] [--profile dev|test] [--health-customers N] [--health-events N]
 *   [--metrics-customers N] [--metrics-events N] [--metrics-count N] [--metrics-test-requests N]
 *   [--playbooks-customers N] [--playbooks-events N] [--playbooks-count N] [--playbooks-kinds condition,…]
 *   [--analytics-customers N] [--analytics-requests N] [--analytics-callers N] [--profile-cpu] [--load-client] [--wrk]
 * Every option also reads from BENCH_<NAME> (e.g. BENCH_DURATION=30, BENCH_PROFILE=test).
 * --empty-event-store (test profile only) drops and recreates the csp database in ClickHouse before the run, so
 * that earlier runs' rows (and their background merges) do not weigh on the figures.
 * --profile-cpu writes a V8 CPU profile (.cpuprofile, for Chrome DevTools or speedscope) of every
 * ingest process the run starts, into .data/<profile>/cpu-profiles/<time>/, outside the repository.
 * --load-client runs the ingest scenario's full load a second time, its events tracked one by one through the
 * producer client (sdk/, IngestClient) instead of sent as prebuilt request bytes: the report puts the client's
 * CPU per event next to the prebuilt load's (the other tables stay the prebuilt load's).
 */
const SCENARIOS = [
  'parse',
  'ceilings',
  'ingest',
  'events-b',
  'e2e',
  'outage',
  'health',
  'metrics',
  'playbooks',
  'analytics',
  'webhooks',
] as const;
type Scenario = (typeof SCENARIOS)[number];

function options(): BenchOptions {
  const { values } = parseArgs({
    options: {
      only: { type: 'string' },
      profile: { type: 'string' },
      duration: { type: 'string' },
      'raw-beside': { type: 'string' },
      'e2e-duration': { type: 'string' },
      'e2e-rate': { type: 'string' },
      'half-rate': { type: 'string' },
      'backlog-events': { type: 'string' },
      'outage-events': { type: 'string' },
      connections: { type: 'string' },
      'ingest-processes': { type: 'string' },
      'publish-inflight': { type: 'string' },
      'quiet-wait': { type: 'string' },
      'ch-rows': { type: 'string' },
      tenants: { type: 'string' },
      customers: { type: 'string' },
      'health-customers': { type: 'string' },
      'health-events': { type: 'string' },
      'health-callers': { type: 'string' },
      'health-requests': { type: 'string' },
      'metrics-customers': { type: 'string' },
      'metrics-events': { type: 'string' },
      'metrics-count': { type: 'string' },
      'metrics-test-requests': { type: 'string' },
      'metrics-test-callers': { type: 'string' },
      'playbooks-customers': { type: 'string' },
      'playbooks-events': { type: 'string' },
      'playbooks-count': { type: 'string' },
      'playbooks-kinds': { type: 'string' },
      'analytics-customers': { type: 'string' },
      'analytics-requests': { type: 'string' },
      'analytics-callers': { type: 'string' },
      'profile-cpu': { type: 'boolean' },
      'empty-event-store': { type: 'boolean' },
      'load-client': { type: 'boolean' },
      wrk: { type: 'boolean' },
    },
  });
  type Named = Exclude<keyof typeof values, 'profile-cpu' | 'empty-event-store' | 'load-client' | 'wrk'>;
  const get = (name: Named) =>
    (values[name] as string | undefined) ?? process.env[`BENCH_${name.toUpperCase().replace(/-/g, '_')}`];
  const num = (name: Named, def: number) => {
    const v = get(name);
    if (v === undefined) return def;
    const x = Number(v);
    if (!Number.isFinite(x) || x <= 0) throw new BenchError(`--${name} must be a positive number, got "${v}"`);
    return x;
  };
  const only = (get('only') ?? SCENARIOS.join(','))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const s of only)
    if (!SCENARIOS.includes(s as Scenario))
      throw new BenchError(`--only takes ${SCENARIOS.join('|')} (comma-separated), got "${s}"`);
  const profile = get('profile') ?? 'dev';
  if (profile !== 'dev' && profile !== 'test') throw new BenchError(`--profile is dev or test, got "${profile}"`);
  if (values['empty-event-store'] && profile !== 'test')
    throw new BenchError('--empty-event-store empties every csp table in ClickHouse: only with --profile test');
  const durationS = num('duration', 20);
  return {
    profile,
    profileCpu: values['profile-cpu'] === true || process.env.BENCH_PROFILE_CPU === '1',
    emptyEventStore: values['empty-event-store'] === true || process.env.BENCH_EMPTY_EVENT_STORE === '1',
    loadClient: values['load-client'] === true || process.env.BENCH_LOAD_CLIENT === '1',
    wrk: values.wrk === true,
    only: new Set(only as Scenario[]),
    durationS,
    // 0: surface A without the raw publish beside it (a device run short of time).
    rawBesideS: get('raw-beside') === '0' ? 0 : num('raw-beside', durationS),
    e2eDurationS: num('e2e-duration', 60),
    e2eRate: num('e2e-rate', 200_000),
    halfRate: num('half-rate', 0),
    backlogEvents: num('backlog-events', 2_000_000),
    outageEvents: num('outage-events', 3_000_000),
    connections: num('connections', 64),
    ingestProcesses: num('ingest-processes', Number(process.env.INGEST_PROCESSES ?? 2)),
    publishInflight: num('publish-inflight', 256),
    chRows: num('ch-rows', 1_000_000),
    tenants: num('tenants', 4),
    customers: num('customers', 5000),
    quietWaitS: num('quiet-wait', 120),
    products: 20,
    bodiesPerTenant: 100,
    healthCustomers: num('health-customers', 100_000),
    healthEvents: num('health-events', 20_000_000),
    healthCallers: num('health-callers', 20),
    healthRequests: num('health-requests', 50),
    metricsCustomers: num('metrics-customers', 100_000),
    metricsEvents: num('metrics-events', 20_000_000),
    metricsCount: num('metrics-count', 50),
    metricsTestRequests: num('metrics-test-requests', 200),
    metricsTestCallers: num('metrics-test-callers', 4),
    playbooksCustomers: num('playbooks-customers', 100_000),
    playbooksEvents: num('playbooks-events', 5_000_000),
    playbooksCount: num('playbooks-count', 20),
    playbooksKinds: playbookKinds(get('playbooks-kinds')),
    analyticsCustomers: num('analytics-customers', 100_000),
    analyticsRequests: num('analytics-requests', 200),
    analyticsCallers: num('analytics-callers', 4),
  };
}

function playbookKinds(v: string | undefined): string[] {
  const all = ['condition', 'metric_threshold', 'event'];
  const kinds = (v ?? all.join(',')).split(',').map((s) => s.trim());
  for (const k of kinds)
    if (!all.includes(k))
      throw new BenchError(`--playbooks-kinds takes ${all.join('|')} (comma-separated), got "${k}"`);
  return kinds;
}

function command(): string {
  const args = process.argv.slice(2).join(' ');
  const env = Object.entries(process.env)
    .filter(([k]) => k.startsWith('BENCH_') || k === 'INGEST_PROCESSES')
    .map(([k, v]) => `${k}=${v} `)
    .join('');
  return process.env.npm_lifecycle_event === 'bench'
    ? `${env}npm run bench${args ? ` -- ${args}` : ''}`
    : `${env}node dist/bench/run.js${args ? ` ${args}` : ''}`;
}

/** New workspaces (plan enterprise) with seeded customers and products, and their ids. */
async function workspaces(o: BenchOptions, env: Record<string, string>, dbUrl: string): Promise<BenchTenant[]> {
  const out: BenchTenant[] = [];
  const sql = connectPg(dbUrl, 1);
  try {
    for (let i = 0; i < o.tenants; i++) {
      const ws = JSON.parse(
        await node(
          'infra/bin/bootstrap.js',
          ['--json', '--plan', 'enterprise', '--name', `bench ${new Date().toISOString()} #${i + 1}`],
          env,
        ),
      ) as { tenant_id: string; ingestion_key: string };
      await node(
        'infra/bin/seed.js',
        ['--tenant', ws.tenant_id, '--customers', String(o.customers), '--products', String(o.products)],
        env,
      );
      const customers = await sql<
        { id: string; external_id: string }[]
      >`SELECT id::text, external_id FROM customers WHERE tenant_id = ${ws.tenant_id} AND external_source = 'internal' ORDER BY external_id`;
      const products = await sql<
        { id: string; code: string }[]
      >`SELECT id::text, code FROM products WHERE tenant_id = ${ws.tenant_id}`;
      out.push({
        tenantId: ws.tenant_id,
        key: ws.ingestion_key,
        customers: customers.map((c) => [c.id, c.external_id]),
        products: products.map((p) => [p.id, p.code]),
      });
    }
  } finally {
    await sql.end();
  }
  return out;
}

function version(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8' })
      .trim()
      .split('\n')[0]
      .replace(/^.*?(v?\d+\.\d+[\d.]*).*$/, '$1');
  } catch {
    return 'unknown';
  }
}

async function main(): Promise<void> {
  const o = options();
  const profile = stackProfile(o.profile);
  const urls = stackUrls(profile);
  const env = { STACK_PROFILE: profile.name, DATABASE_URL: urls.DATABASE_URL };
  say(`profile ${profile.name}; scenarios ${[...o.only].join(', ')}`);
  if (o.profileCpu) {
    const dir = path.join(profile.dataDir, 'cpu-profiles', new Date().toISOString().replace(/[:.]/g, '-'));
    fs.mkdirSync(dir, { recursive: true });
    // Read by tiers.ts for every ingest process it starts; the workers inherit it from the supervisor.
    process.env.BENCH_INGEST_NODE_ARGS = `--cpu-prof --cpu-prof-dir=${dir}`;
    say(`ingest CPU profiles go to ${path.relative(ROOT, dir)}/ (written when each process exits)`);
  }
  await stackUp(profile);
  snapshotDist();
  // The health, metrics and playbooks scenarios make their own workspaces; the others share these.
  const tenants = [...o.only].some(
    (s) => s !== 'health' && s !== 'metrics' && s !== 'playbooks' && s !== 'analytics' && s !== 'webhooks',
  )
    ? await workspaces(o, env, urls.DATABASE_URL)
    : [];
  if (tenants.length) say(`${tenants.length} workspaces with ${o.customers} customers each`);
  const nc = await connect({ servers: urls.NATS_URL, name: 'bench-run' });
  const ch = new ClickHouse(urls.CLICKHOUSE_URL);
  const ctx: BenchContext = {
    opts: o,
    profile,
    urls,
    tenants,
    nc,
    // A purge by subject of a stream holding GBs takes longer than the client's default 5 s.
    jsm: await nc.jetstreamManager({ timeout: 60_000 }),
    ch,
    workload: {
      bodiesPerTenant: o.bodiesPerTenant,
      eventsPerBody: 100,
      seed: 42,
      customerIdShare: 0.2,
      now: Date.now(),
    },
  };
  if (o.emptyEventStore) await emptyEventStore(ch, urls.CLICKHOUSE_URL);
  const m = machine(version('nats-server', ['--version']), (await ch.query('SELECT version()')).trim());
  const file = path.join(ROOT, 'bench', 'results.json');
  const stored: Stored = fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, 'utf8')) as Stored) : {};
  const { only: _only, ...shown } = o;
  const section = <T>(data: T): Section<T> => ({
    at: new Date().toISOString(),
    command: command(),
    machine: m,
    options: shown,
    data,
  });
  const failures: string[] = [];
  const attempt = async (name: Scenario, fn: () => Promise<void>) => {
    if (!o.only.has(name)) return;
    try {
      // What the scenario before left dirty (GBs of stream or table data) is written back first:
      // otherwise the kernel writes it during this one, and it waits on the disk for it.
      const t0 = Date.now();
      execFileSync('sync');
      if (Date.now() - t0 > 1000) say(`${name}: what was left dirty written back in ${Date.now() - t0} ms`);
      await ch.waitMerges(say, o.quietWaitS);
      await waitQuiet(say, o.quietWaitS);
      await fn();
      writeResults(path.join(ROOT, 'bench'), stored);
    } catch (err) {
      if (!(err instanceof BenchError)) throw err;
      say(`${name} failed: ${err.message}`);
      failures.push(name);
    }
  };
  try {
    await attempt('parse', async () => void (stored.parse = section(parseScenario())));
    await attempt('ceilings', async () => void (stored.ceilings = section(await ceilings(ctx))));
    await attempt('ingest', async () => {
      const before = stored.ingest;
      const probeUs = hostProbe();
      stored.ingest = { ...section(await ingestScenario(ctx)), probeUs, probeKind: HOST_PROBE_KIND };
      if (before) stored.ingest.previous = reproducible(before.at, before.command, before.data.full, runExtras(before));
    });
    // Both places of the deduplication, one after the other in the same run.
    for (const dedupAt of ['request', 'stream'] as const)
      await attempt('events-b', async () => {
        const probeUs = hostProbe();
        const b = await scenarioB(ctx, dedupAt);
        // As for surface A: a run where more than 1 % of requests failed measures a failure, not throughput.
        if (b.requests === 0 || b.failures > b.requests * 0.01)
          throw new BenchError(
            `events-b (${dedupAt}): ${b.failures} of ${b.requests} requests failed ${JSON.stringify(b.statusCounts)}`,
          );
        if (dedupAt === 'request') stored.eventsB = section(b);
        else {
          const before = stored.eventsBStream;
          stored.eventsBStream = { ...section(b), probeUs, probeKind: HOST_PROBE_KIND };
          if (before)
            stored.eventsBStream.previous = reproducible(before.at, before.command, before.data, runExtras(before));
        }
      });
    await attempt('e2e', async () => void (stored.e2e = section(await e2eScenario(ctx))));
    await attempt('outage', async () => void (stored.outage = section(await outageScenario(ctx))));
    await attempt('health', async () => void (stored.health = section(await healthScenario(ctx))));
    await attempt('metrics', async () => void (stored.metrics = section(await metricsScenario(ctx))));
    await attempt('playbooks', async () => void (stored.playbooks = section(await playbooksScenario(ctx))));
    await attempt('analytics', async () => void (stored.analytics = section(await analyticsScenario(ctx))));
    await attempt('webhooks', async () => void (stored.webhooks = section(await webhooksScenario(ctx))));
  } finally {
    await nc.close();
  }
  process.stdout.write(
    `\n${table(rows(stored))}\n\nmachine: ${m.cores} cores, ${m.cpu}, ${m.memoryGb} GB, Node ${m.node}; written to bench/RESULTS.md\n`,
  );
  if (failures.length) throw new BenchError(`scenarios failed: ${failures.join(', ')}`);
}

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) {
      // A server the run stopped (ClickHouse in the outage scenario) must not be left down.
      if (undoPending()) say('still starting again what the benchmark stopped; wait for it');
      else process.exit(130);
      return;
    }
    interrupted = true;
    say('interrupted: stopping what this run started');
    killAllStarted();
    void runUndo().finally(() => process.exit(130));
  });
}

main().catch(async (err: unknown) => {
  say(err instanceof BenchError ? err.message : `failed: ${(err as Error)?.stack ?? String(err)}`);
  killAllStarted();
  await runUndo();
  process.exit(1);
});

/** The csp database dropped and created again from schema.sql: every table and view empty. */
async function emptyEventStore(ch: ClickHouse, url: string): Promise<void> {
  // DROP, not TRUNCATE: ClickHouse 18.16 only marks truncated parts outdated and deletes them minutes
  // later, and a server restarted before then (the outage scenario) loads them back as active.
  const tables = Number((await ch.query(`SELECT count() FROM system.tables WHERE database = 'csp'`)).trim());
  await ch.query('DROP DATABASE IF EXISTS csp');
  await applyClickhouse(url);
  say(`dropped the csp database (${tables} tables and views) and created it again (--empty-event-store)`);
}
