import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Type } from '#typebox';
import { loadConfig } from '../../lib/config.js';
import { connectPg } from '../../lib/pg.js';
import { ProcessorsConfig } from '../../processors/config.js';
import { DemoStopped } from '../demo/client.js';
import { loadDemo } from '../demo/load.js';
import { stackProfile, stackUrls } from '../stack.js';
import { seedWorkspace } from '../workspace.js';

/**
 * npm run seed -- --tenant ID --customers N [--source internal] [--prefix cust-] [--products N]
 * Adds customers with external ids PREFIX000001… (and products P0001…) to a workspace, for tests
 * and benchmarks. Prints {"tenant_id","customers","products","external_source","first_external_id"}.
 *
 * npm run seed -- --demo [--credentials FILE] [--seed N] [--api URL] [--ingest URL]
 * Loads the demo workspace (infra/demo/) into the workspace of FILE, the JSON `npm run bootstrap --
 * --json` prints (default: the one npm start made, .data/<profile>/credentials.json), through the
 * running tiers (default: the URLs in FILE). The same seed (default 42) gives the same data; a
 * workspace that has the demo gets nothing more. Prints the report as JSON, progress on stderr.
 * Against an ingest tier with the default backfill limit (EVENTS_BACKFILLS_PER_MIN=10) it waits
 * out the limit, a few minutes; npm start raises it for its own tiers.
 * SIGINT or SIGTERM ends it after the request in progress (exit status 3; a second signal a
 * second later, at once); the next run finishes the load with the same data. `--stop-after N`
 * does the same after N requests of events, for tests.
 */
const { values } = parseArgs({
  options: {
    tenant: { type: 'string' },
    customers: { type: 'string', default: '0' },
    products: { type: 'string', default: '0' },
    source: { type: 'string', default: 'internal' },
    prefix: { type: 'string', default: 'cust-' },
    demo: { type: 'boolean', default: false },
    credentials: { type: 'string' },
    seed: { type: 'string', default: '42' },
    api: { type: 'string' },
    ingest: { type: 'string' },
    'stop-after': { type: 'string' },
  },
});
const profile = stackProfile(process.env.STACK_PROFILE);
const urls = stackUrls(profile);
if (!values.demo && !values.tenant) {
  process.stderr.write(
    'usage: seed --tenant ID --customers N [--source S] [--prefix P] [--products N]\n' +
      '       seed --demo [--credentials FILE] [--seed N] [--api URL] [--ingest URL] [--stop-after N]\n',
  );
  process.exit(2);
}
const sql = connectPg(process.env.DATABASE_URL ?? urls.DATABASE_URL, values.demo ? 4 : 1);
try {
  if (values.demo) await demo();
  else {
    const out = await seedWorkspace(sql, {
      tenant: values.tenant!,
      customers: Number(values.customers),
      products: Number(values.products),
      source: values.source!,
      prefix: values.prefix!,
    });
    process.stdout.write(JSON.stringify(out) + '\n');
  }
} catch (err) {
  const stopped = err instanceof DemoStopped;
  process.stderr.write(`seed ${stopped ? 'stopped' : 'failed'}: ${(err as Error).message}\n`);
  process.exitCode = stopped ? 3 : 1;
} finally {
  await sql.end();
}

async function demo(): Promise<void> {
  const file = values.credentials ?? path.join(profile.dataDir, 'credentials.json');
  if (!fs.existsSync(file)) throw new Error(`no credentials file ${file} (npm run bootstrap -- --json > FILE)`);
  const creds = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, string>;
  const t0 = performance.now();
  const seed = Number(values.seed);
  if (!Number.isSafeInteger(seed)) throw new Error(`--seed ${values.seed} is not an integer`);
  const stopAfter = values['stop-after'] === undefined ? undefined : Number(values['stop-after']);
  if (stopAfter !== undefined && !(Number.isSafeInteger(stopAfter) && stopAfter >= 0))
    throw new Error(`--stop-after ${values['stop-after']} is not a count`);
  // A stop between two requests: what was accepted is recorded, so the next load neither loses nor
  // repeats it. npm start's Ctrl-C reaches it twice (the terminal's SIGINT, the launcher's
  // SIGTERM): a second signal ends it at once only when it comes later.
  const stop = new AbortController();
  let stoppedAt = 0;
  const onSignal = () => {
    if (stop.signal.aborted && performance.now() - stoppedAt > 1000) process.exit(130);
    if (stop.signal.aborted) return;
    stoppedAt = performance.now();
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // The processors' thresholds, as they read them (defaults included).
  const alerts = loadConfig(
    Type.Pick(ProcessorsConfig, ['ALERTS_USAGE_DROP_RATIO', 'ALERTS_USAGE_DROP_MIN_WEEKLY']),
    process.env,
  );
  const report = await loadDemo({
    sql,
    clickhouseUrl: process.env.CLICKHOUSE_URL ?? urls.CLICKHOUSE_URL,
    apiUrl: values.api ?? creds.api_url,
    ingestUrl: values.ingest ?? creds.ingest_url,
    tenantId: creds.tenant_id,
    apiKey: creds.api_key,
    ingestionKey: creds.ingestion_key,
    seed,
    dropRatio: alerts.ALERTS_USAGE_DROP_RATIO,
    dropMinWeekly: alerts.ALERTS_USAGE_DROP_MIN_WEEKLY,
    signal: stop.signal,
    stopAfter,
    log: (line) => process.stderr.write(`seed: [${((performance.now() - t0) / 1000).toFixed(1)} s] ${line}\n`),
  });
  process.stdout.write(JSON.stringify(report) + '\n');
}
