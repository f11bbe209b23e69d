import { decodeCursor, page } from '../../lib/cursor.js';
import { ApiError, invalid, notFound } from '../../lib/problem.js';
import { taskEvent } from '../../lib/tasks/events.js';
import { IdParams, Page } from '../../schemas/core/common.js';
import { Task, TaskComplete, TaskCreate, TaskListQuery, TaskPatch, type TaskStatus } from '../../schemas/core/tasks.js';
import type { Deps } from '../deps.js';
import { type Ctx, json, type Reply } from '../http/context.js';
import type { Route } from '../http/router.js';
import { customerOwner, getTask, insertTask, listTasks, toTask, updateTask, userExists } from './repo.js';

/**
 * Tasks: created by playbooks (processors/playbooks/) or by hand (POST /v1/tasks), moved through
 * pending ↔ in_progress, ended by PATCH status skipped or by POST …/complete with an outcome.
 * completed and skipped are final. task_created / task_completed go to the outbox in the
 * transaction of the change.
 */

const MOVES: Record<TaskStatus, readonly TaskStatus[]> = {
  pending: ['in_progress', 'skipped'],
  in_progress: ['pending', 'skipped'],
  completed: [],
  skipped: [],
};

const finalState = (status: TaskStatus) =>
  new ApiError('invalid_state', `The task is ${status}; a ${status} task cannot change any more.`);

export function taskRoutes(d: Deps): Route[] {
  const { sql } = d;

  async function assigneeOk(tenantId: string, id: string | null | undefined, field = 'assignee_id') {
    if (id && !(await userExists(sql, tenantId, id.toLowerCase())))
      throw invalid([{ field, code: 'unknown_user', message: `no user ${id} in this workspace` }]);
  }

  async function list(c: Ctx): Promise<Reply> {
    const q = c.query;
    const limit: number = q.limit ?? 50;
    const lower = (v?: string) => v?.toLowerCase();
    const rows = await listTasks(
      sql,
      c.principal.tenantId,
      {
        owner_id: lower(q.owner_id),
        assignee_id: lower(q.assignee_id),
        customer_id: lower(q.customer_id),
        playbook_id: lower(q.playbook_id),
        statuses: q.status ? String(q.status).split(',') : undefined,
        due_before: q.due_before,
        due_after: q.due_after,
      },
      { after: decodeCursor(q.cursor), limit },
    );
    return json(200, page(rows, limit, toTask));
  }

  async function get(c: Ctx): Promise<Reply> {
    const row = await getTask(sql, c.principal.tenantId, c.params.id.toLowerCase());
    if (!row) throw notFound('Task');
    return json(200, toTask(row));
  }

  async function create(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const b = c.body as TaskCreate;
    const customerId = b.customer_id.toLowerCase();
    const owner = await customerOwner(sql, tenantId, customerId);
    if (!owner) throw notFound('Customer');
    await assigneeOk(tenantId, b.assignee_id);
    const row = await sql.begin(async (tx) => {
      const t = tx as unknown as typeof sql;
      const r = await insertTask(t, {
        tenantId,
        customerId,
        title: b.title.trim(),
        description: b.description ?? null,
        assigneeId: b.assignee_id?.toLowerCase() ?? null,
        ownerId: owner.owner_id,
        dueDate: b.due_date ?? null,
      });
      await taskEvent(t, 'task_created', r);
      return r;
    });
    return json(201, toTask(row), [['Location', `${d.baseUrl}/v1/tasks/${row.id}`]]);
  }

  async function patch(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const b = c.body as TaskPatch;
    await assigneeOk(tenantId, b.assignee_id);
    const row = await sql.begin(async (tx) => {
      const t = tx as unknown as typeof sql;
      const cur = await getTask(t, tenantId, c.params.id.toLowerCase(), true);
      if (!cur) throw notFound('Task');
      if (!MOVES[cur.status].length) throw finalState(cur.status);
      if (b.status && b.status !== cur.status && !MOVES[cur.status].includes(b.status))
        throw invalid([{ field: 'status', code: 'invalid_move', message: `${cur.status} cannot move to ${b.status}` }]);
      const set: Record<string, unknown> = {};
      if (b.status !== undefined) set.status = b.status;
      if (b.assignee_id !== undefined) set.assignee_id = b.assignee_id?.toLowerCase() ?? null;
      if (b.due_date !== undefined) set.due_date = b.due_date;
      if (b.title !== undefined) set.title = b.title.trim();
      if (b.description !== undefined) set.description = b.description;
      return updateTask(t, tenantId, cur.id, set);
    });
    return json(200, toTask(row));
  }

  async function complete(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const b = c.body as TaskComplete;
    const row = await sql.begin(async (tx) => {
      const t = tx as unknown as typeof sql;
      const cur = await getTask(t, tenantId, c.params.id.toLowerCase(), true);
      if (!cur) throw notFound('Task');
      if (!MOVES[cur.status].length) throw finalState(cur.status);
      const done = await updateTask(t, tenantId, cur.id, {
        status: 'completed',
        outcome: b.outcome,
        notes: b.notes ?? null,
        completed_at: new Date(),
      });
      await taskEvent(t, 'task_completed', done);
      return done;
    });
    return json(200, toTask(row));
  }

  const common = { tag: 'Tasks', auth: 'bearer' as const };
  // SPEC.md lists both for reading tasks.
  const read = { ...common, scope: ['tasks:read', 'playbooks:read'] as const };
  const write = { ...common, scope: 'tasks:write' as const };
  return [
    {
      ...read,
      method: 'GET',
      path: '/v1/tasks',
      summary: 'List tasks',
      description:
        'Oldest first, cursor-paginated. Filters: owner_id, assignee_id, customer_id, playbook_id, status ' +
        '(comma-separated), due_before / due_after (dates, exclusive; a task without a due date matches neither).',
      query: TaskListQuery,
      handler: list,
      responses: { 200: { description: 'A page of tasks.', schema: Page(Task) } },
    },
    {
      ...read,
      method: 'GET',
      path: '/v1/tasks/{id}',
      summary: 'A task',
      params: IdParams,
      handler: get,
      errors: [404],
      responses: { 200: { description: 'The task.', schema: Task } },
    },
    {
      ...write,
      method: 'POST',
      path: '/v1/tasks',
      summary: 'Create a task by hand',
      description:
        'Unassigned unless `assignee_id` (a user of the workspace, else 400 `unknown_user`) is given; `owner_id` ' +
        "is the user whose e-mail is the customer's owner_email (null if none). Another workspace's or a " +
        'deleted customer → 404. Emits `task_created` for the customer.',
      body: TaskCreate,
      bodyExample: {
        customer_id: '0190a000-0000-7000-8000-000000000001',
        title: 'Kick-off call',
        due_date: '2026-12-01',
      },
      handler: create,
      errors: [404, 413, 415],
      responses: { 201: { description: 'The task (Location: its URL).', schema: Task } },
    },
    {
      ...write,
      method: 'PATCH',
      path: '/v1/tasks/{id}',
      summary: 'Update a task',
      description:
        'status: pending ↔ in_progress, either → skipped (other moves: 400 `invalid_move` naming status; ' +
        'completion is POST …/complete); assignee_id, due_date, title, description. A completed or skipped ' +
        'task is final: 409 `invalid_state`.',
      params: IdParams,
      body: TaskPatch,
      bodyExample: { status: 'in_progress' },
      handler: patch,
      errors: [404, 409, 413, 415],
      responses: { 200: { description: 'The task.', schema: Task } },
    },
    {
      ...write,
      method: 'POST',
      path: '/v1/tasks/{id}/complete',
      summary: 'Complete a task',
      description:
        'outcome: successful, unsuccessful, no_response or not_needed (else 400); notes: free text. Only a ' +
        'pending or in_progress task (else 409 `invalid_state`). Emits `task_completed` with the outcome.',
      params: IdParams,
      body: TaskComplete,
      bodyExample: { outcome: 'successful', notes: 'Renewal confirmed' },
      handler: complete,
      errors: [404, 409, 413, 415],
      responses: { 200: { description: 'The completed task.', schema: Task } },
    },
  ];
}
