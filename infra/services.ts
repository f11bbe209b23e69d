import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, type StackProfile } from './stack.js';
import { InfraError, alive, isRoot, portOpen, readPid, spawnDetached, stopByPidFile, waitFor, which } from './proc.js';

type Say = (line: string) => void;

/** Debian packages the stack needs, with the binary each provides. PostgreSQL 15 comes with the machine. */
const PACKAGES: Array<{ pkg: string; bin: string }> = [
  { pkg: 'nats-server', bin: 'nats-server' },
  { pkg: 'clickhouse-server', bin: 'clickhouse-server' },
  { pkg: 'clickhouse-client', bin: 'clickhouse-client' },
  { pkg: 'caddy', bin: 'caddy' },
];

const PG_BIN = '/usr/lib/postgresql/15/bin';
const PG_TOOLS = new Set(['initdb', 'pg_ctl', 'pg_isready']);

/** Debian's /usr/bin wrappers for PostgreSQL tools want a registered cluster: call the real binaries. */
function findBin(bin: string): string | undefined {
  if (PG_TOOLS.has(bin) && fs.existsSync(path.join(PG_BIN, bin))) return path.join(PG_BIN, bin);
  return (
    which(bin) ??
    ['/usr/sbin', '/usr/bin', '/usr/local/bin'].map((d) => path.join(d, bin)).find((p) => fs.existsSync(p))
  );
}

export function ensurePackages(say: Say): void {
  const missing = PACKAGES.filter((p) => !findBin(p.bin)).map((p) => p.pkg);
  if (!findBin('initdb') || !findBin('pg_ctl'))
    throw new InfraError('PostgreSQL 15 (initdb, pg_ctl) is not installed: apt-get install postgresql-15');
  if (missing.length === 0) return;
  const line = `apt-get update && apt-get install -y --no-install-recommends ${missing.join(' ')}`;
  if (!isRoot()) throw new InfraError(`missing Debian packages: ${missing.join(', ')}. Run as root:\n  ${line}`);
  say(`installing ${missing.join(', ')} from Debian's packages (once)`);
  // Keep the packages' own init scripts from starting system-wide copies on the default ports.
  const policy = '/usr/sbin/policy-rc.d';
  const ownPolicy = !fs.existsSync(policy);
  if (ownPolicy) fs.writeFileSync(policy, '#!/bin/sh\nexit 101\n', { mode: 0o755 });
  try {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    execFileSync('apt-get', ['update', '-qq'], { stdio: ['ignore', 'ignore', 'inherit'], env });
    execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env,
    });
  } catch {
    throw new InfraError(`apt-get could not install ${missing.join(', ')}; try by hand:\n  ${line}`);
  } finally {
    if (ownPolicy) fs.rmSync(policy, { force: true });
  }
  const still = PACKAGES.filter((p) => !findBin(p.bin)).map((p) => p.pkg);
  if (still.length) throw new InfraError(`still missing after apt-get: ${still.join(', ')}`);
}

function render(template: string, vars: Record<string, string | number>): string {
  return fs.readFileSync(path.join(ROOT, template), 'utf8').replace(/\$\{(\w+)\}/g, (_, k: string) => {
    if (!(k in vars)) throw new Error(`template ${template}: no value for ${k}`);
    return String(vars[k]);
  });
}

function vars(p: StackProfile): Record<string, string | number> {
  return {
    PROFILE: p.name,
    DATA_DIR: p.dataDir,
    NATS_PORT: p.natsPort,
    NATS_MONITOR_PORT: p.natsMonitorPort,
    CH_HTTP_PORT: p.chHttpPort,
    CH_TCP_PORT: p.chTcpPort,
    EDGE_PORT: p.edgePort,
    EDGE_HTTP_PORT: p.edgeHttpPort,
    INGEST_PORT: p.ingestPort,
    API_PORT: p.apiPort,
  };
}

/** Refuses to start a server on a port something else already holds. */
async function claimPort(port: number, what: string): Promise<void> {
  if (await portOpen(port))
    throw new InfraError(`cannot start ${what}: port 127.0.0.1:${port} is already taken by another process`);
}

interface Service {
  name: string;
  /** true when it is running from our pid file and answering. */
  up(p: StackProfile): Promise<boolean>;
  start(p: StackProfile): Promise<void>;
  stop(p: StackProfile): Promise<boolean>;
}

const natsPidFile = (p: StackProfile) => path.join(p.dataDir, 'nats.pid');
const nats: Service = {
  name: 'nats-server',
  async up(p) {
    return alive(readPid(natsPidFile(p))) && (await portOpen(p.natsPort));
  },
  async start(p) {
    await claimPort(p.natsPort, 'nats-server');
    fs.mkdirSync(path.join(p.dataDir, 'nats'), { recursive: true });
    const conf = path.join(p.dataDir, 'nats.conf');
    fs.writeFileSync(conf, render('infra/nats.conf', vars(p)));
    const log = path.join(p.dataDir, 'nats.log');
    const pid = spawnDetached(findBin('nats-server')!, ['-c', conf], log);
    fs.writeFileSync(natsPidFile(p), String(pid));
    await waitFor(
      'nats-server',
      async () => {
        const res = await fetch(`http://127.0.0.1:${p.natsMonitorPort}/jsz`);
        return res.ok;
      },
      20_000,
      log,
    );
  },
  stop: (p) => stopByPidFile(natsPidFile(p)),
};

const chPidFile = (p: StackProfile) => path.join(p.dataDir, 'clickhouse.pid');
async function chPing(p: StackProfile): Promise<boolean> {
  const res = await fetch(`http://127.0.0.1:${p.chHttpPort}/?query=SELECT%201`);
  return res.ok && (await res.text()).trim() === '1';
}
const clickhouse: Service = {
  name: 'clickhouse-server',
  async up(p) {
    return alive(readPid(chPidFile(p))) && (await chPing(p).catch(() => false));
  },
  async start(p) {
    await claimPort(p.chHttpPort, 'clickhouse-server (http)');
    await claimPort(p.chTcpPort, 'clickhouse-server (native)');
    const dir = path.join(p.dataDir, 'clickhouse');
    for (const d of ['data', 'tmp', 'user_files', 'format_schemas'])
      fs.mkdirSync(path.join(dir, d), { recursive: true });
    fs.writeFileSync(path.join(dir, 'config.xml'), render('infra/clickhouse/config.xml', vars(p)));
    fs.writeFileSync(path.join(dir, 'users.xml'), render('infra/clickhouse/users.xml', vars(p)));
    const log = path.join(dir, 'stdout.log');
    // Run in the foreground of a detached child so that the pid we record is the server's own.
    const pid = spawnDetached(findBin('clickhouse-server')!, [`--config-file=${path.join(dir, 'config.xml')}`], log, {
      cwd: dir,
    });
    fs.writeFileSync(chPidFile(p), String(pid));
    await waitFor('clickhouse-server', () => chPing(p), 60_000, path.join(dir, 'server.err.log'));
  },
  stop: (p) => stopByPidFile(chPidFile(p), 30_000),
};

const pgDir = (p: StackProfile) => path.join(p.dataDir, 'pg');
/** PostgreSQL refuses to run as root: as root we run its tools as the postgres user. */
function asPg(bin: string, args: string[], stdio: 'ignore' | 'inherit' = 'ignore'): void {
  const full = findBin(bin)!;
  if (isRoot()) execFileSync('runuser', ['-u', 'postgres', '--', full, ...args], { stdio: ['ignore', stdio, 'pipe'] });
  else execFileSync(full, args, { stdio: ['ignore', stdio, 'pipe'] });
}
async function pgReady(p: StackProfile): Promise<boolean> {
  try {
    asPg('pg_isready', ['-h', '127.0.0.1', '-p', String(p.pgPort), '-q']);
    return true;
  } catch {
    return false;
  }
}
const postgresService: Service = {
  name: 'postgresql',
  async up(p) {
    return alive(readPid(path.join(pgDir(p), 'postmaster.pid'))) && (await pgReady(p));
  },
  async start(p) {
    await claimPort(p.pgPort, 'postgresql');
    const dir = pgDir(p);
    fs.mkdirSync(p.dataDir, { recursive: true });
    if (!fs.existsSync(path.join(dir, 'PG_VERSION'))) {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      if (isRoot()) execFileSync('chown', ['-R', 'postgres:postgres', dir]);
      try {
        asPg('initdb', ['-D', dir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--locale=C.UTF-8']);
      } catch (err) {
        throw new InfraError(`initdb failed in ${dir}: ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`);
      }
    }
    const log = path.join(dir, 'server.log');
    if (isRoot()) {
      fs.closeSync(fs.openSync(log, 'a'));
      execFileSync('chown', ['postgres:postgres', log]);
    }
    const opts = `-p ${p.pgPort} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c max_connections=300 -c shared_buffers=256MB -c synchronous_commit=on -c fsync=on`;
    try {
      asPg('pg_ctl', ['-D', dir, '-l', log, '-o', opts, '-w', '-t', '60', 'start']);
    } catch (err) {
      throw new InfraError(
        `postgresql did not start: ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}\n${log}`,
      );
    }
    await waitFor('postgresql', () => pgReady(p), 30_000, log);
  },
  async stop(p) {
    const dir = pgDir(p);
    if (!alive(readPid(path.join(dir, 'postmaster.pid')))) return false;
    asPg('pg_ctl', ['-D', dir, '-m', 'fast', '-w', 'stop']);
    return true;
  },
};

const edgePidFile = (p: StackProfile) => path.join(p.dataDir, 'caddy.pid');
/** Caddy in front of the tiers: it starts before them and answers 502 until they are up. */
const edge: Service = {
  name: 'caddy (edge)',
  async up(p) {
    return alive(readPid(edgePidFile(p))) && (await portOpen(p.edgePort));
  },
  async start(p) {
    await claimPort(p.edgePort, 'caddy (https)');
    await claimPort(p.edgeHttpPort, 'caddy (http)');
    fs.mkdirSync(path.join(p.dataDir, 'caddy'), { recursive: true });
    const conf = path.join(p.dataDir, 'Caddyfile');
    fs.writeFileSync(conf, render('infra/caddy/Caddyfile', vars(p)));
    const log = path.join(p.dataDir, 'caddy.log');
    // HOME and XDG dirs inside .data: Caddy writes its autosave and local CA nowhere else.
    const home = path.join(p.dataDir, 'caddy');
    const pid = spawnDetached(findBin('caddy')!, ['run', '--config', conf, '--adapter', 'caddyfile'], log, {
      env: { ...process.env, HOME: home, XDG_DATA_HOME: home, XDG_CONFIG_HOME: home },
    });
    fs.writeFileSync(edgePidFile(p), String(pid));
    await waitFor('caddy', () => portOpen(p.edgePort), 20_000, log);
  },
  stop: (p) => stopByPidFile(edgePidFile(p)),
};

export const SERVICES: Service[] = [nats, clickhouse, postgresService, edge];

/** The edge's local CA certificate (PEM), for clients that want to verify it. */
export function edgeCaFile(p: StackProfile): string {
  return path.join(p.dataDir, 'caddy', 'pki', 'authorities', 'local', 'root.crt');
}

export async function upAll(p: StackProfile, say: Say): Promise<void> {
  fs.mkdirSync(p.dataDir, { recursive: true });
  // Start the three in parallel; each waits until it answers.
  await Promise.all(
    SERVICES.map(async (s) => {
      if (await s.up(p)) return;
      const t0 = Date.now();
      await s.start(p);
      say(`${s.name} started (${Date.now() - t0} ms)`);
    }),
  );
}

export async function downAll(p: StackProfile, say: Say): Promise<void> {
  for (const s of [...SERVICES].reverse()) {
    if (await s.stop(p)) say(`${s.name} stopped`);
  }
}
