import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** One nats-server of a profile. `clusterPort` carries the routes between the servers of a cluster. */
export interface NatsNode {
  name: string;
  port: number;
  monitorPort: number;
  clusterPort: number;
}

/** One clickhouse-server of a profile, with its place in the cluster (macros {shard} and {replica}). */
export interface ClickhouseNode {
  name: string;
  httpPort: number;
  tcpPort: number;
  interserverPort: number;
  shard: string;
  replica: string;
}

/**
 * The local stack's addresses. Four profiles run side by side without touching each other, each
 * with its own ports and data folder under .data/: `dev` (npm start) and `test` (npm test) run one
 * server of each kind, and so does `serial`, the test stack's twin on which npm test runs the files
 * that stop, kill or reconfigure servers (test/suites.ts) while the others use `test`; `cluster` runs
 * three nats-servers (one JetStream cluster, streams with 3 replicas) and four clickhouse-servers
 * (2 shards x 2 replicas) coordinated by one ZooKeeper.
 * A one-node profile is the cluster profile with one node: the same stream definitions and the
 * same DDL (infra/apply.ts derives the cluster's from schema.sql).
 */
export interface StackProfile {
  name: 'dev' | 'test' | 'serial' | 'cluster';
  dataDir: string;
  nats: NatsNode[];
  clickhouse: ClickhouseNode[];
  /** The ClickHouse cluster's name in remote_servers; undefined for a single server. */
  chCluster?: string;
  /** ZooKeeper's client port; only a replicated ClickHouse needs it. */
  zookeeperPort?: number;
  /** The first nats-server's ports. */
  natsPort: number;
  natsMonitorPort: number;
  /** The first clickhouse-server's ports. */
  chHttpPort: number;
  chTcpPort: number;
  pgPort: number;
  ingestPort: number;
  apiPort: number;
  /** HTTPS edge (Caddy); its plain-HTTP port answers with redirects to it. */
  edgePort: number;
  edgeHttpPort: number;
}

/**
 * The first lines of an ES module bundle (esbuild's banner): packages written as CommonJS call
 * require(), which an ES module does not have.
 */
export const REQUIRE_BANNER =
  "import { createRequire as __createRequire } from 'node:module'; " +
  'const require = __createRequire(import.meta.url);';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export type TierName = 'ingest' | 'processors' | 'core-api';

/**
 * The tiers started from one bundle (infra/bin/bundle-tiers.ts). Not ingest: its request path ran
 * about 5 % slower from a bundle in the benchmark, and it serves the hot path.
 */
export const BUNDLED_TIERS: readonly TierName[] = ['processors', 'core-api'];

/** The file a tier is started from, relative to the repository. */
export const tierEntry = (tier: TierName): string =>
  path.join('dist', tier, BUNDLED_TIERS.includes(tier) ? 'bundle.js' : 'main.js');

type Ports = Pick<
  StackProfile,
  | 'natsPort'
  | 'natsMonitorPort'
  | 'chHttpPort'
  | 'chTcpPort'
  | 'pgPort'
  | 'ingestPort'
  | 'apiPort'
  | 'edgePort'
  | 'edgeHttpPort'
> & { zookeeperPort: number };

/**
 * Every fixed port lies below 32768, the start of Linux's ephemeral range
 * (net.ipv4.ip_local_port_range): a port inside it can be held for a moment as the local end of
 * some client's connection, and a server started then fails with "Address already in use".
 * Derived ports: nats routes at natsPort + 2000, ClickHouse interserver at chTcpPort + 9, one more
 * per node; processors at ingestPort + 200.
 */
const PROFILES: Record<StackProfile['name'], Ports> = {
  dev: {
    natsPort: 14222,
    natsMonitorPort: 18222,
    chHttpPort: 18123,
    chTcpPort: 19000,
    pgPort: 15432,
    ingestPort: 3100,
    apiPort: 3200,
    edgePort: 3443,
    edgeHttpPort: 3080,
    zookeeperPort: 12181,
  },
  test: {
    natsPort: 24222,
    natsMonitorPort: 28222,
    chHttpPort: 28123,
    chTcpPort: 29000,
    pgPort: 25432,
    ingestPort: 23100,
    apiPort: 23200,
    edgePort: 23443,
    edgeHttpPort: 23080,
    zookeeperPort: 22181,
  },
  // No port of it equals another profile's, derived ones included (nats routes at 28222, the
  // ClickHouse interserver port at 26009, processors at 26300).
  serial: {
    natsPort: 26222,
    natsMonitorPort: 27222,
    chHttpPort: 26123,
    chTcpPort: 26000,
    pgPort: 26432,
    ingestPort: 26100,
    apiPort: 26200,
    edgePort: 26443,
    edgeHttpPort: 26080,
    zookeeperPort: 26181,
  },
  cluster: {
    natsPort: 30222,
    natsMonitorPort: 31222,
    chHttpPort: 31123,
    chTcpPort: 32000,
    pgPort: 30432,
    ingestPort: 30100,
    apiPort: 30200,
    edgePort: 30443,
    edgeHttpPort: 30080,
    zookeeperPort: 32181,
  },
};

const NATS_NODES = { dev: 1, test: 1, serial: 1, cluster: 3 };
/** Shards x replicas of each profile's ClickHouse. */
const CH_LAYOUT = { dev: [1, 1], test: [1, 1], serial: [1, 1], cluster: [2, 2] };
/** The name of the ClickHouse cluster in remote_servers (and of the NATS cluster). */
export const CLUSTER_NAME = 'csp';

/** `name` is the --profile option or STACK_PROFILE of the calling command; `dev` when neither is given. */
export function stackProfile(given = 'dev'): StackProfile {
  if (!Object.hasOwn(PROFILES, given))
    throw new Error(`unknown stack profile "${given}" (${Object.keys(PROFILES).join(', ')})`);
  const name = given as StackProfile['name'];
  const p = PROFILES[name];
  const nats = Array.from({ length: NATS_NODES[name] }, (_, i) => ({
    name: NATS_NODES[name] === 1 ? 'nats' : `nats${i + 1}`,
    port: p.natsPort + i,
    monitorPort: p.natsMonitorPort + i,
    clusterPort: p.natsPort + 2000 + i,
  }));
  const [shards, replicas] = CH_LAYOUT[name];
  const clickhouse: ClickhouseNode[] = [];
  for (let s = 1; s <= shards; s++)
    for (let r = 1; r <= replicas; r++) {
      const i = clickhouse.length;
      clickhouse.push({
        name: i === 0 && shards * replicas === 1 ? 'clickhouse' : `clickhouse${i + 1}`,
        httpPort: p.chHttpPort + i,
        tcpPort: p.chTcpPort + i,
        interserverPort: p.chTcpPort + 9 + i,
        shard: String(s).padStart(2, '0'),
        replica: `r${r}`,
      });
    }
  const replicated = clickhouse.length > 1;
  return {
    name,
    dataDir: path.join(ROOT, '.data', name),
    nats,
    clickhouse,
    chCluster: replicated ? CLUSTER_NAME : undefined,
    ...p,
    zookeeperPort: replicated ? p.zookeeperPort : undefined,
  };
}

export interface StackUrls {
  /** Every nats-server, comma-separated: clients fail over between them. */
  NATS_URL: string;
  /** Every clickhouse-server's HTTP endpoint, comma-separated, in the order to try them. */
  CLICKHOUSE_URL: string;
  DATABASE_URL: string;
}

/** A clickhouse-server's HTTP address. */
export const clickhouseUrl = (n: ClickhouseNode): string => `http://127.0.0.1:${n.httpPort}`;

export function stackUrls(p: StackProfile): StackUrls {
  return {
    NATS_URL: p.nats.map((n) => `nats://127.0.0.1:${n.port}`).join(','),
    CLICKHOUSE_URL: p.clickhouse.map(clickhouseUrl).join(','),
    DATABASE_URL: `postgres://postgres@127.0.0.1:${p.pgPort}/csp`,
  };
}

/** The tiers' settings for a profile's stack: its URLs, and the ClickHouse cluster when there is one. */
export function stackEnv(p: StackProfile): StackUrls & { CLICKHOUSE_CLUSTER: string } {
  return { ...stackUrls(p), CLICKHOUSE_CLUSTER: p.chCluster ?? '' };
}

/**
 * The local stack's key for provider tokens at rest (INTEGRATION_TOKEN_KEY): 32 random bytes,
 * base64, generated on first use into the profile's data folder (owner-only, git-ignored).
 */
export function integrationTokenKey(p: StackProfile): string {
  const file = path.join(p.dataDir, 'integration-token.key');
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    fs.mkdirSync(p.dataDir, { recursive: true });
    const key = randomBytes(32).toString('base64');
    try {
      fs.writeFileSync(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
      return key;
    } catch {
      // Written by another process meanwhile: theirs is the key.
      return fs.readFileSync(file, 'utf8').trim();
    }
  }
}
