import t, { type Test } from '#tap';
import { client, sharedApi } from '../core-api/_helpers.js';
import { postEvents } from '../events/support.js';
import { ingestTier } from '../health/support.js';
import { bootstrap, closeDb, db, seed, waitFor, type Workspace } from '../helpers/stack.js';
import { customerIds, send, USAGE } from '../ingest/support.js';
import { processorsTier, runs, tasksOf } from './support.js';

// An event playbook saved (created, or enabled on the name by a PATCH) after its event name is
// already known, sent before for another customer, fires for the events that come after it, within
// a minute, whichever surface they come through, in a workspace that has other playbooks and
// customers. Each case has its own workspace: the name is first seen in it before the save.
t.teardown(closeDb);

const api = await sharedApi(t);
const ingest = await ingestTier(t);

type Surface = (ws: Workspace, name: string, externalIds: string[], ids: Map<string, string>) => Promise<void>;

const surfaceA: Surface = async (ws, name, externalIds) => {
  const events = externalIds.map((x) => ({ event_name: name, external_customer_id: x }));
  const res = await send(ingest.url, USAGE, { events }, { key: ws.ingestion_key });
  if (res.status !== 202 || res.body.accepted !== events.length)
    throw new Error(`surface A: ${res.status} ${res.text}`);
};

const surfaceB: Surface = async (ws, name, externalIds, ids) => {
  const events = externalIds.map((x) => ({ customer_id: ids.get(x)!, event_name: name }));
  const res = await postEvents(ingest.url, ws.api_key, events);
  if (res.status !== 200 || res.body.accepted !== events.length)
    throw new Error(`surface B: ${res.status} ${res.text}`);
};

async function catalogued(tenantId: string, name: string): Promise<boolean> {
  const rows = await db()`SELECT 1 FROM event_catalog WHERE tenant_id = ${tenantId} AND event_name = ${name}`;
  return rows.length > 0;
}

async function scenario(t: Test, send: Surface, save: 'create' | 'patch'): Promise<void> {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 6);
  const ids = await customerIds(ws.tenant_id);
  const [P, Q] = [ids.get('cust-000001')!, ids.get('cust-000002')!];
  const admin = client(api.url, ws.api_key);
  const create = async (body: object) => {
    const r = await admin.post('/v1/playbooks', body);
    if (r.status !== 201) throw new Error(`POST /v1/playbooks: ${r.status} ${r.text}`);
    return r.body.id as string;
  };
  const task = { type: 'create_task', title: 'Look into it', assignee: 'owner' };
  // Other playbooks of the workspace: a condition, and an event trigger on another name.
  const other = await create({
    name: 'big accounts',
    trigger: { type: 'condition', expression: 'arr > 1e12' },
    actions: [task],
  });
  await create({ name: 'logins', trigger: { type: 'event', event_name: 'login', count: 3 }, actions: [task] });
  const trigger = { type: 'event', event_name: 'export_failed', count: 2, within_days: 1 };
  const actions = [{ type: 'create_task', title: 'Help with exports', assignee: 'owner' }];
  // Saved before the name is sent, but disabled and on another name until the PATCH below.
  const early =
    save === 'patch'
      ? await create({
          name: 'export trouble',
          trigger: { ...trigger, event_name: 'export_retried' },
          actions,
          enabled: false,
        })
      : undefined;

  await processorsTier(t, [ws.tenant_id], { PLAYBOOKS_EVENT_POLL_MS: '500' });
  await waitFor('the first scheduled run', async () => (await runs(other)).length > 0, 30_000);

  // The name is first sent for Q (one event: Q never matches count 2) and lands in the catalog.
  await send(ws, 'export_failed', ['cust-000002'], ids);
  await waitFor('the name in the event catalog', () => catalogued(ws.tenant_id, 'export_failed'), 30_000);

  let pb: string;
  if (early) {
    const r = await admin.patch(`/v1/playbooks/${early}`, { trigger, enabled: true });
    if (r.status !== 200) throw new Error(`PATCH /v1/playbooks: ${r.status} ${r.text}`);
    pb = early;
  } else pb = await create({ name: 'export trouble', trigger, actions });
  const sent = Date.now();
  await send(ws, 'export_failed', ['cust-000001', 'cust-000001'], ids);

  const [made] = await waitFor(
    'a task for P',
    async () => {
      const tasks = await tasksOf(pb);
      return tasks.length ? tasks : undefined;
    },
    60_000,
    250,
  );
  t.ok(Date.now() - sent < 60_000, `created ${Date.now() - sent} ms after P's events were sent`);
  t.match(made, { customer_id: P, title: 'Help with exports', status: 'pending' });
  const all = await runs(pb);
  const fired = all.find((r) => r.id === made.run_id);
  t.match(fired, { trigger_source: 'event', matched: [P] }, 'fired by an evaluation on events');
  t.notOk(
    all.some((r) => r.matched.includes(Q)),
    'Q (one event) never matched',
  );
  t.same(
    (await tasksOf(pb)).map((x) => x.customer_id),
    [P],
    'one task, for P only',
  );
}

t.test('surface A: the playbook fires for events after it was created', (t) => scenario(t, surfaceA, 'create'));
t.test('surface B: the playbook fires for events after it was created', (t) => scenario(t, surfaceB, 'create'));
t.test('surface A: the playbook fires for events after a PATCH enabled it on the name', (t) =>
  scenario(t, surfaceA, 'patch'),
);
