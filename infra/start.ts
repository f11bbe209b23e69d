import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { integrationTokenKey, ROOT, stackEnv, stackProfile, tierEntry } from './stack.js';
import type { DemoReport } from './demo/load.js';
import { edgeCaFile } from './services.js';

/**
 * npm start: brings the local stack up (installing what is missing when root), bootstraps a demo
 * workspace on the first run and loads its demo data through the tiers (infra/demo/), runs every
 * tier in the foreground and prints the credentials with a short tour. Ctrl-C stops the tiers
 * cleanly; the servers keep running for the next start (npm run infra:down stops them).
 */
const profile = stackProfile(process.env.STACK_PROFILE ?? 'dev');
const urls = stackEnv(profile);
const node = process.execPath;
const dist = (p: string) => path.join(ROOT, 'dist', p);
const say = (line: string) => process.stderr.write(`start: ${line}\n`);

const up = spawnSync(node, [dist('infra/cli.js'), 'up', '--profile', profile.name], { stdio: 'inherit' });
if (up.status !== 0) process.exit(up.status ?? 1);

const ingestUrl = `http://127.0.0.1:${profile.ingestPort}`;
const processorsPort = profile.ingestPort + 200;
const apiUrl = `http://127.0.0.1:${profile.apiPort}`;
const env = {
  ...process.env,
  ...urls,
  STACK_PROFILE: profile.name,
  PUBLIC_INGEST_URL: ingestUrl,
  PUBLIC_API_URL: apiUrl,
  PUBLIC_BASE_URL: apiUrl,
  // Local webhook receivers (http://127.0.0.1:…) are what development uses.
  WEBHOOK_ALLOW_HTTP: 'true',
  WEBHOOK_ALLOW_PRIVATE: 'true',
  INTEGRATION_TOKEN_KEY: process.env.INTEGRATION_TOKEN_KEY ?? integrationTokenKey(profile),
};

// The first run creates a workspace; its secrets are kept (git-ignored, owner-only) for later starts.
// Its demo data is loaded once the tiers are up (below).
const credsFile = path.join(profile.dataDir, 'credentials.json');
if (!fs.existsSync(credsFile)) {
  const b = spawnSync(node, [dist('infra/bin/bootstrap.js'), '--json'], { env, encoding: 'utf8' });
  if (b.status !== 0) {
    say(`bootstrap failed: ${b.stderr}`);
    process.exit(1);
  }
  fs.writeFileSync(credsFile, b.stdout, { mode: 0o600 });
}
const creds = JSON.parse(fs.readFileSync(credsFile, 'utf8')) as Record<string, string>;

interface TierSpec {
  name: string;
  file: string;
  env: Record<string, string>;
}
const specs: TierSpec[] = [
  {
    name: 'ingest',
    file: tierEntry('ingest'),
    // The demo's 90 days arrive through the backfill endpoint, about 40 requests of 1000 events.
    env: {
      INGEST_PORT: String(profile.ingestPort),
      EVENTS_BACKFILLS_PER_MIN: process.env.EVENTS_BACKFILLS_PER_MIN ?? '600',
    },
  },
  { name: 'processors', file: tierEntry('processors'), env: { PROCESSORS_PORT: String(processorsPort) } },
  { name: 'core-api', file: tierEntry('core-api'), env: { API_PORT: String(profile.apiPort) } },
];
const tiers = specs.filter((t) => fs.existsSync(path.join(ROOT, t.file)));

const children: ChildProcess[] = [];
let stopping = false;
for (const t of tiers) {
  // Own process group: Ctrl-C reaches only this launcher, which asks each tier once to drain.
  const child = spawn(node, [path.join(ROOT, t.file)], {
    env: { ...env, ...t.env },
    stdio: ['ignore', 'inherit', 'inherit'],
    detached: true,
  });
  child.on('exit', (code, signal) => {
    if (stopping) return;
    say(`${t.name} exited (${signal ?? code}); stopping the others`);
    void shutdown(1);
  });
  children.push(child);
}

async function shutdown(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((r) => {
          if (c.exitCode !== null || c.signalCode !== null) return r();
          c.once('exit', () => r());
          c.kill('SIGTERM');
        }),
    ),
  );
  process.exit(code);
}
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});
process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));

const tour = await demoWorkspace();
process.stdout.write(
  [
    '',
    `Edge (HTTPS):        https://127.0.0.1:${profile.edgePort}/v1/…  ` +
      `(CA: ${path.relative(ROOT, edgeCaFile(profile))}; http://127.0.0.1:${profile.edgeHttpPort} redirects)`,
    `Surface A (ingest):  ${ingestUrl}/v1/ingest/events`,
    `Core API:            ${apiUrl}/v1`,
    `Metrics:             ${ingestUrl}/metrics, http://127.0.0.1:${processorsPort}/metrics, ${apiUrl}/metrics ` +
      '(ingest, processors, core API; npm run observe: a Prometheus with the alert rules)',
    `Workspace:           ${creds.tenant_id}`,
    `Ingestion key:       ${creds.ingestion_key}`,
    `Admin API key:       ${creds.api_key}`,
    `Admin sign-in:       ${creds.admin_email} / ${creds.admin_password}`,
    `(credentials kept in ${path.relative(ROOT, credsFile)}; Ctrl-C stops the tiers, npm run infra:down the servers)`,
    '',
    ...(tour ? tourLines(tour, creds.api_key) : []),
  ].join('\n') + '\n',
);

/**
 * Waits for the tiers, then loads the demo workspace (npm run seed -- --demo; on later starts it
 * finds the demo there and adds nothing, or finishes a load that Ctrl-C stopped). Its answer names
 * what the tour shows; undefined when the load failed, which leaves the tiers running.
 */
async function demoWorkspace(): Promise<DemoReport['tour'] | undefined> {
  const ports = [profile.ingestPort, processorsPort, profile.apiPort];
  const deadline = Date.now() + 180_000;
  for (const port of ports) {
    while (!(await ready(port))) {
      if (stopping) return undefined;
      if (Date.now() > deadline) {
        say(`the tier on port ${port} was not ready within 180 s; no demo data`);
        return undefined;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  say('loading the demo workspace (the first start only)…');
  const args = ['--demo', '--credentials', credsFile, '--api', apiUrl, '--ingest', ingestUrl];
  const seeded = spawn(node, [dist('infra/bin/seed.js'), ...args], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(seeded);
  let out = '';
  seeded.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const code = await new Promise<number | null>((r) => seeded.once('exit', (c) => r(c)));
  if (code !== 0) {
    say('the demo workspace could not be loaded (above); the tiers keep running');
    return undefined;
  }
  const report = JSON.parse(out) as DemoReport;
  const h = report.health;
  say(
    report.loaded
      ? `demo workspace loaded in ${(report.elapsed_ms / 1000).toFixed(1)} s: ${report.customers} customers, ` +
          `${report.events} usage events; health ${h.healthy} healthy, ${h.neutral} neutral, ${h.at_risk} at risk` +
          (report.resumed ? ` (finishing the load a stopped start began on ${report.day})` : '')
      : 'demo workspace already loaded',
  );
  return report.tour;
}

async function ready(port: number): Promise<boolean> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/readyz`)).ok;
  } catch {
    return false;
  }
}

/** The start output's tour: copy-paste requests that show what the product made of the demo data. */
function tourLines(t: DemoReport['tour'], key: string): string[] {
  const auth = `-H 'Authorization: Bearer ${key}'`;
  const event = JSON.stringify({
    events: [{ customer_id: t.at_risk_customer_id, event_name: 'report_exported', properties: { format: 'pdf' } }],
  });
  return [
    'Tour (the demo workspace: 100 customers, 90 days of usage):',
    '  # The portfolio: ARR, health distribution, the largest accounts at risk',
    `  curl -s ${apiUrl}/v1/analytics/portfolio ${auth}`,
    `  # Why ${t.at_risk_customer_name} is at risk: its score and each dimension`,
    `  curl -s ${apiUrl}/v1/customers/${t.at_risk_customer_id}/health ${auth}`,
    `  # The tasks the "${t.playbook_name}" playbook created for the owners`,
    `  curl -s '${apiUrl}/v1/tasks?playbook_id=${t.playbook_id}' ${auth}`,
    '  # Send an event, then find it in the event log',
    `  curl -s ${ingestUrl}/v1/events ${auth} -H 'Content-Type: application/json' -d '${event}'`,
    `  curl -s '${ingestUrl}/v1/events?customer_id=${t.at_risk_customer_id}&event_name=report_exported' ${auth}`,
    '',
  ];
}
