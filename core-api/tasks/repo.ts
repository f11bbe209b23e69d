import type { Position } from '../../lib/cursor.js';
import { inTenant, type Sql } from '../../lib/pg.js';
import type { TaskStatus } from '../../schemas/core/tasks.js';

/** SQL of the task endpoints and of the customer detail's open tasks. Every query is scoped by tenant_id. */

export interface TaskRow {
  id: string;
  tenant_id: string;
  customer_id: string;
  playbook_id: string | null;
  run_id: string | null;
  title: string;
  description: string | null;
  status: TaskStatus;
  assignee_id: string | null;
  owner_id: string | null;
  due_date: string | null;
  outcome: string | null;
  notes: string | null;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
  cursor_ts: string;
}

const COLUMNS = `id::text, tenant_id::text, customer_id::text, playbook_id::text, run_id::text, title, description,
  status, assignee_id::text, owner_id::text, to_char(due_date, 'YYYY-MM-DD') AS due_date, outcome, notes,
  created_at, updated_at, completed_at, created_at::text AS cursor_ts`;

export const toTask = (r: TaskRow) => ({
  id: r.id,
  customer_id: r.customer_id,
  playbook_id: r.playbook_id,
  run_id: r.run_id,
  title: r.title,
  description: r.description,
  status: r.status,
  assignee_id: r.assignee_id,
  owner_id: r.owner_id,
  due_date: r.due_date,
  outcome: r.outcome,
  notes: r.notes,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
  completed_at: r.completed_at?.toISOString() ?? null,
});

export async function getTask(sql: Sql, tenantId: string, id: string, lock = false): Promise<TaskRow | undefined> {
  const [r] = await sql<TaskRow[]>`
    SELECT ${sql.unsafe(COLUMNS)} FROM tasks WHERE ${inTenant(tenantId)} AND id = ${id}
    ${lock ? sql`FOR UPDATE` : sql``}`;
  return r;
}

export interface TaskFilter {
  owner_id?: string;
  assignee_id?: string;
  customer_id?: string;
  playbook_id?: string;
  statuses?: string[];
  due_before?: string;
  due_after?: string;
}

export async function listTasks(
  sql: Sql,
  tenantId: string,
  f: TaskFilter,
  o: { after: Position | null; limit: number },
): Promise<TaskRow[]> {
  const none = sql``;
  return sql<TaskRow[]>`
    SELECT ${sql.unsafe(COLUMNS)} FROM tasks WHERE ${inTenant(tenantId)}
      ${f.owner_id ? sql`AND owner_id = ${f.owner_id}::uuid` : none}
      ${f.assignee_id ? sql`AND assignee_id = ${f.assignee_id}::uuid` : none}
      ${f.customer_id ? sql`AND customer_id = ${f.customer_id}::uuid` : none}
      ${f.playbook_id ? sql`AND playbook_id = ${f.playbook_id}::uuid` : none}
      ${f.statuses ? sql`AND status = ANY(${f.statuses}::text[])` : none}
      ${f.due_before ? sql`AND due_date < ${f.due_before}::date` : none}
      ${f.due_after ? sql`AND due_date > ${f.due_after}::date` : none}
      ${o.after ? sql`AND (created_at, id) > (${o.after.t}::timestamptz, ${o.after.id}::uuid)` : none}
    ORDER BY created_at, id LIMIT ${o.limit + 1}`;
}

/** The customer's pending and in_progress tasks, soonest due first (no due date last), at most 20. */
export async function openTasks(sql: Sql, tenantId: string, customerId: string): Promise<TaskRow[]> {
  return sql<TaskRow[]>`
    SELECT ${sql.unsafe(COLUMNS)} FROM tasks
    WHERE ${inTenant(tenantId)} AND customer_id = ${customerId} AND status IN ('pending', 'in_progress')
    ORDER BY due_date NULLS LAST, created_at, id LIMIT 20`;
}

/**
 * The live customer's owner (the user whose e-mail is its owner_email), or undefined when the customer is not there.
 */
export async function customerOwner(
  sql: Sql,
  tenantId: string,
  customerId: string,
): Promise<{ owner_id: string | null } | undefined> {
  const [r] = await sql<Array<{ owner_id: string | null }>>`
    SELECT (SELECT u.id::text FROM users u WHERE u.tenant_id = c.tenant_id AND lower(u.email) = lower(c.owner_email)
            LIMIT 1) AS owner_id
    FROM customers c WHERE ${inTenant(tenantId, 'c')} AND c.id = ${customerId} AND c.deleted_at IS NULL`;
  return r;
}

export async function userExists(sql: Sql, tenantId: string, userId: string): Promise<boolean> {
  return (await sql`SELECT 1 FROM users WHERE ${inTenant(tenantId)} AND id = ${userId}`).length === 1;
}

export async function insertTask(
  sql: Sql,
  t: {
    tenantId: string;
    customerId: string;
    title: string;
    description: string | null;
    assigneeId: string | null;
    ownerId: string | null;
    dueDate: string | null;
  },
): Promise<TaskRow> {
  const [r] = await sql.unsafe<TaskRow[]>(
    `INSERT INTO tasks (tenant_id, customer_id, title, description, assignee_id, owner_id, due_date)
     VALUES ($1, $2, $3, $4, $5, $6, $7::date) RETURNING ${COLUMNS}`,
    [t.tenantId, t.customerId, t.title, t.description, t.assigneeId, t.ownerId, t.dueDate] as never[],
  );
  return r;
}

export async function updateTask(
  sql: Sql,
  tenantId: string,
  id: string,
  set: Record<string, unknown>,
): Promise<TaskRow> {
  const [r] = await sql<TaskRow[]>`
    UPDATE tasks SET ${sql(set as Record<string, never>)}, updated_at = now()
    WHERE ${inTenant(tenantId)} AND id = ${id} RETURNING ${sql.unsafe(COLUMNS)}`;
  return r;
}
