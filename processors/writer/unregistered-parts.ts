import { isConnectionError } from '../../lib/clickhouse-endpoints.js';
import type { Logger } from '../../lib/logger.js';
import { type ClickHouse, chErrorCode } from '../clickhouse.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A part's name, `<partition>_<min block>_<max block>_<level>[_<mutation>]`, as block ranges. */
interface PartRange {
  partition: string;
  min: number;
  max: number;
}

export function partRange(name: string): PartRange | undefined {
  const m = /^(.+?)_(\d+)_(\d+)_(\d+)(?:_\d+)?$/.exec(name);
  return m ? { partition: m[1], min: Number(m[2]), max: Number(m[3]) } : undefined;
}

/** Whether ZooKeeper's list names this part or a part covering its blocks (a merge's result). */
export function registered(name: string, zk: readonly PartRange[]): boolean {
  const p = partRange(name);
  if (!p) return true; // not a part name this check understands: never act on it
  return zk.some((z) => z.partition === p.partition && z.min <= p.min && z.max >= p.max);
}

/**
 * Parts of unknown status on a replicated cluster. An insert whose commit lost ZooKeeper (code 319)
 * leaves its part visible on the replica that wrote it, whether or not the commit reached
 * ZooKeeper. When it did not, ClickHouse 18.16 means to detach the part five minutes later, but its
 * part-check task does not wake itself for a part not yet due: the part stays visible until
 * something else wakes that task or the server restarts, hours later perhaps, and then vanishes. A
 * count that saw it would have acknowledged rows that disappear afterwards.
 *
 * So before a thorough count, each reachable server of the list is asked for the active parts of
 * the table that ZooKeeper lists neither by name nor through a covering part for that replica. A
 * server with one gets `SYSTEM RESTART REPLICA`: the table's startup compares its parts with
 * ZooKeeper and detaches those (kept as `detached/ignored_<name>`), which is what ClickHouse would
 * have done, now instead of at an unknown time. The count then sees only rows that stay.
 *
 * Race-free by the order of the reads: a part becomes active only after its commit reached
 * ZooKeeper; a merge or fetch registers its result (covering the parts it replaces) before it swaps
 * them locally; a dropped range leaves the local parts before ZooKeeper. So a part active before
 * ZooKeeper is read, uncovered there, and still active after, was never registered.
 *
 * A server that cannot be reached is passed over: it detaches such parts at its startup, before
 * it serves again. While ZooKeeper cannot be read the check waits (nothing can be inserted into a
 * replicated table then either).
 */
export async function detachUnregisteredParts(ch: ClickHouse, table: string, log: Logger): Promise<void> {
  if (!ch.cluster) return;
  const replicas = new Set<string>();
  for (const url of ch.endpoints.urls) {
    let warned = 0;
    const warn = (level: 'warn' | 'error', msg: string, fields: object) => {
      if (Date.now() - warned < 30_000) return;
      warned = Date.now();
      log[level]({ server: url, table, ...fields }, msg);
    };
    for (;;) {
      try {
        const found = await unregisteredParts(ch, url, table);
        if (found.replica) replicas.add(url);
        if (found.parts.length === 0) break;
        if (found.rows > found.total * MAX_SHARE_RESTARTED) {
          // The table's startup would refuse to load (replicated_max_ratio_of_wrong_parts) and
          // leave it detached: an operator decides (docs/cluster.md).
          warn(
            'error',
            'parts of unknown status hold too large a share of the replica to restart it; suspect batches wait',
            {
              parts: found.parts,
              rows: found.rows,
              total: found.total,
            },
          );
          await sleep(5_000);
          continue;
        }
        log.error(
          { server: url, table, parts: found.parts, rows: found.rows },
          'parts of an insert of unknown status never reached ZooKeeper: restarting the replica to detach them',
        );
        await restartReplica(ch, url, table, log);
      } catch (err) {
        if (isConnectionError(err)) break;
        warn('warn', 'cannot check the replica for parts of unknown status yet; suspect batches wait', {
          err: String((err as Error).message ?? err).slice(0, 300),
        });
        await sleep(1000);
      }
    }
  }
  await warnOfUnlistedServers(ch, table, replicas.size, log);
}

/** ClickHouse's TABLE_ALREADY_EXISTS: the table is attached. */
const TABLE_ALREADY_EXISTS = 57;

/**
 * `SYSTEM RESTART REPLICA`, then the table attached again whatever the restart's outcome. The
 * restart detaches the table and builds it anew from its metadata; when that fails (ZooKeeper
 * unreachable or its session lost meanwhile: 18.16 fails the statement), the table stays detached.
 * The server then answers "Table … doesn't exist" for it, every read and insert through that
 * replica fails, and a `CREATE TABLE … ON CLUSTER` refuses the data folder it left. So `ATTACH
 * TABLE` (its metadata file is kept) is retried until the server has the table: it fails while
 * ZooKeeper is away and answers "already exists" when the restart did attach it. A server that
 * cannot be reached attaches it at its own startup.
 */
export async function restartReplica(ch: ClickHouse, url: string, table: string, log: Logger): Promise<void> {
  const name = `${ch.storageDatabase}.${table}`;
  let failed: unknown;
  await ch.commandAt(url, `SYSTEM RESTART REPLICA ${name}`).catch((err: unknown) => {
    failed = err;
  });
  let warned = 0;
  let unreachableSince = 0;
  for (;;) {
    try {
      await ch.commandAt(url, `ATTACH TABLE ${name}`);
      log.error(
        { server: url, table, err: String((failed as Error)?.message ?? failed).slice(0, 300) },
        'the replica restart left the table detached: attached it again',
      );
      return;
    } catch (err) {
      if (chErrorCode(err) === TABLE_ALREADY_EXISTS) return;
      // Gone for 10 s: a server that stopped attaches the table at its startup.
      if (isConnectionError(err) && Date.now() - (unreachableSince ||= Date.now()) > 10_000) return;
      if (!isConnectionError(err)) unreachableSince = 0;
      if (Date.now() - warned >= 30_000) {
        warned = Date.now();
        log.error(
          { server: url, table, err: String((err as Error).message ?? err).slice(0, 300) },
          'the replica restart left the table detached and it cannot be attached yet: retrying',
        );
      }
      await sleep(1000);
    }
  }
}

const comparedListed = new Set<string>();

/**
 * Servers CLICKHOUSE_URL does not name cannot be checked: compared once per table and process
 * (the first check after start), said as an error to act on.
 */
async function warnOfUnlistedServers(ch: ClickHouse, table: string, checked: number, log: Logger): Promise<void> {
  if (comparedListed.has(table)) return;
  const [r] = await ch.rows<{ n: string }>(
    `SELECT count() AS n FROM ${ch.database}.replicas WHERE database = '${ch.storageDatabase}' AND table = '${table}'
     SETTINGS skip_unavailable_shards = 1`,
  );
  comparedListed.add(table);
  if (Number(r?.n ?? 0) <= checked) return;
  log.error(
    { table, replicas: Number(r.n), listed: checked },
    'CLICKHOUSE_URL does not name every server of the cluster: parts of unknown status on the others go unchecked',
  );
}

/**
 * A replicated table's startup refuses to load when parts ZooKeeper does not know hold more than
 * `replicated_max_ratio_of_wrong_parts` (0.5 by default) of its rows; restarts stay well below.
 */
const MAX_SHARE_RESTARTED = 0.25;

interface Unregistered {
  /** Whether the server holds a replica of the table. */
  replica: boolean;
  parts: string[];
  /** Rows in those parts, and in every active part of the replica. */
  rows: number;
  total: number;
}

async function unregisteredParts(ch: ClickHouse, url: string, table: string): Promise<Unregistered> {
  const none = { replica: false, parts: [], rows: 0, total: 0 };
  const where = `database = '${ch.storageDatabase}' AND table = '${table}'`;
  const [replica] = await ch.rowsAt<{ path: string; expired: number }>(
    url,
    `SELECT replica_path AS path, is_session_expired AS expired FROM system.replicas WHERE ${where}`,
  );
  // Not a replica of this table, or being restarted right now (by another writer: that restart
  // detaches such parts; a count meanwhile fails on that server and its batch is retried).
  if (!replica) return none;
  // A restart now would fail to attach the table again: wait until the replica is back in session.
  if (Number(replica.expired)) throw new Error('the replica has no ZooKeeper session yet');
  const empty = { ...none, replica: true };
  const active = (extra = '') =>
    ch.rowsAt<{ n: string; rows: string }>(
      url,
      `SELECT name AS n, rows FROM system.parts WHERE ${where} AND active ${extra}`,
    );
  const parts = await active();
  if (parts.length === 0) return empty;
  const zk = (
    await ch.rowsAt<{ n: string }>(url, `SELECT name AS n FROM system.zookeeper WHERE path = '${replica.path}/parts'`)
  )
    .map((r) => partRange(r.n))
    .filter((r): r is PartRange => r !== undefined);
  const unknown = parts.filter((p) => !registered(p.n, zk));
  if (unknown.length === 0) return empty;
  const still = await active(`AND name IN (${unknown.map((p) => `'${p.n}'`).join(',')})`);
  const sum = (list: Array<{ rows: string }>) => list.reduce((n, p) => n + Number(p.rows), 0);
  return { replica: true, parts: still.map((p) => p.n), rows: sum(still), total: sum(parts) };
}
