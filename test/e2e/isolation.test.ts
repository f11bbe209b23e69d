import t from '#tap';
import { client, startApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb, db } from '../helpers/stack.js';

/**
 * Every route of the OpenAPI document that takes an id in its path, called by another workspace's
 * admin on this workspace's ids, answers 404 and changes nothing. The routes come from the
 * document itself, so a route added later is covered without a new test; a path whose resource
 * has no fixture below fails the test until one is added.
 */
t.teardown(closeDb);
const api = await startApi(t, { HEALTH_RECALC_TIMEOUT_MS: '500' });
const ws = await bootstrap();
const intruder = await bootstrap();
const mine = client(api.url, ws.api_key);
const theirs = client(api.url, intruder.api_key);

type Doc = {
  paths: Record<string, Record<string, { requestBody?: { content?: Record<string, { example?: unknown }> } }>>;
};

/** One resource of each kind in the first workspace, by the path segment that names its kind. */
async function fixtures(): Promise<Record<string, string>> {
  const customer = await mine.post('/v1/customers', { name: 'Isolated Inc', arr: 1000 });
  const key = await mine.post('/v1/api-keys', { name: 'isolated', scopes: ['customers:read'] });
  const user = await mine.post('/v1/users', { email: `isolated-${Date.now()}@example.com`, role: 'viewer' });
  const job = await mine.post('/v1/customers/bulk-import', {
    customers: [{ name: 'Imported' }],
    mode: 'create_or_update',
    conflict_resolution: 'skip',
  });
  await db()`INSERT INTO event_catalog (tenant_id, event_name) VALUES (${ws.tenant_id}, 'report_exported')`;
  const metric = await mine.post('/v1/metrics', {
    name: 'Isolated exports',
    source_event: 'report_exported',
    calculation: 'count',
    window: { type: 'rolling', days: 30 },
    grain: 'customer',
  });
  const widget = await mine.post('/v1/usage-widgets', { name: 'Isolated', aggregation: 'count', period: '7d' });
  const objective = await mine.post(`/v1/customers/${customer.body.id}/objectives`, {
    name: 'Isolated objective',
    metric_id: metric.body.id,
    target_value: 10,
  });
  const playbook = await mine.post('/v1/playbooks', {
    name: 'Isolated playbook',
    trigger: { type: 'condition', expression: 'health_score < 40' },
    actions: [{ type: 'create_task', title: 'Call', assignee: 'owner' }],
  });
  const task = await mine.post('/v1/tasks', { customer_id: customer.body.id, title: 'Isolated task' });
  const segment = await mine.post('/v1/segments', {
    name: 'Isolated segment',
    rules: [{ field: 'arr', op: 'gte', value: 1000 }],
  });
  const webhook = await mine.post('/v1/webhook-subscriptions', {
    url: 'http://127.0.0.1:9/isolated',
    events: ['customer.created'],
  });
  // An erasure record outlives its customer: one removed for good stands for the kind.
  const erased = await mine.post('/v1/customers', { name: 'Erased Inc' });
  const removed = await mine.del(`/v1/customers/${erased.body.id}?hard=true`);
  // Alerts are raised by the processors; one stands in the table as they write it.
  const [alert] = await db()<Array<{ id: string }>>`
    INSERT INTO alerts (tenant_id, type, severity, customer_id, summary)
    VALUES (${ws.tenant_id}, 'usage_drop', 'medium', ${customer.body.id}, 'Isolated alert') RETURNING id::text`;
  const all = {
    customer,
    key,
    user,
    job,
    metric,
    widget,
    objective,
    playbook,
    task,
    segment,
    webhook,
    erased,
    removed,
  };
  for (const [what, r] of Object.entries(all))
    if (r.status >= 300) throw new Error(`fixture ${what}: ${r.status} ${r.text}`);
  return {
    customers: customer.body.id,
    'api-keys': key.body.id,
    users: user.body.id,
    jobs: job.body.job_id,
    // Also the id tried on /v1/metrics/proposals/{id}: another kind's id answers 404 there too.
    metrics: metric.body.id,
    'usage-widgets': widget.body.id,
    objectives: objective.body.id,
    playbooks: playbook.body.id,
    tasks: task.body.id,
    segments: segment.body.id,
    'webhook-subscriptions': webhook.body.id,
    alerts: alert.id,
    erasures: erased.body.id,
  };
}

/** What the first workspace's admin sees of its resources: must be the same before and after. */
async function snapshot(ids: Record<string, string>) {
  const customer = await mine.get(`/v1/customers/${ids.customers}`);
  const keys = await mine.get('/v1/api-keys');
  const users = await mine.get('/v1/users');
  const metric = await mine.get(`/v1/metrics/${ids.metrics}`);
  const widgets = await mine.get('/v1/usage-widgets');
  const objectives = await mine.get(`/v1/customers/${ids.customers}/objectives`);
  const values = await mine.get(`/v1/metrics/${ids.metrics}/values`);
  const playbook = await mine.get(`/v1/playbooks/${ids.playbooks}`);
  const runs = await mine.get(`/v1/playbooks/${ids.playbooks}/runs`);
  const task = await mine.get(`/v1/tasks/${ids.tasks}`);
  const segment = await mine.get(`/v1/segments/${ids.segments}`);
  const webhook = await mine.get(`/v1/webhook-subscriptions/${ids['webhook-subscriptions']}`);
  const alerts = await mine.get('/v1/alerts');
  const strip = (v: unknown) => JSON.parse(JSON.stringify(v, (k, x) => (k === 'last_used_at' ? undefined : x)));
  return {
    customer: strip(customer.body),
    keys: strip(keys.body),
    users: strip(users.body),
    metric: metric.body,
    widgets: widgets.body,
    objectives: objectives.body,
    values: values.body,
    playbook: playbook.body,
    runs: runs.body,
    task: task.body,
    segment: segment.body,
    webhook: webhook.body,
    alerts: alerts.body,
  };
}

t.test("another workspace's admin gets 404 on every route with an id, and changes nothing", async (t) => {
  const ids = await fixtures();
  const before = await snapshot(ids);
  const doc = (await mine.get('/v1/openapi.json')).body as Doc;
  let checked = 0;
  for (const [template, ops] of Object.entries(doc.paths)) {
    if (!template.includes('{')) continue;
    const kind = template.split('/')[2];
    // Connector names (slack, gmail, …) are the same in every workspace, not ids of its resources:
    // each workspace reaches only its own connection (test/integrations/flow.test.ts checks it).
    if (kind === 'integrations') continue;
    const id = ids[kind];
    if (id === undefined) {
      t.fail(`no fixture for ${template}: add one of kind "${kind}" to this test`);
      continue;
    }
    const path = template.replace(/\{[^}]+\}/g, id);
    for (const [method, op] of Object.entries(ops)) {
      const verb = method.toUpperCase();
      if (!['GET', 'POST', 'PATCH', 'PUT', 'DELETE'].includes(verb)) continue;
      const example = op.requestBody?.content?.['application/json']?.example;
      const body = ['POST', 'PATCH', 'PUT'].includes(verb) ? (example ?? {}) : undefined;
      const r =
        body === undefined
          ? await (verb === 'DELETE' ? theirs.del(path) : theirs.get(path))
          : await (verb === 'PATCH' ? theirs.patch(path, body) : theirs.post(path, body));
      t.equal(r.status, 404, `${verb} ${template}${r.status === 404 ? '' : `: ${r.text.slice(0, 300)}`}`);
      checked++;
    }
  }
  t.ok(checked >= 8, `${checked} operations checked`);
  t.same(await snapshot(ids), before, "the first workspace's resources are unchanged");
});
