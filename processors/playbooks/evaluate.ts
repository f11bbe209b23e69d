import type { TransactionSql } from 'postgres';
import { isUuid, uuidv7 } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { inTenant, type Sql } from '../../lib/pg.js';
import { SqlParams } from '../../lib/sql-params.js';
import type { ClickHouse } from '../clickhouse.js';
import { conditionPredicate } from './condition.js';
import type { Playbook, TriggerSource } from './definition.js';
import { eventMatches, thresholdMatches } from './reads.js';
import { buildStatement, type StatementResult } from './statement.js';

export interface EvaluatorDeps {
  sql: Sql;
  ch: ClickHouse;
  log: Logger;
}

export type Evaluation =
  | ({ status: 'done'; runId: string; ms: number } & StatementResult)
  | { status: 'unknown_playbook' | 'playbook_disabled' };

/** Class of the advisory locks that serialise evaluations of one playbook ('play'). */
const LOCK_CLASS = 0x706c6179;

/**
 * One evaluation of one playbook, in ONE PostgreSQL transaction:
 * 1. (not dry) pg_advisory_xact_lock on the playbook: evaluations of it by any instance and any
 *    path (schedule, health, metrics, event, manual) run one after the other, each reading
 *    ClickHouse after the previous one committed, so an older reading never re-arms what a newer
 *    one fired. The lock goes with the transaction, also when the process is killed;
 * 2. the playbook again, under the lock (FOR KEY SHARE: not deleted meanwhile; a PATCH in between
 *    is seen), skipped when it is gone or was disabled;
 * 3. what the trigger needs from ClickHouse (one query), turned into a predicate over c / h;
 * 4. the statement of statement.ts: M, re-arming, firing, tasks, outbox rows, the run record.
 * A process killed before the commit leaves nothing of the evaluation; the next one redoes it.
 */
export class Evaluator {
  constructor(private readonly d: EvaluatorDeps) {}

  async evaluate(
    tenantId: string,
    playbookId: string,
    source: TriggerSource,
    dryRun: boolean,
    allowDisabled = false,
  ): Promise<Evaluation> {
    const t0 = performance.now();
    const runId = uuidv7();
    const startedAt = new Date();
    return this.d.sql.begin(async (tx) => {
      if (!dryRun) await tx`SELECT pg_advisory_xact_lock(${LOCK_CLASS}, hashtext(${playbookId}))`;
      await bulkPlans(tx);
      const [pb] = await tx<Playbook[]>`
        SELECT id::text, tenant_id::text, name, trigger, actions, enabled, segment_ids::text[], metric_ids::text[]
        FROM playbooks WHERE ${inTenant(tenantId)} AND id = ${playbookId} FOR KEY SHARE`;
      if (!pb) return { status: 'unknown_playbook' } as const;
      if (!pb.enabled && !(dryRun || allowDisabled)) return { status: 'playbook_disabled' } as const;
      const p = new SqlParams();
      const predicate = await this.predicate(tx, pb, p, startedAt);
      const assignees = dryRun ? new Map<string, string | null>() : await resolveAssignees(tx, pb);
      const text = buildStatement(
        {
          tenantId,
          playbookId,
          runId,
          source,
          dryRun,
          startedAt,
          today: startedAt.toISOString().slice(0, 10),
          actions: pb.actions,
          assignees,
          playbookName: pb.name,
        },
        predicate,
        p,
      );
      const [r] = await tx.unsafe<StatementResult[]>(text, p.values as never[]);
      return { status: 'done', runId, ms: Math.round(performance.now() - t0), ...r } as const;
    });
  }

  /**
   * M alone, with nothing recorded: the trigger's ClickHouse read and one count over its predicate,
   * each timed (the benchmark's ceiling: the bare work of the compiled trigger).
   */
  async bareMatch(tenantId: string, playbookId: string): Promise<{ matched: number; readMs: number; sqlMs: number }> {
    return this.d.sql.begin(async (tx) => {
      const [pb] = await tx<Playbook[]>`
        SELECT id::text, tenant_id::text, name, trigger, actions, enabled, segment_ids::text[], metric_ids::text[]
        FROM playbooks WHERE ${inTenant(tenantId)} AND id = ${playbookId}`;
      if (!pb) throw new Error(`unknown playbook ${playbookId}`);
      await bulkPlans(tx);
      const p = new SqlParams();
      const t0 = performance.now();
      const predicate = await this.predicate(tx, pb, p, new Date());
      const t1 = performance.now();
      const [r] = await tx.unsafe<Array<{ n: number }>>(
        `SELECT count(*)::int AS n FROM customers c LEFT JOIN customer_health h ON h.customer_id = c.id
         WHERE ${p.inTenant(tenantId, 'c')} AND c.deleted_at IS NULL AND coalesce((${predicate}), false)`,
        p.values as never[],
      );
      const t2 = performance.now();
      return { matched: r.n, readMs: Math.round(t1 - t0), sqlMs: Math.round(t2 - t1) };
    });
  }

  /** The trigger as a predicate over c / h, reading ClickHouse where it needs to. */
  private async predicate(tx: TransactionSql, pb: Playbook, p: SqlParams, now: Date): Promise<string> {
    const t = pb.trigger;
    switch (t.type) {
      case 'condition':
        return conditionPredicate(tx, this.d.ch, pb, t, p);
      case 'metric_threshold':
        return among(await thresholdMatches(this.d.ch, pb.tenant_id, t), p);
      case 'event':
        return among(await eventMatches(this.d.ch, pb.tenant_id, t, now), p);
      default:
        throw new Error(`unknown trigger type ${String((t as { type: unknown }).type)}`);
    }
  }
}

/**
 * The statement joins sets of up to a whole workspace (M, the firing rows, the fired customers)
 * whose sizes PostgreSQL cannot estimate (CTEs, arrays, a workspace's rows just inserted): a
 * nested loop chosen on a guess of a dozen rows is quadratic at 100k customers. Hash joins are
 * linear whatever the sizes; correlated lookups (subplans) and index scans are unaffected. JIT
 * is off: the disabled nested loops' costs would make every evaluation pay a compilation of
 * half a second or more for a statement that runs in milliseconds.
 */
async function bulkPlans(tx: TransactionSql): Promise<void> {
  await tx`SET LOCAL enable_nestloop = off`;
  await tx`SET LOCAL jit = off`;
}

/** c.id in a list read from ClickHouse: a hashed semi-join, not a scan of the array per customer. */
function among(ids: string[], p: SqlParams): string {
  return `c.id IN (SELECT unnest(${p.add(ids, 'uuid[]')}))`;
}

/**
 * Users named by create_task assignees (a user id or an e-mail), resolved once per evaluation;
 * a name that matches no user of the workspace maps to null (the task is created unassigned).
 */
async function resolveAssignees(tx: TransactionSql, pb: Playbook): Promise<Map<string, string | null>> {
  const keys = [
    ...new Set(
      pb.actions.flatMap((a) => (a.type === 'create_task' && a.assignee !== 'owner' ? [a.assignee.toLowerCase()] : [])),
    ),
  ];
  const out = new Map<string, string | null>(keys.map((k) => [k, null]));
  if (!keys.length) return out;
  const ids = keys.filter(isUuid);
  const rows = await tx<Array<{ id: string; email: string }>>`
    SELECT id::text, lower(email) AS email FROM users
    WHERE ${inTenant(pb.tenant_id)} AND (id = ANY(${ids}::uuid[]) OR lower(email) = ANY(${keys}::text[]))`;
  for (const r of rows) {
    if (out.has(r.id)) out.set(r.id, r.id);
    if (out.has(r.email)) out.set(r.email, r.id);
  }
  return out;
}
