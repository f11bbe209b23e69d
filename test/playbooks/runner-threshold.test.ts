import t from '#tap';
import { bootstrap, closeDb, db, seed } from '../helpers/stack.js';
import { customerIds } from '../ingest/support.js';
import {
  insertPlaybook,
  natsClient,
  newId,
  processorsTier,
  runNow,
  runRow,
  runs,
  storeValues,
  tasksOf,
} from './support.js';

// A metric_threshold playbook evaluated on request: it fires for the customers whose latest
// materialized value crosses the threshold, once, re-arms when they fall back, and a dry run
// changes nothing but its own run record.
t.teardown(closeDb);

t.test('metric_threshold: fires once per crossing, re-arms, records every run', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 4);
  const ids = await customerIds(ws.tenant_id);
  const [a, b, c, d] = ['cust-000001', 'cust-000002', 'cust-000003', 'cust-000004'].map((x) => ids.get(x)!);
  const [admin] = await db()<Array<{ id: string }>>`SELECT id::text FROM users WHERE tenant_id = ${ws.tenant_id}`;
  await db()`UPDATE customers SET owner_email = ${ws.admin_email.toUpperCase()} WHERE id = ${a}`;
  await processorsTier(t, []);
  const nc = await natsClient(t);

  const metricId = newId();
  const t0 = Date.now() - 3600_000;
  await storeValues(ws.tenant_id, metricId, { [a]: 10, [b]: 3, [c]: null, [d]: 50 }, new Date(t0));
  await db()`UPDATE customers SET deleted_at = now() WHERE id = ${d}`;
  const pb = await insertPlaybook(ws.tenant_id, {
    trigger: { type: 'metric_threshold', metric_id: metricId, operator: 'gte', value: 5 },
    actions: [
      { type: 'create_task', title: 'Call them', assignee: 'owner', due_in_days: 3, description: 'Usage is up' },
      { type: 'notify', channel: 'slack', target: '#cs' },
      { type: 'create_task', title: 'Review', assignee: ws.admin_email },
    ],
    metric_ids: [metricId],
  });

  const dry = await runNow(nc, ws.tenant_id, pb, true);
  t.equal(dry.ok, true);
  const dryRun = await runRow(dry.run_id!);
  t.match(dryRun, {
    trigger_source: 'manual',
    dry_run: true,
    evaluated: 3,
    matched_count: 1,
    matched: [a],
    actions: [],
  });
  t.same(await tasksOf(pb), [], 'a dry run creates no task');
  t.equal((await db()`SELECT 1 FROM playbook_firing WHERE playbook_id = ${pb}`).length, 0, 'nor fires');

  const first = await runNow(nc, ws.tenant_id, pb);
  t.equal(first.ok, true);
  const tasks = await tasksOf(pb);
  t.equal(tasks.length, 2, 'two create_task actions for the one customer that fired');
  const today = new Date().toISOString().slice(0, 10);
  const due = new Date(Date.parse(today) + 3 * 86_400_000).toISOString().slice(0, 10);
  const call = tasks.find((x) => x.title === 'Call them')!;
  t.match(call, {
    customer_id: a,
    description: 'Usage is up',
    status: 'pending',
    assignee_id: admin.id,
    owner_id: admin.id,
    due_date: due,
    run_id: first.run_id,
  });
  t.match(
    tasks.find((x) => x.title === 'Review'),
    { customer_id: a, assignee_id: admin.id, due_date: null },
  );
  const run1 = await runRow(first.run_id!);
  t.match(run1, { trigger_source: 'manual', dry_run: false, evaluated: 3, matched_count: 1, matched: [a] });
  t.same(
    run1.actions,
    [
      { customer_id: a, type: 'create_task', status: 'succeeded', task_id: call.id },
      { customer_id: a, type: 'notify', status: 'failed', reason: 'integration_not_connected' },
      {
        customer_id: a,
        type: 'create_task',
        status: 'succeeded',
        task_id: tasks.find((x) => x.title === 'Review')!.id,
      },
    ],
    'action entries in action order',
  );
  const outbox = await db()<Array<{ customer_id: string; properties: any }>>`
    SELECT customer_id::text, properties FROM event_outbox
    WHERE tenant_id = ${ws.tenant_id} AND event_name = 'task_created' ORDER BY properties->>'task_id'`;
  t.same(
    outbox.map((o) => o.properties.task_id).sort(),
    tasks.map((x) => x.id).sort(),
    'a task_created event per task, in the same transaction',
  );

  const again = await runNow(nc, ws.tenant_id, pb);
  const run2 = await runRow(again.run_id!);
  t.match(run2, { matched: [a], actions: [] }, 'still matching: no second firing');
  t.equal((await tasksOf(pb)).length, 2);

  // a falls back below the threshold, b crosses it (a later computation wins).
  await storeValues(ws.tenant_id, metricId, { [a]: 1, [b]: 7 }, new Date(t0 + 60_000));
  const third = await runNow(nc, ws.tenant_id, pb);
  const run3 = await runRow(third.run_id!);
  t.same(run3.matched, [b]);
  t.same(
    run3.actions.map((x) => [x.customer_id, x.type, x.status, x.reason]),
    [
      [b, 'create_task', 'succeeded', 'owner_not_found'],
      [b, 'notify', 'failed', 'integration_not_connected'],
      [b, 'create_task', 'succeeded', undefined],
    ],
    'b has no owner: its owner task is unassigned and the run says so',
  );
  t.match(
    (await tasksOf(pb)).filter((x) => x.customer_id === b && x.title === 'Call them'),
    [{ assignee_id: null, owner_id: null }],
  );

  // a crosses again: re-armed, so it fires a second time.
  await storeValues(ws.tenant_id, metricId, { [a]: 9 }, new Date(t0 + 120_000));
  const fourth = await runNow(nc, ws.tenant_id, pb);
  const run4 = await runRow(fourth.run_id!);
  t.same(run4.matched.sort(), [a, b].sort());
  t.same([...new Set(run4.actions.map((x) => x.customer_id))], [a], 'only a fired again');
  t.equal((await tasksOf(pb)).filter((x) => x.customer_id === a).length, 4);
  t.equal((await runs(pb)).length, 5, 'every run is recorded, dry runs too');

  t.same(await runNow(nc, ws.tenant_id, newId()), { ok: false, error: 'unknown_playbook' });
  await db()`UPDATE playbooks SET enabled = false WHERE id = ${pb}`;
  t.same(await runNow(nc, ws.tenant_id, pb), { ok: false, error: 'playbook_disabled' });
  t.equal((await runNow(nc, ws.tenant_id, pb, true)).ok, true, 'a disabled playbook runs dry');
});
