import { uuidv7 } from '../../lib/ids.js';
import { inTenant, type Sql } from '../../lib/pg.js';

/**
 * How far the demo load of a workspace got, kept in the workspace itself as a row of `jobs` of
 * type `demo.load` (the job runner takes only its own types; the row is never queued). It holds
 * what a resumed load needs and cannot read back from the data:
 *
 * - the seed and the day the load started on: the events are placed in the 90 days before that
 *   day and their external ids number them in order, so a load resumed on a later day must
 *   generate that day's events again, not today's;
 * - the billing batches surface A accepted: that endpoint keeps every event it is sent (SPEC.md,
 *   "A retried batch records the events again"), so a batch is counted here as soon as it is
 *   accepted and a resumed load sends only the ones after it;
 * - the usage batches surface B accepted (two are sent at a time, so by their numbers): a resumed
 *   load sends the others. One accepted but not yet recorded when the load stopped is sent again,
 *   which costs nothing: surface B drops an event whose external id it holds.
 *
 * The row is written before the first event is sent: a workspace without it has none of the
 * demo's events. A load stopped on a signal finishes the request it is making and counts it, so
 * only a process killed between surface A's answer and this count (a few milliseconds) can leave
 * a batch sent twice.
 */

export interface DemoProgress {
  id: string;
  seed: number;
  /** YYYY-MM-DD: the day the events lead up to. */
  today: string;
  /** Billing batches accepted, in the order the load sends them. */
  billingBatches: number;
  /** The numbers of the usage (backfill) batches accepted. */
  backfillDone: Set<number>;
  finished: boolean;
  /** The row was there: an earlier load of the workspace began. */
  earlier: boolean;
}

interface Row {
  id: string;
  params: { seed: number; today: string; backfill_done?: number[] };
  processed: number;
  status: string;
}

const TYPE = 'demo.load';

/** The workspace's demo load, if one began. */
export async function findProgress(sql: Sql, tenantId: string): Promise<DemoProgress | undefined> {
  const [had] = await sql<Row[]>`
    SELECT id::text, params, processed, status FROM jobs
    WHERE ${inTenant(tenantId)} AND type = ${TYPE} ORDER BY created_at LIMIT 1`;
  return had && fromRow(had);
}

/** The workspace's demo load: the one begun before, or a new one of `seed` on `today`. */
export async function openProgress(
  sql: Sql,
  tenantId: string,
  seed: number,
  today: string,
  billingTotal: number,
): Promise<DemoProgress> {
  const had = await findProgress(sql, tenantId);
  if (had) return had;
  const id = uuidv7();
  const params = JSON.stringify({ seed, today });
  await sql`
    INSERT INTO jobs (id, tenant_id, type, status, params, input, total, started_at)
    VALUES (${id}, ${tenantId}, ${TYPE}, 'running', ${params}::text::jsonb, '[]', ${billingTotal}, now())`;
  return { id, seed, today, billingBatches: 0, backfillDone: new Set(), finished: false, earlier: false };
}

/** The first `n` billing batches are accepted. */
export async function billingSent(sql: Sql, p: DemoProgress, n: number): Promise<void> {
  await sql`UPDATE jobs SET processed = ${n}, heartbeat_at = now() WHERE id = ${p.id}`;
  p.billingBatches = n;
}

/**
 * Usage batch `n` is accepted. Appended to the stored list in the statement, not written as this
 * process's whole list: two batches are sent at once, and their updates may run in either order
 * (a whole list written last would drop the batch of the update that ran first).
 */
export async function backfillSent(sql: Sql, p: DemoProgress, n: number): Promise<void> {
  p.backfillDone.add(n);
  await sql`
    UPDATE jobs SET params = jsonb_set(params, '{backfill_done}',
      coalesce(params->'backfill_done', '[]'::jsonb) || to_jsonb(${n}::int)), heartbeat_at = now()
    WHERE id = ${p.id}`;
}

export async function finishProgress(sql: Sql, p: DemoProgress): Promise<void> {
  await sql`UPDATE jobs SET status = 'succeeded', finished_at = now() WHERE id = ${p.id}`;
  p.finished = true;
}

function fromRow(r: Row): DemoProgress {
  return {
    id: r.id,
    seed: r.params.seed,
    today: r.params.today,
    billingBatches: r.processed,
    backfillDone: new Set(r.params.backfill_done ?? []),
    finished: r.status === 'succeeded',
    earlier: true,
  };
}
