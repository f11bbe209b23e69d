import { connect } from 'nats';
import t from '#tap';
import { subjects } from '../../lib/nats.js';
import { client, isProblem, type Res, sharedApi, startApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb, db, privateNats } from '../helpers/stack.js';
import { newId, processorsTier, storeValues } from './support.js';

// Run history and POST /v1/playbooks/{id}/run over HTTP: the list newest first with its cursor and
// the cap on the lists a record carries; a disabled playbook runs only dry; no runner answering
// is 503 runner_unavailable; with a runner, the answer is the stored run record.
t.teardown(closeDb);
const api = await sharedApi(t);
const ws = await bootstrap();
const admin = client(api.url, ws.api_key);

const playbook = async (enabled = true, trigger: object = { type: 'condition', expression: 'arr > 1' }) => {
  const r = await admin.post('/v1/playbooks', {
    name: 'P',
    trigger,
    actions: [{ type: 'create_task', title: 'Call', assignee: 'owner' }],
    enabled,
  });
  if (r.status !== 201) throw new Error(r.text);
  return r.body.id as string;
};

async function insertRun(pb: string, startedAt: Date, matched: string[] = [], actions: object[] = []): Promise<string> {
  const id = newId();
  await db()`
    INSERT INTO playbook_runs (id, tenant_id, playbook_id, trigger_source, dry_run, started_at, finished_at, evaluated,
      matched_count, matched, actions, actions_count)
    VALUES (${id}, ${ws.tenant_id}, ${pb}, 'schedule', false, ${startedAt}, ${new Date(startedAt.getTime() + 5)},
      ${matched.length + 2}, ${matched.length}, ${matched}::uuid[], ${JSON.stringify(actions)}::text::jsonb,
      ${actions.length})`;
  return id;
}

t.test('runs: newest first, cursor pages, each record whole', async (t) => {
  const pb = await playbook();
  const base = Date.parse('2026-03-01T10:00:00Z');
  const c = newId();
  const ids: string[] = [];
  for (let i = 0; i < 5; i++)
    ids.push(
      await insertRun(
        pb,
        new Date(base + i * 60_000),
        [c],
        [{ customer_id: c, type: 'create_task', status: 'succeeded', task_id: newId() }],
      ),
    );
  // Same start: the id orders them.
  ids.push(await insertRun(pb, new Date(base + 4 * 60_000)));
  const expected = [...ids.slice(4).sort().reverse(), ...ids.slice(0, 4).reverse()];
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const r = await admin.get(`/v1/playbooks/${pb}/runs?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(r.status, 200, r.text);
    seen.push(...r.body.data.map((x: { id: string }) => x.id));
    cursor = r.body.next_cursor;
  } while (cursor);
  t.same(seen, expected);
  const oldest = (await admin.get(`/v1/playbooks/${pb}/runs?limit=100`)).body.data[5];
  t.same(oldest, {
    id: ids[0],
    playbook_id: pb,
    trigger_source: 'schedule',
    dry_run: false,
    started_at: '2026-03-01T10:00:00.000Z',
    finished_at: '2026-03-01T10:00:00.005Z',
    evaluated: 3,
    matched: [c],
    matched_count: 1,
    actions: [{ customer_id: c, type: 'create_task', status: 'succeeded', task_id: oldest.actions[0].task_id }],
    actions_count: 1,
  });
  isProblem(t, await admin.get(`/v1/playbooks/${pb}/runs?limit=101`), 400, 'validation_failed');
  isProblem(t, await admin.get(`/v1/playbooks/${newId()}/runs`), 404, 'not_found');
});

t.test('a record carries the first 1000 matches and actions, with the totals', async (t) => {
  const w = await bootstrap();
  const c = client(api.url, w.api_key);
  const ids = (
    await db()<Array<{ id: string }>>`
      INSERT INTO customers (tenant_id, name, arr)
      SELECT ${w.tenant_id}, 'C' || i, 100 FROM generate_series(1, 1500) AS i RETURNING id::text`
  )
    .map((x) => x.id)
    .sort();
  const made = await c.post('/v1/playbooks', {
    name: 'Everyone',
    trigger: { type: 'condition', expression: 'arr > 1' },
    actions: [
      { type: 'create_task', title: 'Call', assignee: 'owner' },
      { type: 'notify', channel: 'slack', target: '#cs' },
    ],
  });
  await processorsTier(t, []);
  const run = await c.post(`/v1/playbooks/${made.body.id}/run`, {});
  t.equal(run.status, 200, run.text.slice(0, 300));
  t.equal(run.body.matched_count, 1500);
  t.same(run.body.matched, ids.slice(0, 1000), 'the first 1000 matched ids, in id order');
  t.equal(run.body.actions_count, 3000, 'a task and a notify per customer');
  t.equal(run.body.actions.length, 1000);
  t.same(
    run.body.actions.map((a: { customer_id: string; type: string }) => `${a.customer_id} ${a.type}`),
    ids.slice(0, 500).flatMap((id) => [`${id} create_task`, `${id} notify`]),
    'the first 1000 entries, by customer then action',
  );
  const [n] = await db()<Array<{ n: number }>>`SELECT count(*)::int AS n FROM tasks WHERE run_id = ${run.body.id}`;
  t.equal(n.n, 1500, 'every task created, beyond the entries the record keeps');
  t.same((await c.get(`/v1/playbooks/${made.body.id}/runs`)).body.data[0], run.body);
});

t.test('run: disabled → 409 unless dry; no runner → 503 runner_unavailable', async (t) => {
  const { url } = await privateNats(t);
  const isolated = await startApi(t, { NATS_URL: url, PLAYBOOK_RUN_TIMEOUT_MS: '1500' });
  const iso = client(isolated.url, ws.api_key);
  const off = await playbook(false);
  isProblem(t, await iso.post(`/v1/playbooks/${off}/run`, {}), 409, 'playbook_disabled');
  isProblem(t, await iso.post(`/v1/playbooks/${off}/run`, { dry_run: false }), 409, 'playbook_disabled');
  const check = (r: Res) => {
    isProblem(t, r, 503, 'runner_unavailable');
    t.equal(r.headers.get('retry-after'), '30');
  };
  check(await iso.post(`/v1/playbooks/${off}/run`, { dry_run: true }));
  const on = await playbook();
  check(await iso.post(`/v1/playbooks/${on}/run`, {}));
  // A runner that never answers: the request waits PLAYBOOK_RUN_TIMEOUT_MS.
  const nc = await connect({ servers: url });
  t.teardown(() => nc.close());
  const silent = nc.subscribe(subjects.playbookRun, { queue: 'playbook-runner' });
  await nc.flush();
  const started = Date.now();
  check(await iso.post(`/v1/playbooks/${on}/run`, { dry_run: true }));
  t.ok(Date.now() - started >= 1400, 'waited PLAYBOOK_RUN_TIMEOUT_MS');
  silent.unsubscribe();
  t.equal((await db()`SELECT 1 FROM playbook_runs WHERE playbook_id = ${on}`).length, 0, 'no run recorded');
  isProblem(t, await iso.post(`/v1/playbooks/${on}/run`, { dry_run: 'yes' }), 400, 'validation_failed');
});

t.test('run with a runner: the stored record, dry and not', async (t) => {
  const w = await bootstrap();
  const c = client(api.url, w.api_key);
  const [m] = await db()<Array<{ id: string }>>`
    INSERT INTO metrics (tenant_id, slug, name, source_event, calculation, window_def, grain)
    VALUES (${w.tenant_id}, 'seats_used', 'Seats used', 'login', 'count', '{"type":"rolling","days":7}', 'customer')
    RETURNING id::text`;
  const customers = await db()<Array<{ id: string }>>`
    INSERT INTO customers (tenant_id, name) VALUES (${w.tenant_id}, 'A'), (${w.tenant_id}, 'B') RETURNING id::text`;
  const [a, b] = customers.map((x) => x.id);
  await storeValues(w.tenant_id, m.id, { [a]: 9, [b]: 1 }, new Date(Date.now() - 60_000));
  const made = await c.post('/v1/playbooks', {
    name: 'Seats',
    trigger: { type: 'metric_threshold', metric_id: m.id, operator: 'gt', value: 5 },
    actions: [{ type: 'create_task', title: 'Upsell', assignee: 'owner' }],
  });
  t.equal(made.status, 201, made.text);
  const pb = made.body.id;
  await processorsTier(t, []);

  const dry = await c.post(`/v1/playbooks/${pb}/run`, { dry_run: true });
  t.equal(dry.status, 200, dry.text);
  t.match(dry.body, { playbook_id: pb, trigger_source: 'manual', dry_run: true, evaluated: 2, matched: [a] });
  t.same(dry.body.actions, []);
  const real = await c.post(`/v1/playbooks/${pb}/run`, {});
  t.equal(real.status, 200, real.text);
  t.match(real.body, { dry_run: false, matched: [a], matched_count: 1, actions_count: 1 });
  t.match(real.body.actions, [{ customer_id: a, type: 'create_task', status: 'succeeded', reason: 'owner_not_found' }]);
  const [task] = await db()<Array<{ id: string }>>`SELECT id::text FROM tasks WHERE run_id = ${real.body.id}`;
  t.equal(real.body.actions[0].task_id, task.id);
  const list = (await c.get(`/v1/playbooks/${pb}/runs`)).body.data;
  t.same(
    list.map((r: { id: string }) => r.id),
    [real.body.id, dry.body.id],
  );
  t.same(list[0], real.body, 'the list shows the record POST answered');

  const bare = await c.post(`/v1/playbooks/${pb}/run`);
  t.equal(bare.status, 200, `no body at all is a run that is not dry: ${bare.text}`);
  t.match(bare.body, { dry_run: false, matched: [a], actions: [] });
});
