import type { SqlParams } from '../../lib/sql-params.js';
import { RUN_LIST_CAP } from '../../schemas/core/playbooks.js';
import type { Action, TriggerSource } from './definition.js';

/**
 * The one PostgreSQL statement of an evaluation. `predicate` is a boolean expression over
 * `c` (customers) and `h` (customer_health, LEFT JOINed), built with the same SqlParams; NULL
 * counts as not matching. The statement:
 * - computes M, the live customers matching now, and how many live customers were evaluated;
 * - (not dry) re-arms: deletes the playbook_firing rows of customers outside M;
 * - (not dry) fires: inserts playbook_firing rows for M with ON CONFLICT DO NOTHING RETURNING,
 *   so only customers that were not firing already come back, whatever ran before or at the
 *   same time (evaluations of one playbook are also serialised, see evaluate.ts);
 * - (not dry) creates the tasks of the create_task actions for those customers, their
 *   task_created outbox rows, the playbook.notification webhook events of `notify` actions on the
 *   `webhook` channel (when a subscription takes them), the integration_notifications of the other
 *   channels (when an integration of the channel is connected; processors/integrations/ sends them
 *   after the commit), and the action entries (`succeeded` = queued; otherwise failed with
 *   no_webhook_subscription or integration_not_connected);
 * - records the run: its counts, and the first RUN_LIST_CAP matched ids and action entries.
 * It runs inside the evaluation's transaction: all of it commits or none of it does.
 */

export interface StatementInput {
  tenantId: string;
  playbookId: string;
  runId: string;
  source: TriggerSource;
  dryRun: boolean;
  startedAt: Date;
  /** The run's day (UTC), which due_in_days counts from. */
  today: string;
  actions: Action[];
  /** Users named by create_task assignees (id or e-mail, lower case) → their id, or null when unknown. */
  assignees: Map<string, string | null>;
  /** For the default text of a notification. */
  playbookName: string;
}

export interface StatementResult {
  evaluated: number;
  matched: number;
  fired: number;
  rearmed: number;
  tasks: number;
}

/**
 * A UUIDv7 per row, like lib/ids.ts (48-bit unix milliseconds, version 7, random rest): outbox ids
 * become batch ids in ClickHouse, whose ledger is read by id, so ids of one moment sit together.
 * Inline, not a subquery: an uncorrelated subquery would be computed once for every row.
 */
const UUIDV7 = `encode(set_byte(overlay(uuid_send(gen_random_uuid()) PLACING
  substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6),
  6, (get_byte(uuid_send(gen_random_uuid()), 6) & 15) | 112), 'hex')::uuid`;

/** How a create_task assignee is resolved: the customer's owner, a known user, or nobody. */
function assigneeOf(a: { assignee: string }, known: Map<string, string | null>): { kind: string; user: string | null } {
  if (a.assignee === 'owner') return { kind: 'owner', user: null };
  return { kind: 'user', user: known.get(a.assignee.toLowerCase()) ?? null };
}

export function buildStatement(i: StatementInput, predicate: string, p: SqlParams): string {
  const T = p.add(i.tenantId, 'uuid');
  const P = p.add(i.playbookId, 'uuid');
  const R = p.add(i.runId, 'uuid');
  const started = p.add(i.startedAt, 'timestamptz');
  const head = `live AS MATERIALIZED (
  SELECT c.id, c.owner_email, coalesce((${predicate}), false) AS hit
  FROM customers c LEFT JOIN customer_health h ON h.customer_id = c.id
  WHERE ${p.inTenant(i.tenantId, 'c')} AND c.deleted_at IS NULL
),
matched AS MATERIALIZED (SELECT id, owner_email FROM live WHERE hit)`;
  const run = (actions: string, actionsCount: string) => `INSERT INTO playbook_runs (id, tenant_id, playbook_id,
    trigger_source, dry_run, started_at, finished_at, evaluated, matched_count, matched, actions, actions_count)
  SELECT ${R}, ${T}, ${P}, ${p.add(i.source)}, ${i.dryRun}, ${started}, clock_timestamp(),
    (SELECT count(*) FROM live), (SELECT count(*) FROM matched),
    ARRAY(SELECT id FROM matched ORDER BY id LIMIT ${RUN_LIST_CAP}), ${actions}, ${actionsCount}`;
  if (i.dryRun) {
    return `WITH ${head},
run AS (${run(`'[]'::jsonb`, '0')} RETURNING 1)
SELECT (SELECT count(*) FROM live)::int AS evaluated, (SELECT count(*) FROM matched)::int AS matched,
  0 AS fired, 0 AS rearmed, 0 AS tasks`;
  }
  const tasks = i.actions.flatMap((a, ord) => (a.type === 'create_task' ? [{ a, ord }] : []));
  const notifies = i.actions.flatMap((a, ord) =>
    a.type === 'notify'
      ? [`(${ord}, ${p.add(a.channel, 'text')}, ${p.add(a.target, 'text')}, ${p.add(a.message ?? null, 'text')})`]
      : [],
  );
  const taskRows = tasks.map(({ a, ord }) => {
    const who = assigneeOf(a, i.assignees);
    return `(${ord}, ${p.add(a.title, 'text')}, ${p.add(a.description ?? null, 'text')}, ${p.add(who.kind, 'text')},
      ${p.add(who.user, 'uuid')}, ${p.add(a.due_in_days ?? null, 'int')})`;
  });
  // The first row gives the VALUES list its column types; an empty list still needs a relation.
  const actionRel = taskRows.length
    ? `(VALUES ${taskRows.join(',\n    ')}) AS a (ord, title, description, kind, user_id, due_days)`
    : `(SELECT 0, ''::text, NULL::text, ''::text, NULL::uuid, NULL::int WHERE false)
      AS a (ord, title, description, kind, user_id, due_days)`;
  const notifyRel = notifies.length
    ? `(VALUES ${notifies.join(', ')}) AS n (ord, channel, target, message)`
    : `(SELECT 0, ''::text, ''::text, NULL::text WHERE false) AS n (ord, channel, target, message)`;
  const today = p.add(i.today, 'date');
  return `WITH ${head},
rearmed AS (
  DELETE FROM playbook_firing f WHERE f.playbook_id = ${P}
    AND NOT EXISTS (SELECT 1 FROM matched m WHERE m.id = f.customer_id)
  RETURNING f.customer_id
),
fired AS MATERIALIZED (
  INSERT INTO playbook_firing (playbook_id, customer_id, tenant_id, run_id, fired_at)
  SELECT ${P}, m.id, ${T}, ${R}, ${started} FROM matched m
  ON CONFLICT DO NOTHING
  RETURNING customer_id
),
owners AS MATERIALIZED (
  SELECT f.customer_id, u.id AS owner_id
  FROM fired f JOIN matched m ON m.id = f.customer_id
  LEFT JOIN users u ON ${p.inTenant(i.tenantId, 'u')} AND lower(u.email) = lower(m.owner_email)
),
planned AS MATERIALIZED (
  SELECT gen_random_uuid() AS id, o.customer_id, a.ord, a.title, a.description, a.kind, o.owner_id,
    CASE WHEN a.kind = 'owner' THEN o.owner_id ELSE a.user_id END AS assignee_id,
    ${today} + a.due_days AS due_date
  FROM owners o CROSS JOIN ${actionRel}
),
created AS (
  INSERT INTO tasks (id, tenant_id, customer_id, playbook_id, run_id, title, description, status, assignee_id,
    owner_id, due_date, created_at, updated_at)
  SELECT id, ${T}, customer_id, ${P}, ${R}, title, description, 'pending', assignee_id, owner_id, due_date,
    ${started}, ${started}
  FROM planned
  RETURNING id, customer_id
),
outbox AS (
  INSERT INTO event_outbox (id, tenant_id, customer_id, event_name, properties, occurred_at)
  SELECT ${UUIDV7}, ${T}, c.customer_id, 'task_created',
    jsonb_build_object('task_id', c.id, 'playbook_id', ${P}, 'run_id', ${R}), ${started}
  FROM created c
  RETURNING 1
),
hooked AS (
  SELECT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE ${p.inTenant(i.tenantId)} AND enabled
    AND ('playbook.notification' = ANY(events) OR '*' = ANY(events))) AS yes
),
channels AS MATERIALIZED (
  SELECT n.ord, n.channel, n.target, n.message,
    CASE WHEN n.channel = 'webhook' THEN (SELECT yes FROM hooked)
         ELSE via.name IS NOT NULL END AS ready, via.name AS via
  FROM ${notifyRel}
  LEFT JOIN LATERAL (
    SELECT i.name FROM integrations i
    WHERE ${p.inTenant(i.tenantId, 'i')} AND i.status = 'connected' AND i.name = ANY(CASE n.channel
      WHEN 'slack' THEN ARRAY['slack'] WHEN 'teams' THEN ARRAY['teams'] WHEN 'email' THEN ARRAY['gmail', 'outlook']
      ELSE ARRAY[]::text[] END)
    ORDER BY array_position(ARRAY['slack', 'teams', 'gmail', 'outlook'], i.name) LIMIT 1
  ) via ON true
),
notified AS (
  INSERT INTO webhook_outbox (tenant_id, type, data, occurred_at)
  SELECT ${T}, 'playbook.notification', jsonb_build_object('playbook_id', ${P}, 'run_id', ${R},
      'customer_id', f.customer_id, 'target', ch.target, 'message', ch.message), ${started}
  FROM fired f CROSS JOIN channels ch
  WHERE ch.channel = 'webhook' AND ch.ready
  RETURNING 1
),
queued AS (
  INSERT INTO integration_notifications (tenant_id, name, channel, target, text, playbook_id, run_id, customer_id)
  SELECT ${T}, ch.via, ch.channel, ch.target,
    coalesce(ch.message, 'Playbook "' || ${p.add(i.playbookName, 'text')} || '" fired for ' || c.name), ${P}, ${R},
    f.customer_id
  FROM fired f JOIN customers c ON c.id = f.customer_id CROSS JOIN channels ch
  WHERE ch.channel <> 'webhook' AND ch.ready
  RETURNING 1
),
entries AS (
  SELECT customer_id, ord, jsonb_build_object('customer_id', customer_id, 'type', 'create_task',
      'status', 'succeeded', 'task_id', id)
    || CASE WHEN assignee_id IS NOT NULL THEN '{}'::jsonb
            WHEN kind = 'owner' THEN '{"reason": "owner_not_found"}'::jsonb
            ELSE '{"reason": "assignee_not_found"}'::jsonb END AS e
  FROM planned
  UNION ALL
  SELECT f.customer_id, ch.ord, jsonb_build_object('customer_id', f.customer_id, 'type', 'notify',
      'status', CASE WHEN ch.ready THEN 'succeeded' ELSE 'failed' END)
    || CASE WHEN ch.ready AND ch.via IS NOT NULL THEN jsonb_build_object('via', ch.via)
            WHEN ch.ready THEN '{}'::jsonb
            WHEN ch.channel = 'webhook' THEN '{"reason": "no_webhook_subscription"}'::jsonb
            ELSE '{"reason": "integration_not_connected"}'::jsonb END
  FROM fired f CROSS JOIN channels ch
),
run AS (${run(
    `(SELECT coalesce(jsonb_agg(e ORDER BY customer_id, ord), '[]')
      FROM (SELECT e, customer_id, ord FROM entries ORDER BY customer_id, ord LIMIT ${RUN_LIST_CAP}) x)`,
    '(SELECT count(*) FROM entries)',
  )} RETURNING 1)
SELECT (SELECT count(*) FROM live)::int AS evaluated, (SELECT count(*) FROM matched)::int AS matched,
  (SELECT count(*) FROM fired)::int AS fired, (SELECT count(*) FROM rearmed)::int AS rearmed,
  (SELECT count(*) FROM created)::int AS tasks`;
}
