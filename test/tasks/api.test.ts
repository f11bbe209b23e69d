import t from '#tap';
import { client, isProblem, randomUuid, sharedApi } from '../core-api/_helpers.js';
import {
  bootstrap,
  ch,
  closeDb,
  db,
  waitFor,
  PROPERTY_COLUMNS,
  propertiesText,
  type StoredPropertyColumns,
} from '../helpers/stack.js';
import { apiKey } from '../metrics/support.js';
import { processorsTier } from '../playbooks/support.js';

// The task endpoints over HTTP: manual tasks, filters, moves and their 409s, outcomes, scopes,
// another workspace's tasks (404), the customer detail's open tasks, and the generated events
// task_created / task_completed arriving in the event store.
t.teardown(closeDb);
const api = await sharedApi(t);
const ws = await bootstrap();
const other = await bootstrap();
const admin = client(api.url, ws.api_key);

const [owner] = await db()<Array<{ id: string }>>`SELECT id::text FROM users WHERE tenant_id = ${ws.tenant_id}`;
const acme = (await admin.post('/v1/customers', { name: 'Acme', owner_email: ws.admin_email.toUpperCase() })).body;
const globex = (await admin.post('/v1/customers', { name: 'Globex' })).body;

t.test('a manual task: owner from the customer, unassigned, events generated', async (t) => {
  // Relays this workspace's outbox (task_created, task_completed); evaluates no playbook.
  await processorsTier(t, [], { OUTBOX_TENANTS: ws.tenant_id });
  const made = await admin.post('/v1/tasks', { customer_id: acme.id, title: 'Kick-off call', due_date: '2030-01-15' });
  t.equal(made.status, 201, made.text);
  t.match(made.body, {
    customer_id: acme.id,
    playbook_id: null,
    run_id: null,
    title: 'Kick-off call',
    status: 'pending',
    assignee_id: null,
    owner_id: owner.id,
    due_date: '2030-01-15',
    outcome: null,
    completed_at: null,
  });
  t.same((await admin.get(`/v1/tasks/${made.body.id}`)).body, made.body, 'GET shows what POST answered');

  const started = await admin.patch(`/v1/tasks/${made.body.id}`, { status: 'in_progress', assignee_id: owner.id });
  t.match(started.body, { status: 'in_progress', assignee_id: owner.id });
  const back = await admin.patch(`/v1/tasks/${made.body.id}`, { status: 'pending' });
  t.equal(back.body.status, 'pending', 'in_progress → pending');
  isProblem(t, await admin.patch(`/v1/tasks/${made.body.id}`, { status: 'completed' }), 400, 'validation_failed');
  isProblem(t, await admin.post(`/v1/tasks/${made.body.id}/complete`, { outcome: 'great' }), 400, 'validation_failed');

  const done = await admin.post(`/v1/tasks/${made.body.id}/complete`, { outcome: 'successful', notes: 'Booked' });
  t.equal(done.status, 200, done.text);
  t.match(done.body, { status: 'completed', outcome: 'successful', notes: 'Booked' });
  t.ok(done.body.completed_at, 'completed_at set');
  isProblem(t, await admin.post(`/v1/tasks/${made.body.id}/complete`, { outcome: 'successful' }), 409, 'invalid_state');
  isProblem(t, await admin.patch(`/v1/tasks/${made.body.id}`, { title: 'Again' }), 409, 'invalid_state');

  const events = await waitFor(
    'task_created and task_completed in csp.events',
    async () => {
      const rows = await ch<{ event_name: string } & StoredPropertyColumns>(
        `SELECT event_name, ${PROPERTY_COLUMNS} FROM csp.events WHERE tenant_id = '${ws.tenant_id}'
         AND customer_id = '${acme.id}' AND event_name IN ('task_created', 'task_completed') ORDER BY event_name`,
      );
      return rows.length === 2 ? rows : undefined;
    },
    30_000,
  );
  t.same(
    events.map((e) => [e.event_name, JSON.parse(propertiesText(e))]),
    [
      ['task_completed', { task_id: made.body.id, playbook_id: null, run_id: null, outcome: 'successful' }],
      ['task_created', { task_id: made.body.id, playbook_id: null, run_id: null }],
    ],
  );
});

t.test('skipped is final; moves from pending', async (t) => {
  const made = (await admin.post('/v1/tasks', { customer_id: globex.id, title: 'Maybe' })).body;
  t.equal((await admin.patch(`/v1/tasks/${made.id}`, { status: 'skipped' })).body.status, 'skipped');
  isProblem(t, await admin.patch(`/v1/tasks/${made.id}`, { status: 'pending' }), 409, 'invalid_state');
  isProblem(t, await admin.post(`/v1/tasks/${made.id}/complete`, { outcome: 'not_needed' }), 409, 'invalid_state');
});

t.test('bad references: foreign customer 404, foreign assignee 400', async (t) => {
  const theirs = (await client(api.url, other.api_key).post('/v1/customers', { name: 'Theirs' })).body;
  isProblem(t, await admin.post('/v1/tasks', { customer_id: theirs.id, title: 'x' }), 404, 'not_found');
  isProblem(t, await admin.post('/v1/tasks', { customer_id: randomUuid(), title: 'x' }), 404, 'not_found');
  const [theirUser] = await db()<
    Array<{ id: string }>
  >`SELECT id::text FROM users WHERE tenant_id = ${other.tenant_id}`;
  const r = await admin.post('/v1/tasks', { customer_id: acme.id, title: 'x', assignee_id: theirUser.id });
  isProblem(t, r, 400, 'validation_failed');
  t.match(r.body.errors, [{ field: 'assignee_id', code: 'unknown_user' }]);
  isProblem(t, await admin.post('/v1/tasks', { customer_id: acme.id, title: '' }), 400, 'validation_failed');
});

t.test('filters, the customer detail and another workspace', async (t) => {
  const mk = async (customer: string, title: string, due?: string) =>
    (await admin.post('/v1/tasks', { customer_id: customer, title, due_date: due })).body;
  const late = await mk(globex.id, 'Late', '2031-03-01');
  const soon = await mk(globex.id, 'Soon', '2031-01-01');
  const none = await mk(globex.id, 'Whenever');
  await admin.patch(`/v1/tasks/${soon.id}`, { status: 'in_progress' });
  const ids = async (q: string) =>
    (await admin.get(`/v1/tasks?${q}`)).body.data.map((x: { title: string }) => x.title).sort();
  t.same(await ids(`customer_id=${globex.id}&status=pending,in_progress`), ['Late', 'Soon', 'Whenever']);
  t.same(await ids(`customer_id=${globex.id}&status=in_progress`), ['Soon']);
  t.same(await ids(`customer_id=${globex.id}&due_before=2031-02-01`), ['Soon']);
  t.same(await ids(`customer_id=${globex.id}&due_after=2031-02-01`), ['Late']);
  t.same(await ids(`owner_id=${owner.id}`), ['Kick-off call'], 'owner_id: the tasks of customers this user owns');
  isProblem(t, await admin.get('/v1/tasks?status=done'), 400, 'validation_failed');
  isProblem(t, await admin.get('/v1/tasks?due_before=2031-02-30'), 400, 'validation_failed');
  const page1 = await admin.get(`/v1/tasks?customer_id=${globex.id}&limit=2`);
  t.equal(page1.body.data.length, 2);
  t.equal(page1.body.has_more, true);

  const detail = (await admin.get(`/v1/customers/${globex.id}`)).body;
  t.same(
    detail.pending_tasks.map((x: { id: string }) => x.id),
    [soon.id, late.id, none.id],
    'open tasks only, soonest due first, no due date last',
  );

  const intruder = client(api.url, other.api_key);
  isProblem(t, await intruder.get(`/v1/tasks/${soon.id}`), 404, 'not_found');
  isProblem(t, await intruder.patch(`/v1/tasks/${soon.id}`, { status: 'skipped' }), 404, 'not_found');
  isProblem(t, await intruder.post(`/v1/tasks/${soon.id}/complete`, { outcome: 'successful' }), 404, 'not_found');
  t.same((await intruder.get('/v1/tasks')).body.data, [], 'their list holds none of ours');
  t.equal((await admin.get(`/v1/tasks/${soon.id}`)).body.status, 'in_progress', 'unchanged');
});

t.test('scopes: tasks:read or playbooks:read to read, tasks:write to change', async (t) => {
  const [task] = (await admin.get('/v1/tasks?limit=1')).body.data;
  const byTasks = client(api.url, await apiKey(api.url, ws, 'viewer', ['tasks:read']));
  const byPlaybooks = client(api.url, await apiKey(api.url, ws, 'viewer', ['playbooks:read']));
  const neither = client(api.url, await apiKey(api.url, ws, 'viewer', ['customers:read']));
  t.equal((await byTasks.get('/v1/tasks')).status, 200);
  t.equal((await byPlaybooks.get(`/v1/tasks/${task.id}`)).status, 200);
  isProblem(t, await neither.get('/v1/tasks'), 403, 'insufficient_scope');
  isProblem(t, await byTasks.patch(`/v1/tasks/${task.id}`, { title: 'x' }), 403, 'insufficient_scope');
});
