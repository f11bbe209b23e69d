import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { CLUSTER_NAME, clickhouseUrl, ROOT, type ClickhouseNode, type NatsNode, type StackProfile } from './stack.js';
import { release as releaseHugePages, reserve as reserveHugePages } from './huge-pages.js';
import { InfraError, alive, isRoot, portOpen, readPid, spawnDetached, stopByPidFile, waitFor, which } from './proc.js';

type Say = (line: string) => void;

/** Debian packages the stack needs, with the file each provides. PostgreSQL 15 comes with the machine. */
const PACKAGES: Array<{ pkg: string; bin: string }> = [
  { pkg: 'nats-server', bin: 'nats-server' },
  { pkg: 'clickhouse-server', bin: 'clickhouse-server' },
  { pkg: 'clickhouse-client', bin: 'clickhouse-client' },
  { pkg: 'caddy', bin: 'caddy' },
];
/** What a replicated ClickHouse adds: ZooKeeper (it brings a Java runtime). */
const CLUSTER_PACKAGES: Array<{ pkg: string; bin: string }> = [
  { pkg: 'zookeeper', bin: '/usr/share/java/zookeeper.jar' },
  { pkg: 'zookeeper', bin: 'java' },
];

const PG_BIN = '/usr/lib/postgresql/15/bin';
const PG_TOOLS = new Set(['initdb', 'pg_ctl', 'pg_isready', 'postgres']);

/** Debian's /usr/bin wrappers for PostgreSQL tools want a registered cluster: call the real binaries. */
function findBin(bin: string): string | undefined {
  if (path.isAbsolute(bin)) return fs.existsSync(bin) ? bin : undefined;
  if (PG_TOOLS.has(bin) && fs.existsSync(path.join(PG_BIN, bin))) return path.join(PG_BIN, bin);
  return (
    which(bin) ??
    ['/usr/sbin', '/usr/bin', '/usr/local/bin'].map((d) => path.join(d, bin)).find((p) => fs.existsSync(p))
  );
}

/**
 * Prometheus and promtool (Debian's `prometheus`): the test stacks need them (test/observability/
 * checks the alert rules and scrapes the tiers), `npm run observe` too; the other profiles install
 * them only when `observe` asks.
 */
const OBSERVABILITY_PACKAGES: Array<{ pkg: string; bin: string }> = [
  { pkg: 'prometheus', bin: 'prometheus' },
  { pkg: 'prometheus', bin: 'promtool' },
];

export function ensurePackages(p: StackProfile, say: Say): void {
  const wanted = p.chCluster ? [...PACKAGES, ...CLUSTER_PACKAGES] : PACKAGES;
  if (!findBin('initdb') || !findBin('pg_ctl'))
    throw new InfraError('PostgreSQL 15 (initdb, pg_ctl) is not installed: apt-get install postgresql-15');
  installMissing([...wanted, ...(p.name === 'test' || p.name === 'serial' ? OBSERVABILITY_PACKAGES : [])], say);
}

/** The paths of `prometheus` and `promtool`, installed first (as root) when missing. */
export function ensurePrometheus(say: Say): { prometheus: string; promtool: string } {
  installMissing(OBSERVABILITY_PACKAGES, say);
  return { prometheus: findBin('prometheus')!, promtool: findBin('promtool')! };
}

/** Installs the Debian packages of `wanted` whose file is missing (as root; else says the apt-get line). */
export function installMissing(wanted: Array<{ pkg: string; bin: string }>, say: Say): void {
  const missing = [...new Set(wanted.filter((w) => !findBin(w.bin)).map((w) => w.pkg))];
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
  const still = wanted.filter((w) => !findBin(w.bin)).map((w) => w.pkg);
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

export interface Service {
  name: string;
  /** true when it is running from our pid file and answering. */
  up(p: StackProfile): Promise<boolean>;
  start(p: StackProfile): Promise<void>;
  stop(p: StackProfile): Promise<boolean>;
  /** The pid file of the server process (what a fault test signals). */
  pidFile(p: StackProfile): string;
}

/** The routes block of a NATS cluster's server: every other server of the profile. */
function natsClusterBlock(p: StackProfile, node: NatsNode): string {
  if (p.nats.length === 1) return '';
  const routes = p.nats.filter((n) => n !== node).map((n) => `nats-route://127.0.0.1:${n.clusterPort}`);
  return (
    `cluster {\n  name: ${CLUSTER_NAME}\n  listen: 127.0.0.1:${node.clusterPort}\n` +
    `  routes: [${routes.join(', ')}]\n}`
  );
}

function natsService(node: NatsNode): Service {
  const pidFile = (p: StackProfile) => path.join(p.dataDir, `${node.name}.pid`);
  return {
    name: serverName(node.name, 'nats-server'),
    pidFile,
    async up(p) {
      return alive(readPid(pidFile(p))) && (await portOpen(node.port));
    },
    async start(p) {
      await claimPort(node.port, 'nats-server');
      fs.mkdirSync(path.join(p.dataDir, node.name), { recursive: true });
      const conf = path.join(p.dataDir, `${node.name}.conf`);
      fs.writeFileSync(
        conf,
        render('infra/nats.conf', {
          ...vars(p),
          SERVER_NAME: p.nats.length === 1 ? `csp_${p.name}` : `csp_${p.name}_${node.name}`,
          STORE_DIR: path.join(p.dataDir, node.name),
          NATS_PORT: node.port,
          NATS_MONITOR_PORT: node.monitorPort,
          NATS_CLUSTER: natsClusterBlock(p, node),
        }),
      );
      const log = path.join(p.dataDir, `${node.name}.log`);
      const pid = spawnDetached(findBin('nats-server')!, ['-c', conf], log, {
        env: { ...process.env, GOMAXPROCS: process.env.NATS_GOMAXPROCS ?? NATS_GOMAXPROCS },
      });
      fs.writeFileSync(pidFile(p), String(pid));
      await waitFor(
        node.name,
        async () => (await fetch(`http://127.0.0.1:${node.monitorPort}/healthz`)).ok,
        20_000,
        log,
      );
    },
    stop: (p) => stopByPidFile(pidFile(p)),
  };
}

/**
 * The cores nats-server's Go scheduler runs on (`GOMAXPROCS`; `NATS_GOMAXPROCS` overrides it). One:
 * the local stacks share a small machine with the tiers, where a nats-server free to use every
 * core hands each message between threads that then wait for a core the tiers hold. On the
 * benchmark's 2-core VM one core cost nats-server 30 % less CPU per event at full load (1.3–1.5
 * against 2.0–2.1 µs) and, end to end at 50k events/s, 5.2 against 6.8 µs, with the queryable p99
 * at 1.4 s against 2.0 s (bench/RESULTS.md). Its ceiling stays one core's (about 550k events/s).
 */
export const NATS_GOMAXPROCS = '1';

/** A server's name in messages: "nats-server" for the one of a single-node profile, else its node name. */
const serverName = (node: string, single: string) => (/\d$/.test(node) ? `${single} ${node}` : single);

/** remote_servers, macros and ZooKeeper of one node of a replicated ClickHouse; empty for a single server. */
function clickhouseClusterXml(p: StackProfile, node: ClickhouseNode): string {
  if (!p.chCluster) return '';
  const replica = (n: ClickhouseNode) => `<replica><host>127.0.0.1</host><port>${n.tcpPort}</port></replica>`;
  const shards = [...new Set(p.clickhouse.map((n) => n.shard))].map(
    (s) =>
      `<shard><internal_replication>true</internal_replication>${p.clickhouse
        .filter((n) => n.shard === s)
        .map(replica)
        .join('')}</shard>`,
  );
  // Every server as its own shard: what reads a system table of every node (csp.processes, csp.replicas).
  const nodes = p.clickhouse.map((n) => `<shard>${replica(n)}</shard>`);
  return [
    `<interserver_http_host>127.0.0.1</interserver_http_host>`,
    `<interserver_http_port>${node.interserverPort}</interserver_http_port>`,
    `<remote_servers><${p.chCluster}>${shards.join('')}</${p.chCluster}>`,
    `<${p.chCluster}_nodes>${nodes.join('')}</${p.chCluster}_nodes></remote_servers>`,
    `<zookeeper><node><host>127.0.0.1</host><port>${p.zookeeperPort}</port></node>` +
      '<session_timeout_ms>10000</session_timeout_ms></zookeeper>',
    `<macros><shard>${node.shard}</shard><replica>${node.replica}</replica></macros>`,
    `<distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>`,
  ].join('\n  ');
}

/**
 * What a replicated ClickHouse's queries need (users.xml): inserts into a Distributed table reach
 * their shard before they return (the writer acknowledges only stored rows), no block deduplication
 * (rows are unique by event_id, and identical blocks a materialized view makes from two different
 * inserts must both count), subqueries over Distributed tables read each shard's own rows (a
 * workspace lives on one shard), and replicas are tried in the configured order.
 */
function clickhouseClusterSettings(p: StackProfile): string {
  if (!p.chCluster) return '';
  return [
    '<insert_distributed_sync>1</insert_distributed_sync>',
    '<insert_deduplicate>0</insert_deduplicate>',
    '<distributed_product_mode>local</distributed_product_mode>',
    '<load_balancing>in_order</load_balancing>',
    '<connect_timeout_with_failover_ms>1000</connect_timeout_with_failover_ms>',
  ].join('\n      ');
}

/**
 * The test stacks log every statement they run (system.query_log, flushed every 7.5 s), whole: the
 * default cut at 100,000 characters would hide the end of the largest queries (a metric over
 * thousands of event names). `npm run test:clickhouse-current` reads the log after the stack suite
 * and runs each statement's shape on a current ClickHouse (test/clickhouse-current/, docs/clickhouse.md).
 * Other profiles log nothing: the query log is a write per statement that production leaves to its operators.
 */
export const QUERY_LOG_CUT = 16 * 1024 * 1024;
const logsQueries = (p: StackProfile) => p.name === 'test' || p.name === 'serial';

function clickhouseQueryLogXml(p: StackProfile): string {
  if (!logsQueries(p)) return '';
  return [
    '<query_log><database>system</database><table>query_log</table>',
    '<partition_by>toYYYYMM(event_date)</partition_by><flush_interval_milliseconds>7500</flush_interval_milliseconds>',
    '</query_log>',
  ].join('');
}

function clickhouseQueryLogSettings(p: StackProfile): string {
  if (!logsQueries(p)) return '';
  return `<log_queries>1</log_queries><log_queries_cut_to_length>${QUERY_LOG_CUT}</log_queries_cut_to_length>`;
}

/**
 * The test stacks' merges stop at parts of 32 MiB. A suite inserts about 4 million rows from many
 * files, 2 million of them in the two big parts of the erasure test, whose mutations rewrite whole
 * parts: merged up to the default 150 GiB, the big parts were merged again with every small one
 * (2.2 GB merged for 0.7 GB inserted in one run; 1.7 GB with the cap). Nothing reads differently:
 * rollups are summed and replaced rows read with FINAL or argMax whatever the parts. Other profiles
 * merge as ClickHouse does by default.
 */
function clickhouseMergeTreeXml(p: StackProfile): string {
  if (p.name !== 'test' && p.name !== 'serial') return '';
  return `<max_bytes_to_merge_at_max_space_in_pool>${32 * 1024 * 1024}</max_bytes_to_merge_at_max_space_in_pool>`;
}

const chDir = (p: StackProfile, node: ClickhouseNode) => path.join(p.dataDir, node.name);

async function chPing(node: ClickhouseNode): Promise<boolean> {
  const res = await fetch(`${clickhouseUrl(node)}/?query=SELECT%201`);
  return res.ok && (await res.text()).trim() === '1';
}

function clickhouseService(node: ClickhouseNode): Service {
  const pidFile = (p: StackProfile) => path.join(p.dataDir, `${node.name}.pid`);
  return {
    name: serverName(node.name, 'clickhouse-server'),
    pidFile,
    async up(p) {
      if (!alive(readPid(pidFile(p)))) return false;
      // Ours and alive but not answering: still starting (a restart on a loaded machine can outlast
      // an earlier call's wait). Wait for it; a second server started beside it would fail on the
      // first's lock and leave its own pid in the pid file.
      await waitFor(node.name, () => chPing(node), 60_000, path.join(chDir(p, node), 'server.err.log'));
      return true;
    },
    async start(p) {
      await claimPort(node.httpPort, 'clickhouse-server (http)');
      await claimPort(node.tcpPort, 'clickhouse-server (native)');
      const dir = chDir(p, node);
      for (const d of ['data', 'tmp', 'user_files', 'format_schemas'])
        fs.mkdirSync(path.join(dir, d), { recursive: true });
      const v = {
        ...vars(p),
        CH_DIR: dir,
        CH_HTTP_PORT: node.httpPort,
        CH_TCP_PORT: node.tcpPort,
        CH_CLUSTER_XML: clickhouseClusterXml(p, node),
        CH_CLUSTER_SETTINGS: clickhouseClusterSettings(p),
        CH_MERGE_TREE_XML: clickhouseMergeTreeXml(p),
        CH_QUERY_LOG_XML: clickhouseQueryLogXml(p),
        CH_QUERY_LOG_SETTINGS: clickhouseQueryLogSettings(p),
      };
      fs.writeFileSync(path.join(dir, 'config.xml'), render('infra/clickhouse/config.xml', v));
      fs.writeFileSync(path.join(dir, 'users.xml'), render('infra/clickhouse/users.xml', v));
      const log = path.join(dir, 'stdout.log');
      // Run in the foreground of a detached child so that the pid we record is the server's own.
      const pid = spawnDetached(findBin('clickhouse-server')!, [`--config-file=${path.join(dir, 'config.xml')}`], log, {
        cwd: dir,
        env: { ...process.env, MALLOC_CONF: CLICKHOUSE_MALLOC_CONF },
      });
      fs.writeFileSync(pidFile(p), String(pid));
      await waitFor(node.name, () => chPing(node), 60_000, path.join(dir, 'server.err.log'));
    },
    stop: (p) => stopByPidFile(pidFile(p), 30_000),
  };
}

/**
 * Debian's clickhouse-server allocates through the system's jemalloc, configured here. Every insert
 * builds its columns in fresh memory; with 4 KB pages and jemalloc's default of handing freed pages
 * back after 10 s, about a quarter of the server's CPU under the benchmark's load went to page
 * faults (perf). 2 MB transparent huge pages for its heap (`thp:always`: jemalloc asks for them
 * with madvise, which the kernel's default THP mode honours) and freed pages kept for a minute
 * took the writer's landing rate from 38k to 90k rows/s on the same machine (bench/RESULTS.md).
 */
export const CLICKHOUSE_MALLOC_CONF = 'thp:always,metadata_thp:always,dirty_decay_ms:60000,muzzy_decay_ms:60000';

export const ZOOKEEPER_JAR = '/usr/share/java/zookeeper.jar';

/**
 * Four-letter word `srvr` over ZooKeeper's client port: true once it serves sessions. `ruok`
 * answers "imok" as soon as the process runs, while it still loads its snapshot and drops every
 * session handshake; a clickhouse-server started then gives up on its replicated tables and exits.
 */
function zkServing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host: '127.0.0.1' });
    let out = '';
    sock.setTimeout(2000, () => sock.destroy());
    sock.on('connect', () => sock.write('srvr'));
    sock.on('data', (d) => {
      out += d.toString();
    });
    sock.on('close', () => resolve(/^Mode: (standalone|leader|follower)$/m.test(out)));
    sock.on('error', () => resolve(false));
  });
}

/**
 * One ZooKeeper server (Debian's package, run with its own config and data folder): a replicated ClickHouse's
 * coordinator.
 */
const zookeeper: Service = {
  name: 'zookeeper',
  pidFile: (p) => path.join(p.dataDir, 'zookeeper.pid'),
  async up(p) {
    return alive(readPid(this.pidFile(p))) && (await zkServing(p.zookeeperPort!));
  },
  async start(p) {
    const port = p.zookeeperPort!;
    await claimPort(port, 'zookeeper');
    const dir = path.join(p.dataDir, 'zookeeper');
    fs.mkdirSync(path.join(dir, 'data'), { recursive: true });
    const conf = path.join(dir, 'zoo.cfg');
    fs.writeFileSync(
      conf,
      [
        'tickTime=2000',
        `dataDir=${path.join(dir, 'data')}`,
        `clientPort=${port}`,
        'clientPortAddress=127.0.0.1',
        'maxSessionTimeout=60000',
        'admin.enableServer=false',
        '4lw.commands.whitelist=ruok,srvr,mntr',
        'autopurge.purgeInterval=1',
        '',
      ].join('\n'),
    );
    const log = path.join(dir, 'zookeeper.log');
    const pid = spawnDetached(
      findBin('java')!,
      ['-Xmx512m', '-cp', ZOOKEEPER_JAR, 'org.apache.zookeeper.server.quorum.QuorumPeerMain', conf],
      log,
      { cwd: dir },
    );
    fs.writeFileSync(this.pidFile(p), String(pid));
    await waitFor('zookeeper', () => zkServing(port), 60_000, log);
  },
  stop(p) {
    return stopByPidFile(this.pidFile(p));
  },
};

/**
 * PostgreSQL's data folder: .data/<profile>/pg, or where that is a link (below), the folder it
 * points to. PostgreSQL's tools resolve no links for us: they are given the real path.
 */
function pgDir(p: StackProfile): string {
  const inCheckout = path.join(p.dataDir, 'pg');
  try {
    return fs.realpathSync(inCheckout);
  } catch {
    return inCheckout;
  }
}

/**
 * As root, PostgreSQL runs as user `postgres`, which must reach its data folder. A checkout in a
 * folder that `postgres` cannot traverse (a home folder of mode 0700, as /root is) keeps the
 * data under that user's home instead, in a folder of its own per checkout and profile, with
 * .data/<profile>/pg a link to it: nothing of the checkout is opened to another user, and removing
 * .data/<profile> still starts the next stack from an empty database (a new link, a wiped folder).
 */
function placePgDir(p: StackProfile): void {
  const inCheckout = path.join(p.dataDir, 'pg');
  const linked = fs.lstatSync(inCheckout, { throwIfNoEntry: false });
  if (linked?.isSymbolicLink()) {
    const target = fs.readlinkSync(inCheckout);
    if (!fs.existsSync(target)) pgOwnedDir(target);
    return;
  }
  if (linked || !isRoot() || pgCanReach(p.dataDir)) return;
  const home =
    execFileSync('getent', ['passwd', 'postgres'], { encoding: 'utf8' }).split(':')[5] || '/var/lib/postgresql';
  const key = createHash('sha256').update(ROOT).digest('hex').slice(0, 12);
  const outside = path.join(home, 'csp-stacks', `${key}-${p.name}`, 'pg');
  fs.rmSync(outside, { recursive: true, force: true });
  pgOwnedDir(outside);
  fs.symlinkSync(outside, inCheckout);
}

/** `dir` and the folders made for it, owned by `postgres`, owner-only. */
function pgOwnedDir(dir: string): void {
  const first = fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (first) execFileSync('chown', ['-R', 'postgres:postgres', first]);
}

/** Whether user `postgres` can traverse every folder down to `dir`. */
function pgCanReach(dir: string): boolean {
  try {
    execFileSync('runuser', ['-u', 'postgres', '--', 'test', '-x', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
/** PostgreSQL refuses to run as root: as root we run its tools as the postgres user. */
function asPg(bin: string, args: string[], stdio: 'ignore' | 'inherit' | 'pipe' = 'ignore'): string {
  const full = findBin(bin)!;
  const out = isRoot()
    ? execFileSync('runuser', ['-u', 'postgres', '--', full, ...args], { stdio: ['ignore', stdio, 'pipe'] })
    : execFileSync(full, args, { stdio: ['ignore', stdio, 'pipe'] });
  return out ? String(out) : '';
}
/** The server's settings, given on its command line (pg_ctl -o) and to `postgres -C`. */
const pgSettings = (p: StackProfile) => [
  'listen_addresses=127.0.0.1',
  `unix_socket_directories=${pgDir(p)}`,
  'max_connections=300',
  'shared_buffers=256MB',
  'huge_pages=try',
  'synchronous_commit=on',
  'fsync=on',
];
const hugePagesLedger = (p: StackProfile) => path.join(p.dataDir, 'pg-huge-pages');
/** Huge pages the stopped server's shared memory would take (PostgreSQL computes it); 0 when it cannot say. */
function pgHugePagesNeeded(p: StackProfile): number {
  try {
    const args = ['-D', pgDir(p), ...pgSettings(p).flatMap((s) => ['-c', s]), '-C', 'shared_memory_size_in_huge_pages'];
    return Number(asPg('postgres', args, 'pipe').trim()) || 0;
  } catch {
    return 0;
  }
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
  pidFile: (p) => path.join(pgDir(p), 'postmaster.pid'),
  async up(p) {
    return alive(readPid(path.join(pgDir(p), 'postmaster.pid'))) && (await pgReady(p));
  },
  async start(p) {
    await claimPort(p.pgPort, 'postgresql');
    fs.mkdirSync(p.dataDir, { recursive: true });
    placePgDir(p);
    const dir = pgDir(p);
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
    const opts = [`-p ${p.pgPort}`, ...pgSettings(p).map((s) => `-c ${s}`)].join(' ');
    reserveHugePages(pgHugePagesNeeded(p), hugePagesLedger(p));
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
    releaseHugePages(hugePagesLedger(p));
    return true;
  },
};

const edgePidFile = (p: StackProfile) => path.join(p.dataDir, 'caddy.pid');
/** Caddy in front of the tiers: it starts before them and answers 502 until they are up. */
const edge: Service = {
  name: 'caddy (edge)',
  pidFile: edgePidFile,
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

/** Every server of a profile, in start order. */
export function services(p: StackProfile): Service[] {
  return [
    ...p.nats.map(natsService),
    ...(p.zookeeperPort ? [zookeeper] : []),
    ...p.clickhouse.map(clickhouseService),
    postgresService,
    edge,
  ];
}

/** One server of a profile by name (nats2, clickhouse3, zookeeper, …): what fault tests stop and start. */
export function service(p: StackProfile, name: string): Service {
  const s = services(p).find((x) => x.name === name || x.name.endsWith(` ${name}`));
  if (!s) throw new InfraError(`no server "${name}" in the ${p.name} profile`);
  return s;
}

/** The edge's local CA certificate (PEM), for clients that want to verify it. */
export function edgeCaFile(p: StackProfile): string {
  return path.join(p.dataDir, 'caddy', 'pki', 'authorities', 'local', 'root.crt');
}

/**
 * Starts every server of the profile that is not running, in parallel, ZooKeeper before ClickHouse;
 * each waits until it answers. Returns the servers it started. When one fails, the ones this call
 * started (or was starting) are stopped again before the error is thrown, so a failed start leaves
 * nothing running that would hold a port against the next one.
 */
export async function upAll(p: StackProfile, say: Say): Promise<Service[]> {
  fs.mkdirSync(p.dataDir, { recursive: true });
  const began = Date.now();
  const all = services(p);
  const launched: Service[] = [];
  const start = async (s: Service) => {
    if (await s.up(p)) return;
    const t0 = Date.now();
    launched.push(s);
    await s.start(p);
    say(`${s.name} started (${Date.now() - t0} ms)`);
  };
  const zk = all.find((s) => s === zookeeper);
  const zkUp = zk ? start(zk) : Promise.resolve();
  const results = await Promise.allSettled([
    zkUp,
    ...all
      .filter((s) => s !== zk)
      .map(async (s) => {
        if (s.name.startsWith('clickhouse')) await zkUp;
        await start(s);
      }),
  ]);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    // Only the servers this call spawned (their pid file written since it began): one that failed
    // before spawning (a port already taken) must not signal whatever an older pid file names.
    const spawned = launched.filter(
      (s) => (fs.statSync(s.pidFile(p), { throwIfNoEntry: false })?.mtimeMs ?? 0) >= began,
    );
    await stopStarted(p, spawned, say);
    throw failed.reason;
  }
  return launched;
}

/** Stops `started` (what upAll returned), last started first: undoing a start that failed later on. */
export async function stopStarted(p: StackProfile, started: Service[], say: Say): Promise<void> {
  for (const s of [...started].reverse()) {
    try {
      if (await s.stop(p)) say(`${s.name} stopped (the start failed)`);
    } catch (err) {
      say(`${s.name} could not be stopped: ${String(err)}`);
    }
  }
}

export async function downAll(p: StackProfile, say: Say): Promise<void> {
  for (const s of services(p).reverse()) {
    if (await s.stop(p)) say(`${s.name} stopped`);
  }
}
