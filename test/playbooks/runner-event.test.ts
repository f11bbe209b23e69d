import t from '#tap';
import { bootstrap, closeDb, seed, waitFor } from '../helpers/stack.js';
import { ingestTier, sendUsage } from '../health/support.js';
import { customerIds } from '../ingest/support.js';
import { insertPlaybook, processorsTier, runs, tasksOf } from './support.js';

// An event playbook fires within a minute of the events that make a customer match, with no
// request: the events mark the workspace and the runner evaluates its event playbooks.
t.teardown(closeDb);

t.test('event trigger: a task within a minute of the Nth event', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 3);
  const ids = await customerIds(ws.tenant_id);
  const [a, b] = [ids.get('cust-000001')!, ids.get('cust-000002')!];
  const pb = await insertPlaybook(ws.tenant_id, {
    trigger: { type: 'event', event_name: 'export_failed', count: 2, within_days: 1 },
    actions: [{ type: 'create_task', title: 'Help with exports', assignee: 'owner' }],
  });
  const ingest = await ingestTier(t);
  await processorsTier(t, [ws.tenant_id], { PLAYBOOKS_EVENT_POLL_MS: '500' });
  // The first scheduled evaluation: nothing matches yet.
  await waitFor('the first scheduled run', async () => (await runs(pb)).length > 0, 30_000);
  t.match(await runs(pb), [{ trigger_source: 'schedule', matched: [] }]);

  const sent = Date.now();
  await sendUsage(ingest, ws, [
    { event_name: 'export_failed', external_customer_id: 'cust-000001' },
    { event_name: 'export_failed', external_customer_id: 'cust-000001' },
    { event_name: 'export_failed', external_customer_id: 'cust-000002' },
    { event_name: 'something_else', external_customer_id: 'cust-000002' },
  ]);
  const [task] = await waitFor(
    'a task for customer 1',
    async () => {
      const tasks = await tasksOf(pb);
      return tasks.length ? tasks : undefined;
    },
    60_000,
  );
  t.ok(Date.now() - sent < 60_000, `created ${Date.now() - sent} ms after the events were sent`);
  t.match(task, { customer_id: a, title: 'Help with exports', status: 'pending', assignee_id: null });
  const fired = (await runs(pb)).find((r) => r.actions.length)!;
  t.match(fired, { trigger_source: 'event', matched: [a] });
  t.same(fired.actions, [
    { customer_id: a, type: 'create_task', status: 'succeeded', task_id: task.id, reason: 'owner_not_found' },
  ]);

  // Customer 2's second event makes it match too; customer 1 is still matching and does not fire again.
  await sendUsage(ingest, ws, [{ event_name: 'export_failed', external_customer_id: 'cust-000002' }]);
  await waitFor('a task for customer 2', async () => (await tasksOf(pb)).some((x) => x.customer_id === b), 60_000);
  t.same((await tasksOf(pb)).map((x) => x.customer_id).sort(), [a, b].sort(), 'one task each');
});
