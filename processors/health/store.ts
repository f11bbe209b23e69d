import { uuidv7 } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { inTenant, type Sql } from '../../lib/pg.js';
import type { ClickHouse } from '../clickhouse.js';
import type { Scored } from './score.js';

/**
 * Writes a calculation's results:
 * - customer_health in chunks of CHUNK customers, two chunks at a time. A chunk first reads the
 *   stored rows (score, status, breakdown as text) and keeps only the customers whose row is new or
 *   differs: an unchanged workspace costs reads only, and PostgreSQL parses no JSON for it;
 * - the rest go through one statement (unnest arrays) that locks their existing rows (FOR UPDATE,
 *   in id order) and compares again under the lock, so a scheduled run and an on-demand
 *   recalculation of the same customer serialise and the second sees the first's status: one
 *   status change, one health_changed. A scheduled calculation never overwrites one of the same
 *   second or later (an on-demand one made meanwhile, perhaps under a newer model);
 * - the health_changed outbox rows are inserted by that same statement, so a change and its event
 *   commit together or not at all, whenever the process dies;
 * - a `force`d write (the on-demand path) stamps calculated_at even when nothing changed, later
 *   than the one shown (see Written.stamped);
 * - a complete scheduled run then records its time once for the workspace (markRun): the rows it
 *   left alone were calculated then too, and the API shows the later of the two times
 *   (customer_health_current) instead of the run rewriting every row to move calculated_at;
 * - then, after the commits, the history points (csp.health_history) in one ClickHouse insert.
 */

export const CHUNK = 5000;
const LANES = 2;

export interface Written {
  /** customer_health rows inserted or updated. */
  written: number;
  /** Status changes, i.e. health_changed events queued. */
  changed: number;
  /**
   * Forced writes only: the calculated_at written per customer id (a customer missing was deleted
   * meanwhile). A customer calculated earlier in the same second is stamped a second after it:
   * history keeps the day's point by calculated_at, which has whole seconds, so two calculations
   * of one customer must not tie.
   */
  stamped?: Map<string, Date>;
}

interface ChunkArgs {
  ids: string[];
  scores: number[];
  statuses: string[];
  dimensions: string[];
  eventIds: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function storeScores(
  sql: Sql,
  log: Logger,
  tenantId: string,
  ids: string[],
  scored: Scored,
  calculatedAt: Date,
  opts: { force?: boolean; stopping?: () => boolean } = {},
): Promise<Written> {
  const total: Written = { written: 0, changed: 0 };
  let next = 0;
  let failed = false;
  const lane = async () => {
    for (let from = next; from < ids.length && !failed; from = next) {
      next += CHUNK;
      if (opts.stopping?.()) throw new StoreError('health_run_aborted', 'stopped before the run was stored');
      const to = Math.min(ids.length, from + CHUNK);
      for (let attempt = 0; ; attempt++) {
        try {
          const args = opts.force
            ? chunkArgs(ids, scored, from, to, () => true)
            : await differing(sql, ids, scored, from, to);
          if (!args.ids.length) break;
          const w = await writeChunk(sql, tenantId, args, calculatedAt, opts.force === true);
          total.written += w.written;
          total.changed += w.changed;
          if (w.stamped) {
            total.stamped ??= new Map();
            for (const [id, at] of w.stamped) total.stamped.set(id, at);
          }
          break;
        } catch (err) {
          // Deadlocks and lost connections are worth another try; the write is one statement, so
          // a failed attempt left nothing behind. The other lane stops at its next chunk.
          if (attempt >= 3 || opts.stopping?.()) {
            failed = true;
            throw err;
          }
          log.warn({ err: String(err), tenantId, attempt }, 'customer_health chunk failed; retrying');
          await sleep(200 * 2 ** attempt);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: LANES }, lane));
  return total;
}

function chunkArgs(ids: string[], s: Scored, from: number, to: number, keep: (i: number) => boolean): ChunkArgs {
  const a: ChunkArgs = { ids: [], scores: [], statuses: [], dimensions: [], eventIds: [] };
  for (let i = from; i < to; i++) {
    if (!keep(i)) continue;
    a.ids.push(ids[i]);
    a.scores.push(s.score[i]);
    a.statuses.push(s.status[i]);
    a.dimensions.push(s.dimensions[i]);
    a.eventIds.push(uuidv7());
  }
  return a;
}

/** Customers of [from, to) whose stored row is missing or differs from the new one. */
async function differing(sql: Sql, ids: string[], s: Scored, from: number, to: number): Promise<ChunkArgs> {
  const rows = await sql<Array<{ id: string; score: number; status: string; d: string }>>`
    SELECT customer_id::text AS id, score, status, dimensions::text AS d FROM customer_health
    WHERE customer_id = ANY(${ids.slice(from, to)}::uuid[])`;
  const stored = new Map<string, { score: number; status: string; d: string }>();
  for (const r of rows) stored.set(r.id, r);
  return chunkArgs(ids, s, from, to, (i) => {
    const p = stored.get(ids[i]);
    return !p || p.score !== s.score[i] || p.status !== s.status[i] || p.d !== s.dimensions[i];
  });
}

async function writeChunk(sql: Sql, tenantId: string, a: ChunkArgs, at: Date, force: boolean): Promise<Written> {
  const [r] = await sql<Array<Omit<Written, 'stamped'> & { ids: string[] | null; ats: number[] | null }>>`
    WITH input AS (
      SELECT u.customer_id, u.score, u.status, u.dimensions::jsonb AS dimensions, u.event_id
      FROM unnest(${a.ids}::uuid[], ${a.scores}::int2[], ${a.statuses}::text[], ${a.dimensions}::text[],
                  ${a.eventIds}::uuid[]) AS u (customer_id, score, status, dimensions, event_id)
    ),
    prev AS (
      SELECT h.customer_id, h.score, h.status, h.dimensions, h.calculated_at,
             GREATEST(h.calculated_at, COALESCE(m.calculated_at, r.calculated_at)) AS shown_at
      FROM customer_health h
        LEFT JOIN health_runs r ON r.tenant_id = h.tenant_id
        LEFT JOIN health_run_misses m ON m.customer_id = h.customer_id
      WHERE h.customer_id IN (SELECT customer_id FROM input)
      ORDER BY h.customer_id FOR UPDATE OF h
    ),
    changed AS (
      SELECT i.customer_id, i.score, i.status, i.dimensions, i.event_id, p.status AS prev_status,
             p.score AS prev_score,
             CASE WHEN ${force}::boolean AND p.shown_at >= ${at}::timestamptz
                  THEN p.shown_at + interval '1 second' ELSE ${at}::timestamptz END AS at
      FROM input i LEFT JOIN prev p ON p.customer_id = i.customer_id
      WHERE p.customer_id IS NULL OR ${force}::boolean
         OR (p.calculated_at < ${at} AND (p.score <> i.score OR p.status <> i.status OR p.dimensions <> i.dimensions))
    ),
    up AS (
      INSERT INTO customer_health (customer_id, tenant_id, score, status, dimensions, calculated_at)
      SELECT ch.customer_id, ${tenantId}, ch.score, ch.status, ch.dimensions, ch.at
      FROM changed ch JOIN customers c ON c.id = ch.customer_id
      ON CONFLICT (customer_id) DO UPDATE SET score = EXCLUDED.score, status = EXCLUDED.status,
        dimensions = EXCLUDED.dimensions, calculated_at = EXCLUDED.calculated_at
      RETURNING customer_id, calculated_at
    ),
    events AS (
      INSERT INTO event_outbox (id, tenant_id, customer_id, event_name, properties, occurred_at)
      SELECT event_id, ${tenantId}, customer_id, 'health_changed',
        jsonb_build_object('from_status', prev_status, 'to_status', status, 'score', score,
                           'previous_score', prev_score), at
      FROM changed WHERE prev_status <> status
      RETURNING 1
    )
    SELECT (SELECT count(*) FROM up)::int AS written, (SELECT count(*) FROM events)::int AS changed, s.ids, s.ats
    FROM (SELECT array_agg(customer_id::text) AS ids, array_agg(extract(epoch FROM calculated_at)::float8) AS ats
          FROM up WHERE ${force}::boolean) s`;
  const w: Written = { written: r.written, changed: r.changed };
  if (force) w.stamped = new Map((r.ids ?? []).map((id, i) => [id, new Date(Number(r.ats![i]) * 1000)]));
  return w;
}

/**
 * Records a complete scheduled run of the workspace at `at`, the time it read its customers and
 * calculated them all, in one statement whatever the workspace's size. `restored` are the customers
 * it covered that an earlier run had left out (health_run_misses): from now on they follow the
 * workspace's runs again. A run that failed or stopped records nothing, so no customer shows the
 * time of a calculation that was not stored.
 */
export async function markRun(sql: Sql, tenantId: string, at: Date, restored: string[]): Promise<void> {
  await sql`
    WITH covered AS (
      DELETE FROM health_run_misses WHERE ${inTenant(tenantId)} AND customer_id = ANY(${restored}::uuid[])
    )
    INSERT INTO health_runs AS r (tenant_id, calculated_at) VALUES (${tenantId}, ${at})
    ON CONFLICT (tenant_id) DO UPDATE SET calculated_at = GREATEST(r.calculated_at, EXCLUDED.calculated_at)`;
}

/** JSONEachRow rows of csp.health_history: one point per scored customer, day = the run's UTC date. */
export function historyRows(tenantId: string, ids: string[], scored: Scored, calculatedAt: Date): string {
  const day = calculatedAt.toISOString().slice(0, 10);
  const at = Math.floor(calculatedAt.getTime() / 1000);
  const head = `{"tenant_id":"${tenantId}","customer_id":"`;
  const tail = `","day":"${day}","score":`;
  const parts: string[] = new Array(ids.length);
  for (let i = 0; i < ids.length; i++)
    parts[i] = `${head}${ids[i]}${tail}${scored.score[i]},"status":"${scored.status[i]}","calculated_at":${at}}\n`;
  return parts.join('');
}

/** The history point of one on-demand calculation, in historyRows' form. */
export function historyPoint(tenantId: string, customerId: string, score: number, status: string, at: Date): string {
  const day = at.toISOString().slice(0, 10);
  const ts = Math.floor(at.getTime() / 1000);
  return (
    `{"tenant_id":"${tenantId}","customer_id":"${customerId}","day":"${day}","score":${score},` +
    `"status":"${status}","calculated_at":${ts}}\n`
  );
}

/** One insert, retried a few times: the scores are committed, the history point is worth a retry. */
export async function insertHistory(ch: ClickHouse, log: Logger, rows: string, queryId: string): Promise<void> {
  if (!rows) return;
  const body = Buffer.from(rows);
  for (let attempt = 0; ; attempt++) {
    try {
      await ch.insert('health_history', body, `${queryId}-${attempt}`);
      return;
    } catch (err) {
      if (attempt >= 4) {
        log.error({ err: String(err), queryId }, 'health history insert failed; the points of this run are lost');
        return;
      }
      await sleep(500 * 2 ** attempt);
    }
  }
}

/**
 * History points of on-demand recalculations, gathered for up to a second into one insert: an
 * insert per request would make a ClickHouse part per request. A customer recalculated twice in
 * that second keeps only its latest point: both carry the same calculated_at (DateTime has
 * seconds), and the day's "last calculation" must not be a tie.
 */
export class HistoryBuffer {
  private rows = new Map<string, string>();
  private timer?: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();
  private seq = 0;

  constructor(
    private readonly ch: ClickHouse,
    private readonly log: Logger,
    private readonly instance: string,
    private readonly delayMs = 1000,
  ) {}

  add(customerId: string, row: string): void {
    this.rows.delete(customerId);
    this.rows.set(customerId, row);
    this.timer ??= setTimeout(() => void this.flush(), this.delayMs);
  }

  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const rows = [...this.rows.values()].join('');
    this.rows.clear();
    const id = `health-ondemand-${this.instance}-${++this.seq}`;
    this.flushing = this.flushing.then(() => insertHistory(this.ch, this.log, rows, id));
    return this.flushing;
  }
}

export class StoreError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
