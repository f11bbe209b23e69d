import t from '#tap';
import { client, isProblem, randomUuid, sharedApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb, db, type Workspace } from '../helpers/stack.js';
import { apiKey } from '../metrics/support.js';

// The playbook endpoints over HTTP: create, read, list, change and delete; every rule of a trigger
// and of the actions with the error a client gets; what is stored beside a playbook (the segments
// and metrics it refers to, which the metrics library counts as consumers); scopes; another
// workspace's playbooks answer 404. Runs and POST …/run: api-runs.test.ts.
t.teardown(closeDb);
const api = await sharedApi(t);
const ws = await bootstrap();
const other = await bootstrap();
const admin = client(api.url, ws.api_key);

async function metricRow(w: Workspace, slug: string, status = 'active'): Promise<string> {
  const [r] = await db()<Array<{ id: string }>>`
    INSERT INTO metrics (tenant_id, slug, name, source_event, calculation, window_def, grain, status)
    VALUES (${w.tenant_id}, ${slug}, ${slug}, 'login', 'count', '{"type":"rolling","days":7}', 'customer', ${status})
    RETURNING id::text`;
  return r.id;
}
async function segmentRow(w: Workspace, name: string): Promise<string> {
  const [r] = await db()<Array<{ id: string }>>`
    INSERT INTO segments (tenant_id, name, rules, match)
    VALUES (${w.tenant_id}, ${name}, '[{"field":"status","op":"eq","value":"active"}]', 'all') RETURNING id::text`;
  return r.id;
}
async function refs(id: string): Promise<{ segment_ids: string[]; metric_ids: string[] }> {
  const [r] = await db()<Array<{ segment_ids: string[]; metric_ids: string[] }>>`
    SELECT segment_ids::text[], metric_ids::text[] FROM playbooks WHERE id = ${id}`;
  return r;
}

const LOGINS = await metricRow(ws, 'weekly_logins');
const GONE = await metricRow(ws, 'old_metric', 'deleted');
const ENTERPRISE = await segmentRow(ws, 'Enterprise');
const task = { type: 'create_task', title: 'Call the account', assignee: 'owner', due_in_days: 3 };
const body = (trigger: object, actions: object[] = [task]) => ({ name: 'At risk', trigger, actions });
const cond = (expression: string) => body({ type: 'condition', expression });

t.test('create, read, list, change, delete', async (t) => {
  const expression = 'health_score < 40 and segment == "enterprise" or metric.weekly_logins < 2';
  const made = await admin.post('/v1/playbooks', {
    ...cond(expression),
    actions: [task, { type: 'notify', channel: 'slack', target: '#cs', message: 'At risk' }],
  });
  t.equal(made.status, 201, made.text);
  t.match(made.body, {
    id: /^[0-9a-f-]{36}$/,
    name: 'At risk',
    trigger: { type: 'condition', expression },
    actions: [task, { type: 'notify', channel: 'slack', target: '#cs', message: 'At risk' }],
    enabled: true,
  });
  t.equal(made.headers.get('location'), `${api.url}/v1/playbooks/${made.body.id}`);
  t.same(await refs(made.body.id), { segment_ids: [ENTERPRISE], metric_ids: [LOGINS] }, 'references stored');
  const id = made.body.id;
  t.same((await admin.get(`/v1/playbooks/${id}`)).body, made.body);

  const renamed = await admin.patch(`/v1/playbooks/${id}`, { name: '  Renamed ', enabled: false });
  t.equal(renamed.status, 200, renamed.text);
  t.match(renamed.body, { name: 'Renamed', enabled: false, trigger: { expression } });
  t.ok(renamed.body.updated_at >= made.body.updated_at);
  const retriggered = await admin.patch(`/v1/playbooks/${id}`, {
    trigger: { type: 'event', event_name: 'support_ticket', count: 3, within_days: 7 },
  });
  t.match(retriggered.body, { trigger: { type: 'event', event_name: 'support_ticket', count: 3, within_days: 7 } });
  t.same(await refs(id), { segment_ids: [], metric_ids: [] }, 'references follow the trigger');

  t.equal((await admin.del(`/v1/playbooks/${id}`)).status, 204);
  isProblem(t, await admin.get(`/v1/playbooks/${id}`), 404, 'not_found');
  isProblem(t, await admin.del(`/v1/playbooks/${id}`), 404, 'not_found');
});

t.test('the list pages oldest first', async (t) => {
  const w = await bootstrap();
  const c = client(api.url, w.api_key);
  const ids: string[] = [];
  for (let i = 0; i < 5; i++)
    ids.push((await c.post('/v1/playbooks', { ...cond(`arr > ${i}`), name: `P${i}` })).body.id);
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const r = await c.get(`/v1/playbooks?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(r.status, 200);
    seen.push(...r.body.data.map((p: { id: string }) => p.id));
    cursor = r.body.next_cursor;
    t.equal(r.body.has_more, cursor !== null);
  } while (cursor);
  t.same(seen, ids);
  isProblem(t, await c.get('/v1/playbooks?cursor=nope'), 400, 'invalid_cursor');
});

t.test('condition errors: position, unknown variables, segments and metrics', async (t) => {
  const check = async (expression: string, code: string, position: number, message: RegExp) => {
    const r = await admin.post('/v1/playbooks', cond(expression));
    isProblem(t, r, 400, code);
    t.equal(r.body.position, position, `${expression}: position`);
    t.match(r.body.detail, message);
    t.match(r.body.errors, [{ field: 'trigger.expression', code }]);
  };
  await check('health_score <', 'invalid_expression', 15, /Expected a variable or a value, found the end .* 15/);
  await check('health_score = 40', 'invalid_expression', 14, /Expected ==/);
  await check('(arr > 1', 'invalid_expression', 9, /Expected "\)"/);
  await check('health_status == "red"', 'invalid_expression', 18, /one of healthy, neutral, at_risk/);
  await check('healthscore < 40', 'unknown_variable', 1, /Unknown variable "healthscore"/);
  await check('arr > 1 or segment == "Nobody"', 'unknown_variable', 12, /Unknown segment "nobody"/);
  await check('metric.nope > 1', 'unknown_variable', 1, /Unknown metric "metric\.nope"/);
  await check('metric.old_metric > 1', 'unknown_variable', 1, /metric\.old_metric/);
  // Another workspace's segment of the same name does not count.
  await segmentRow(other, 'Theirs');
  await check('segment == "Theirs"', 'unknown_variable', 1, /Unknown segment/);
  isProblem(t, await admin.post('/v1/playbooks', cond('')), 400, 'validation_failed');
});

t.test('triggers and actions: schema rules', async (t) => {
  const fields = async (b: object, expected: Array<{ field: string; code: string }>) => {
    const r = await admin.post('/v1/playbooks', b);
    isProblem(t, r, 400, 'validation_failed');
    t.match(r.body.errors, expected, JSON.stringify(b));
    t.equal(r.body.errors.length, expected.length, r.text);
  };
  await fields({ ...cond('arr > 1'), actions: [] }, [{ field: 'actions', code: 'too_few_items' }]);
  await fields({ name: 'x', trigger: { type: 'condition', expression: 'arr > 1' } }, [
    { field: 'actions', code: 'required' },
  ]);
  await fields(body({ type: 'sometimes' }), [{ field: 'trigger.type', code: 'invalid_value' }]);
  await fields(body({ type: 'condition' }), [{ field: 'trigger.expression', code: 'required' }]);
  await fields(body({ type: 'condition', expression: 'arr > 1', metric_id: LOGINS }), [
    { field: 'trigger.metric_id', code: 'unknown_field' },
  ]);
  await fields(body({ type: 'metric_threshold', metric_id: LOGINS, operator: 'above', value: '5' }), [
    { field: 'trigger.operator', code: 'invalid_value' },
    { field: 'trigger.value', code: 'invalid_type' },
  ]);
  await fields(body({ type: 'event', event_name: 'login', count: 0 }), [{ field: 'trigger.count', code: 'too_small' }]);
  await fields(body({ type: 'condition', expression: 'arr > 1' }, [{ type: 'call' }]), [
    { field: 'actions[0].type', code: 'invalid_value' },
  ]);
  await fields(body({ type: 'condition', expression: 'arr > 1' }, [task, { type: 'create_task', assignee: 'owner' }]), [
    { field: 'actions[1].title', code: 'required' },
  ]);
  await fields(
    body({ type: 'condition', expression: 'arr > 1' }, [{ type: 'notify', channel: 'pager', target: 'x' }]),
    [{ field: 'actions[0].channel', code: 'invalid_value' }],
  );
});

t.test('metric_threshold: a live metric of the workspace, else 422', async (t) => {
  const trigger = (metric_id: string) => body({ type: 'metric_threshold', metric_id, operator: 'gte', value: 5 });
  const ok = await admin.post('/v1/playbooks', trigger(LOGINS));
  t.equal(ok.status, 201, ok.text);
  t.same(await refs(ok.body.id), { segment_ids: [], metric_ids: [LOGINS] });
  for (const id of [GONE, randomUuid(), await metricRow(other, 'their_metric')]) {
    const r = await admin.post('/v1/playbooks', trigger(id));
    isProblem(t, r, 422, 'unknown_metric');
    t.match(r.body.errors, [{ field: 'trigger.metric_id', code: 'unknown_metric' }]);
  }
});

t.test('the metrics library counts enabled playbooks as consumers', async (t) => {
  const m = await metricRow(ws, `counted_${Date.now()}`);
  const count = async () => (await admin.get(`/v1/metrics/${m}`)).body.consumers.playbook_triggers;
  t.equal(await count(), 0);
  const a = await admin.post(
    '/v1/playbooks',
    body({ type: 'metric_threshold', metric_id: m, operator: 'lt', value: 1 }),
  );
  const slug = (await admin.get(`/v1/metrics/${m}`)).body.slug;
  const b = await admin.post('/v1/playbooks', cond(`metric.${slug} > 3 or arr > 1`));
  t.equal(await count(), 2);
  const used = await admin.del(`/v1/metrics/${m}`);
  isProblem(t, used, 409, 'metric_in_use');
  t.match(used.body.used_by, [
    { type: 'playbook_trigger', id: a.body.id, name: 'At risk' },
    { type: 'playbook_trigger', id: b.body.id },
  ]);
  await admin.patch(`/v1/playbooks/${a.body.id}`, { enabled: false });
  await admin.patch(`/v1/playbooks/${b.body.id}`, { trigger: { type: 'condition', expression: 'arr > 1' } });
  t.equal(await count(), 0);
  t.equal((await admin.del(`/v1/metrics/${m}`)).status, 204);
  // Enabling a playbook whose metric was deleted meanwhile resolves it again.
  isProblem(t, await admin.patch(`/v1/playbooks/${a.body.id}`, { enabled: true }), 422, 'unknown_metric');
  t.equal((await admin.patch(`/v1/playbooks/${a.body.id}`, { name: 'Still off' })).status, 200);
});

t.test('assignees: owner, or a user of the workspace by id or e-mail', async (t) => {
  const [me] = await db()<Array<{ id: string }>>`SELECT id::text FROM users WHERE tenant_id = ${ws.tenant_id} LIMIT 1`;
  const [them] = await db()<
    Array<{ id: string }>
  >`SELECT id::text FROM users WHERE tenant_id = ${other.tenant_id} LIMIT 1`;
  const withAssignee = (...assignees: string[]) =>
    admin.post('/v1/playbooks', { ...cond('arr > 1'), actions: assignees.map((assignee) => ({ ...task, assignee })) });
  t.equal((await withAssignee('owner', me.id, ws.admin_email.toUpperCase())).status, 201);
  const r = await withAssignee(me.id, 'nobody@example.com', them.id, other.admin_email);
  isProblem(t, r, 400, 'validation_failed');
  t.same(
    r.body.errors.map((e: { field: string; code: string }) => [e.field, e.code]),
    [
      ['actions[1].assignee', 'unknown_user'],
      ['actions[2].assignee', 'unknown_user'],
      ['actions[3].assignee', 'unknown_user'],
    ],
  );
});

t.test('scopes, and another workspace answers 404', async (t) => {
  const id = (await admin.post('/v1/playbooks', cond('arr > 1'))).body.id;
  const reader = client(api.url, await apiKey(api.url, ws, 'viewer', ['playbooks:read']));
  const csm = client(api.url, await apiKey(api.url, ws, 'csm', ['playbooks:read', 'playbooks:write']));
  const none = client(api.url, await apiKey(api.url, ws, 'csm', ['customers:read']));
  t.equal((await reader.get(`/v1/playbooks/${id}`)).status, 200);
  t.equal((await reader.get('/v1/playbooks')).status, 200);
  t.equal((await reader.get(`/v1/playbooks/${id}/runs`)).status, 200);
  isProblem(t, await reader.post('/v1/playbooks', cond('arr > 1')), 403, 'insufficient_scope');
  isProblem(t, await reader.patch(`/v1/playbooks/${id}`, { name: 'x' }), 403, 'insufficient_scope');
  isProblem(t, await reader.del(`/v1/playbooks/${id}`), 403, 'insufficient_scope');
  isProblem(t, await reader.post(`/v1/playbooks/${id}/run`, { dry_run: true }), 403, 'insufficient_scope');
  isProblem(t, await none.get('/v1/playbooks'), 403, 'insufficient_scope');
  t.equal((await csm.post('/v1/playbooks', cond('arr > 1'))).status, 201);
  t.equal((await csm.patch(`/v1/playbooks/${id}`, { name: 'By the CSM' })).status, 200);

  const theirs = client(api.url, other.api_key);
  isProblem(t, await theirs.get(`/v1/playbooks/${id}`), 404, 'not_found');
  isProblem(t, await theirs.patch(`/v1/playbooks/${id}`, { name: 'x' }), 404, 'not_found');
  isProblem(t, await theirs.del(`/v1/playbooks/${id}`), 404, 'not_found');
  isProblem(t, await theirs.get(`/v1/playbooks/${id}/runs`), 404, 'not_found');
  isProblem(t, await theirs.post(`/v1/playbooks/${id}/run`, { dry_run: true }), 404, 'not_found');
  t.notOk((await theirs.get('/v1/playbooks')).body.data.some((p: { id: string }) => p.id === id));
  isProblem(t, await admin.get('/v1/playbooks/not-a-uuid'), 404, 'not_found');
  t.equal((await admin.get(`/v1/playbooks/${id}`)).body.name, 'By the CSM', 'untouched by the other workspace');
});
