import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { integrationTokenKey, ROOT, stackEnv, stackProfile } from './stack.js';
import { edgeCaFile } from './services.js';

/**
 * npm start: brings the local stack up (installing what is missing when root), bootstraps a demo
 * workspace on the first run, and runs every tier in the foreground. Ctrl-C stops the tiers
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
const credsFile = path.join(profile.dataDir, 'credentials.json');
if (!fs.existsSync(credsFile)) {
  const b = spawnSync(node, [dist('infra/bin/bootstrap.js'), '--json'], { env, encoding: 'utf8' });
  if (b.status !== 0) {
    say(`bootstrap failed: ${b.stderr}`);
    process.exit(1);
  }
  // A few demo customers (external ids cust-000001…) so the example requests below resolve.
  const tenant = (JSON.parse(b.stdout) as { tenant_id: string }).tenant_id;
  spawnSync(node, [dist('infra/bin/seed.js'), '--tenant', tenant, '--customers', '100', '--products', '3'], {
    env,
    stdio: 'ignore',
  });
  fs.writeFileSync(credsFile, b.stdout, { mode: 0o600 });
}
const creds = JSON.parse(fs.readFileSync(credsFile, 'utf8')) as Record<string, string>;

interface TierSpec {
  name: string;
  file: string;
  env: Record<string, string>;
}
const specs: TierSpec[] = [
  { name: 'ingest', file: 'ingest/main.js', env: { INGEST_PORT: String(profile.ingestPort) } },
  { name: 'processors', file: 'processors/main.js', env: { PROCESSORS_PORT: String(profile.ingestPort + 200) } },
  { name: 'core-api', file: 'core-api/main.js', env: { API_PORT: String(profile.apiPort) } },
];
const tiers = specs.filter((t) => fs.existsSync(dist(t.file)));

const children: ChildProcess[] = [];
let stopping = false;
for (const t of tiers) {
  // Own process group: Ctrl-C reaches only this launcher, which asks each tier once to drain.
  const child = spawn(node, [dist(t.file)], {
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

process.stdout.write(
  [
    '',
    `Edge (HTTPS):        https://127.0.0.1:${profile.edgePort}/v1/…  (CA: ${path.relative(ROOT, edgeCaFile(profile))}; http://127.0.0.1:${profile.edgeHttpPort} redirects)`,
    `Surface A (ingest):  ${ingestUrl}/v1/ingest/events`,
    `Core API:            ${apiUrl}/v1`,
    `Workspace:           ${creds.tenant_id}`,
    `Ingestion key:       ${creds.ingestion_key}`,
    `Admin API key:       ${creds.api_key}`,
    `Admin sign-in:       ${creds.admin_email} / ${creds.admin_password}`,
    `(credentials kept in ${path.relative(ROOT, credsFile)}; Ctrl-C stops the tiers, npm run infra:down the servers)`,
    '',
    `Try: curl -X POST ${ingestUrl}/v1/ingest/events -H 'X-API-Key: ${creds.ingestion_key}' -H 'Content-Type: application/json' \\`,
    `       -d '{"events":[{"event_name":"login","external_customer_id":"cust-000001"}]}'`,
    '',
  ].join('\n') + '\n',
);

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
