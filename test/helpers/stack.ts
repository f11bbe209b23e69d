import os from 'node:os';
import fs from 'node:fs';
import net from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { integrationTokenKey, ROOT, stackEnv, stackProfile, stackUrls, tierEntry } from '../../infra/stack.js';
import { ClickHouseEndpoints } from '../../lib/clickhouse-endpoints.js';
import { alive } from '../../infra/proc.js';
import { propertiesJson } from '../../lib/event-properties.js';
import { NATS_GOMAXPROCS } from '../../infra/services.js';
import { createWorkspace, type NewWorkspace, seedWorkspace } from '../../infra/workspace.js';
import { connectPg } from '../../lib/pg.js';
import { hashPassword, newPassword } from '../../lib/credentials/secrets.js';

/**
 * The test stack (npm test starts it: infra/cli.js up --profile test); TEST_STACK_PROFILE=cluster
 * points these helpers at the cluster profile instead (npm run test:cluster).
 */
export const profile = stackProfile(process.env.TEST_STACK_PROFILE ?? 'test');
export const urls = stackUrls(profile);
const chEndpoints = new ClickHouseEndpoints(urls.CLICKHOUSE_URL, 1000);
export const dist = (p: string) => path.join(ROOT, 'dist', p);

/** Anything with a teardown, like tap's `t`. */
export interface Teardowns {
  teardown(fn: () => unknown): void;
}

/** A test's workspace: what `npm run bootstrap` prints (infra/workspace.ts). */
export type Workspace = NewWorkspace;

/**
 * `node <args>` as a file and arguments to spawn, without the hooks tap puts into NODE_OPTIONS of
 * its test processes and of every process they spawn: with them a tier's start-up takes about twice
 * the CPU (core-api 4.4 CPU-seconds instead of 2.4, ingest 8 instead of 3.6). The shell drops them
 * and becomes node (`exec`: the same pid, so signals reach node).
 */
export function plainNode(args: string[]): [string, string[]] {
  return ['/bin/sh', ['-c', 'unset NODE_OPTIONS; exec "$0" "$@"', process.execPath, ...args]];
}

/**
 * A new, independent workspace: each test makes its own. Takes `npm run bootstrap`'s options; made
 * in this process (infra/workspace.ts, which the command runs too): a transaction, not a Node start.
 */
/**
 * The admins of the workspaces a test process makes share one password, hashed once: scrypt is
 * slow on purpose (about 0.1 CPU-second a hash), and a suite makes hundreds of workspaces.
 */
let adminPassword: Promise<{ plain: string; hash: string }> | undefined;

export async function bootstrap(args: string[] = []): Promise<Workspace> {
  const { values } = parseArgs({
    args,
    options: {
      name: { type: 'string', default: 'Demo workspace' },
      plan: { type: 'string', default: 'enterprise' },
      email: { type: 'string' },
    },
  });
  adminPassword ??= (async () => {
    const plain = newPassword();
    return { plain, hash: await hashPassword(plain) };
  })();
  const password = await adminPassword;
  return withPg((sql) =>
    createWorkspace(sql, {
      name: values.name!,
      plan: values.plan!,
      email: values.email,
      ingestUrl: `http://127.0.0.1:${profile.ingestPort}`,
      apiUrl: `http://127.0.0.1:${profile.apiPort}`,
      password,
    }),
  );
}

/** Customers cust-000001… (`npm run seed`'s options in `extra`: --source, --prefix, --products), in this process. */
export async function seed(tenantId: string, customers: number, extra: string[] = []): Promise<void> {
  const { values } = parseArgs({
    args: extra,
    options: {
      products: { type: 'string', default: '0' },
      source: { type: 'string', default: 'internal' },
      prefix: { type: 'string', default: 'cust-' },
    },
  });
  await withPg((sql) =>
    seedWorkspace(sql, {
      tenant: tenantId,
      customers,
      products: Number(values.products),
      source: values.source!,
      prefix: values.prefix!,
    }),
  );
}

/** A connection of its own for one call, closed after it: a file that never uses db() keeps no pool open. */
async function withPg<T>(fn: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = connectPg(urls.DATABASE_URL, 1);
  try {
    return await fn(sql);
  } finally {
    await sql.end();
  }
}

/**
 * `infra/cli.js up` for the profile until it succeeds (up to four tries, the later ones covering a
 * port still held by a killed server's socket): brings back a server a test stopped or killed.
 * When every try fails, what the last one said goes to the file's stderr: the reason is there.
 */
export async function stackUp(): Promise<number | null> {
  let said = '';
  const upOnce = () =>
    new Promise<number | null>((resolve) => {
      said = '';
      const p = spawn(...plainNode([dist('infra/cli.js'), 'up', '--profile', profile.name]), {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      p.stderr!.on('data', (d: Buffer) => {
        said = (said + d.toString()).slice(-4000);
      });
      p.once('close', (code) => resolve(code));
    });
  let code = await upOnce();
  for (let i = 0; i < 3 && code !== 0; i++) {
    await new Promise((r) => setTimeout(r, 500));
    code = await upOnce();
  }
  if (code !== 0)
    process.stderr.write(`infra up --profile ${profile.name} failed four times; the last said:\n${said}\n`);
  return code;
}

/** Where test files reserve the ports they hand to servers: one file per port, holding the owner's pid. */
const PORTS_DIR = path.join(os.tmpdir(), 'csp-test-ports');
/** Below Linux's ephemeral range (32768–60999), clear of the profiles' fixed ports (3xxx, 14222 and up) and common servers. */
const PORT_RANGE = [10_000, 14_000] as const;
/**
 * The ports of PORT_RANGE on the Fetch standard's "bad ports" list: Node.js's fetch refuses them
 * ("fetch failed", cause "bad port") before connecting, so a tier listening there never looks ready.
 */
const FETCH_BAD_PORTS: ReadonlySet<number> = new Set([10_080]);

/**
 * A port nothing listens on, reserved for this test process. A port the kernel picks for `listen(0)`
 * comes from the ephemeral range, where the source ports of outgoing connections come from too, and
 * it is free again once the probe closes: another file running beside this one could be handed the
 * same port before this file's server binds it (two uWS servers share a port through SO_REUSEPORT,
 * so each would answer the other's requests). Ports here are drawn below that range and reserved
 * with an exclusive file naming this process; a reservation of a process that is gone is taken over.
 */
export async function freePort(): Promise<number> {
  fs.mkdirSync(PORTS_DIR, { recursive: true });
  for (let i = 0; i < 200; i++) {
    const port = PORT_RANGE[0] + Math.floor(Math.random() * (PORT_RANGE[1] - PORT_RANGE[0]));
    if (FETCH_BAD_PORTS.has(port)) continue;
    const file = path.join(PORTS_DIR, String(port));
    try {
      fs.writeFileSync(file, String(process.pid), { flag: 'wx' });
    } catch {
      const owner = Number(fs.readFileSync(file, 'utf8'));
      if (owner === process.pid || alive(owner)) continue;
      fs.writeFileSync(file, String(process.pid));
    }
    if (await bindable(port)) return port;
  }
  throw new Error('no free port found in 200 tries');
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 20_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v as T;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  // fetch's own message is only "fetch failed": its cause says why (refused, reset, a bad port).
  const cause = (last as { cause?: unknown } | undefined)?.cause;
  const why = last ? `: ${String(last)}${cause ? ` (${String(cause)})` : ''}` : '';
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
}

/**
 * Resolves once the clock is in a later second than `ms` (default now): what the stack stamps in
 * whole seconds from then on sorts after what it stamped before.
 */
export async function nextSecond(ms = Date.now()): Promise<void> {
  const second = Math.floor(ms / 1000);
  await waitFor('the next second', () => Math.floor(Date.now() / 1000) > second, 2_000, 5);
}

export interface Tier {
  url: string;
  port: number;
  proc: ChildProcess;
  output: () => string;
  /** Sends a signal and waits for the process to exit. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts the tier's entry (infra/stack.ts `tierEntry`) against the test stack on a free port, waits for /healthz,
 * and registers its teardown. `portEnv` names the variable the tier reads its port from.
 */
/**
 * What a tier does on its own that would reach into other tests' workspaces: a processors tier
 * scores, materializes or evaluates playbooks of no workspace on schedule unless the test names them
 * (HEALTH_TENANTS, METRICS_TENANTS, PLAYBOOKS_TENANTS), and delivers the webhooks of no workspace
 * (WEBHOOK_TENANTS) unless the test names them: its retry schedule and timeout are the test's own.
 * Integration notifications and token refreshes likewise (INTEGRATION_TENANTS): another test's tier
 * would send them to a provider it does not know. Erasures likewise (ERASURE_TENANTS): a test that
 * follows one, or kills the processors mid-erasure, needs it carried out by its own tier.
 * The outbox relays likewise (OUTBOX_TENANTS, in `quietEnv`): they relay the workspaces the test
 * names for any of those jobs, none otherwise. A tier that relayed every workspace's rows published
 * those of a file on a JetStream of its own (`privateJetStream`) to the shared bus, where that
 * file's writer never saw them: health/changes lost up to 1,888 of its 15,000 health_changed so.
 */
const NO_WORKSPACE = '00000000-0000-0000-0000-000000000000';
const quiet: Record<string, Record<string, string>> = {
  // One process serving the port, not one per core: a supervisor and its workers would start two or
  // three Node processes for every ingest tier of the suite. Files about the supervised processes
  // (rate-limit, ingest-restart, chaos) ask for 2.
  ingest: { INGEST_PROCESSES: '1' },
  processors: {
    HEALTH_TENANTS: NO_WORKSPACE,
    METRICS_TENANTS: NO_WORKSPACE,
    PLAYBOOKS_TENANTS: NO_WORKSPACE,
    WEBHOOK_TENANTS: NO_WORKSPACE,
    INTEGRATION_TENANTS: NO_WORKSPACE,
    ERASURE_TENANTS: NO_WORKSPACE,
  },
};

/**
 * The polls of the jobs left quiet above: a tier whose test does not name the job's workspaces would
 * still look for their work several times a second (a PostgreSQL query each time, in every tier of
 * every file running). A test that names the workspaces gets the job's default poll, or its own.
 */
const quietPolls: Record<string, Record<string, string>> = {
  WEBHOOK_TENANTS: { WEBHOOK_POLL_MS: '60000' },
  INTEGRATION_TENANTS: { NOTIFY_POLL_MS: '60000', INTEGRATION_SYNC_POLL_MS: '60000' },
  ERASURE_TENANTS: { ERASURE_POLL_MS: '60000' },
};

/** `quiet[tier]` with the polls of the jobs the test leaves quiet made rare, and its outbox relays. */
function quietEnv(tier: string, env: Record<string, string>): Record<string, string> {
  const out = { ...quiet[tier] };
  if (tier !== 'processors') return out;
  for (const [tenants, polls] of Object.entries(quietPolls)) {
    if (env[tenants] === undefined) Object.assign(out, polls);
  }
  const named = new Set(Object.keys(quiet.processors).flatMap((k) => (env[k] ?? '').split(',').filter(Boolean)));
  named.delete(NO_WORKSPACE);
  out.OUTBOX_TENANTS = [...named].join(',') || NO_WORKSPACE;
  return out;
}

export async function startTier(
  t: Teardowns,
  tier: 'ingest' | 'processors' | 'core-api',
  env: Record<string, string> = {},
): Promise<Tier> {
  const portEnv = { ingest: 'INGEST_PORT', processors: 'PROCESSORS_PORT', 'core-api': 'API_PORT' }[tier];
  const port = env[portEnv] ? Number(env[portEnv]) : await freePort();
  let out = '';
  const proc = spawn(...plainNode([path.join(ROOT, tierEntry(tier))]), {
    env: {
      ...process.env,
      ...stackEnv(profile),
      STACK_PROFILE: profile.name,
      LOG_LEVEL: 'warn',
      WEBHOOK_ALLOW_HTTP: 'true',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      INTEGRATION_TOKEN_KEY: integrationTokenKey(profile),
      [portEnv]: String(port),
      ...quietEnv(tier, env),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout!.on('data', (d: Buffer) => {
    out = (out + d.toString()).slice(-20_000);
  });
  proc.stderr!.on('data', (d: Buffer) => {
    out = (out + d.toString()).slice(-20_000);
  });
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  const closed = new Promise((r) => proc.once('close', r));
  const ended = () => proc.exitCode !== null || proc.signalCode !== null;
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (ended()) return proc.exitCode;
    proc.kill(signal);
    return exited;
  };
  t.teardown(async () => {
    // A processors tier answers other files' requests too (a playbook run, a health recalculation:
    // NATS queue groups on the shared bus): killed outright, it would drop the one it was working on
    // and that file's core-api would wait out its timeout. SIGTERM drains them first. Not needed on a
    // bus of the file's own, nor when the file runs alone (the serial group: TEST_ALONE).
    const othersAsk = env.NATS_URL === undefined && process.env.TEST_ALONE !== '1';
    if (tier === 'processors' && othersAsk && !ended()) {
      proc.kill('SIGTERM');
      const late = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(late);
    }
    await stop('SIGKILL');
  });
  const url = `http://127.0.0.1:${port}`;
  // What /readyz last said, for the failure (a processors tier counts its stalled writers there).
  let said = 'no answer';
  await waitFor(
    `${tier} /readyz on ${port}`,
    async () => {
      if (ended()) return true;
      const res = await fetch(`${url}/readyz`);
      said = `${res.status} ${await res.text()}`;
      return res.ok;
    },
    // Files run side by side: a start-up can wait its turn for the CPU.
    60_000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; /readyz last answered: ${said}; the tier printed:\n${out.slice(-4000)}`);
  });
  if (ended()) {
    // A tier that exits while starting fails the start at once, with all it printed.
    await closed;
    throw new Error(`${tier} exited with ${proc.exitCode ?? proc.signalCode} while starting:\n${out}`);
  }
  return { url, port, proc, output: () => out, stop };
}

let sqlClient: postgres.Sql | undefined;
/** One PostgreSQL connection pool per test file, closed when the process ends. */
export function db(): postgres.Sql {
  sqlClient ??= postgres(urls.DATABASE_URL, { max: 4, onnotice: () => {} });
  return sqlClient;
}
export async function closeDb(): Promise<void> {
  await sqlClient?.end();
  sqlClient = undefined;
}

/** Runs a ClickHouse query and returns the rows (JSONEachRow). */
/** The csp.events columns an event's properties are stored in; `propertiesText` rebuilds the raw JSON of them. */
export const PROPERTY_COLUMNS = 'properties, prop_keys, prop_values, prop_kinds';

export interface StoredPropertyColumns {
  properties: string;
  prop_keys: string[];
  prop_values: string[];
  prop_kinds: string;
}

/** The raw JSON of a row read with PROPERTY_COLUMNS, as GET /v1/events shows it. */
export const propertiesText = (r: StoredPropertyColumns): string =>
  propertiesJson(r.properties, r.prop_keys, r.prop_values, r.prop_kinds);

export async function ch<T = Record<string, unknown>>(query: string): Promise<T[]> {
  const [res, text] = await chEndpoints.requestText('/?database=csp', {
    method: 'POST',
    body: `${query} FORMAT JSONEachRow`,
  });
  if (!res.ok) throw new Error(`ClickHouse: ${text}`);
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as T);
}

/** POST JSON (or raw bytes) and return status, headers and parsed body. */
export async function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: any; text: string }> {
  const raw = typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body);
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: raw,
  });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

/** A nats-server of a test's own: where it listens, and the faults a test can inject into it. */
export interface OwnNats {
  url: string;
  port: number;
  /** SIGKILLs the server and waits until it is gone. */
  kill(): Promise<void>;
  /** Starts it again on the same port with the same store (after `kill`). */
  restart(): Promise<void>;
}

/**
 * A nats-server of the test's own on a free port: without JetStream, a fault to inject (no stream
 * answers a publish) or a private bus (no other test's processors answer a request); with
 * `jetstream`, a store of its own (e.g. a stream with a tiny byte cap). Killing and restarting it
 * touches no other file's servers.
 */
export async function privateNats(t: Teardowns, o: { jetstream?: boolean } = {}): Promise<OwnNats> {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nats-js-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  // The stack's message size (infra/nats.conf) and its one Go scheduler thread (NATS_GOMAXPROCS).
  const conf = path.join(dir, 'nats.conf');
  fs.writeFileSync(
    conf,
    `listen: 127.0.0.1:${port}\nmax_payload: 8MB\n` +
      (o.jetstream ? `jetstream { store_dir: "${path.join(dir, 'store')}" }\n` : ''),
  );
  let proc: ChildProcess;
  const start = async () => {
    let out = '';
    const p = spawn('/usr/sbin/nats-server', ['-c', conf], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, GOMAXPROCS: NATS_GOMAXPROCS },
    });
    proc = p;
    p.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
    });
    p.stderr!.on('data', (d: Buffer) => {
      out += d.toString();
    });
    await waitFor(
      `nats-server on ${port}`,
      () =>
        new Promise<boolean>((resolve, reject) => {
          if (p.exitCode !== null) return reject(new Error(`nats-server exited: ${out}`));
          const s = net.connect(port, '127.0.0.1', () => {
            s.destroy();
            resolve(true);
          });
          s.on('error', () => resolve(false));
        }),
      10_000,
    );
  };
  const kill = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const gone = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGKILL');
    await gone;
  };
  t.teardown(kill);
  await start();
  return { url: `nats://127.0.0.1:${port}`, port, kill, restart: start };
}

/**
 * A JetStream of the test's own with the stack's streams and consumers (infra/streams.ts). Tiers
 * given `env` publish and consume there: what their writers hold, lose to a SIGKILL or wait for
 * is the test's alone, so the file can run beside others. ClickHouse and PostgreSQL stay shared.
 */
export async function privateJetStream(t: Teardowns): Promise<OwnNats & { env: { NATS_URL: string } }> {
  const nats = await privateNats(t, { jetstream: true });
  // Loaded here: most files never talk to NATS, and the client is a tenth of a CPU-second to load.
  const [{ connect }, { applyStreams }] = await Promise.all([import('nats'), import('../../infra/streams.js')]);
  const nc = await connect({ servers: nats.url });
  try {
    await applyStreams(await nc.jetstreamManager(), { maxBytes: 1024 ** 3, replicas: 1 });
  } finally {
    await nc.close();
  }
  return { ...nats, env: { NATS_URL: nats.url } };
}
