import t from '#tap';
import { bootstrap, closeDb, db, privateJetStream, seed, waitFor } from '../helpers/stack.js';
import { customerIds } from '../ingest/support.js';
import { insertPlaybook, natsClient, newId, processorsTier, runNow, storeValues, tasksOf } from './support.js';

// Exactly once under failure and concurrency: an evaluation is one transaction, so a runner
// killed with SIGKILL in the middle of one leaves all of it or none of it, and the next
// evaluation completes the firing without a lost or a doubled task; evaluations of one playbook
// asked of several instances at once never double a task either.
t.teardown(closeDb);
// A bus of its own: its requests reach its runners only, and what the killed one held is its own.
const nats = await privateJetStream(t);

const CUSTOMERS = 5000;

async function workspaceWithPlaybook() {
  const ws = await bootstrap();
  await seed(ws.tenant_id, CUSTOMERS);
  const ids = [...(await customerIds(ws.tenant_id)).values()];
  const metricId = newId();
  // Two customers in three reach the threshold.
  const values = Object.fromEntries(ids.map((id, i) => [id, i % 3 === 0 ? 1 : 10]));
  await storeValues(ws.tenant_id, metricId, values, new Date(Date.now() - 60_000));
  const matching = ids.filter((_, i) => i % 3 !== 0).length;
  const pb = await insertPlaybook(ws.tenant_id, {
    trigger: { type: 'metric_threshold', metric_id: metricId, operator: 'gt', value: 5 },
    actions: [
      { type: 'create_task', title: 'First', assignee: 'owner' },
      { type: 'create_task', title: 'Second', assignee: 'owner', due_in_days: 1 },
    ],
    metric_ids: [metricId],
  });
  return { ws, pb, matching };
}

async function counts(pb: string) {
  const [r] = await db()<Array<{ tasks: number; firing: number; runs: number; outbox: number }>>`
    SELECT (SELECT count(*) FROM tasks WHERE playbook_id = ${pb})::int AS tasks,
      (SELECT count(*) FROM playbook_firing WHERE playbook_id = ${pb})::int AS firing,
      (SELECT count(*) FROM playbook_runs WHERE playbook_id = ${pb})::int AS runs,
      (SELECT count(*) FROM event_outbox o WHERE event_name = 'task_created'
         AND (o.properties->>'playbook_id') = ${pb})::int AS outbox`;
  return r;
}

t.test('a runner killed with SIGKILL mid-run: all or nothing, then exactly once', async (t) => {
  const { ws, pb, matching } = await workspaceWithPlaybook();
  const nc = await natsClient(t, nats.url);
  const first = await processorsTier(t, [], nats.env);

  // Kill as soon as the evaluation holds its lock, i.e. inside its transaction.
  const pending = runNow(nc, ws.tenant_id, pb, false, 5000).catch((err: unknown) => ({
    ok: false,
    error: String(err),
  }));
  await waitFor(
    'the evaluation in progress',
    async () =>
      (
        await db()`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = ${0x706c6179}
                     AND objid::int = hashtext(${pb}) AND granted`
      ).length > 0,
    30_000,
    2,
  );
  await first.stop('SIGKILL');
  const reply = await pending;
  const after = await waitFor(
    'the killed transaction rolled back or committed',
    async () => {
      const busy = await db()`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = ${0x706c6179}
                                AND objid::int = hashtext(${pb})`;
      return busy.length === 0 ? counts(pb) : undefined;
    },
    30_000,
  );
  t.comment(`reply before the kill: ${JSON.stringify(reply)}; stored after it: ${JSON.stringify(after)}`);
  const none = { tasks: 0, firing: 0, runs: 0, outbox: 0 };
  const all = { tasks: 2 * matching, firing: matching, runs: 1, outbox: 2 * matching };
  t.ok(
    JSON.stringify(after) === JSON.stringify(none) || JSON.stringify(after) === JSON.stringify(all),
    'the killed evaluation left all of itself or nothing',
  );

  await processorsTier(t, [], nats.env);
  const again = await runNow(nc, ws.tenant_id, pb);
  t.equal(again.ok, true);
  t.match(await counts(pb), { tasks: 2 * matching, firing: matching, outbox: 2 * matching });
  const tasks = await tasksOf(pb);
  t.equal(new Set(tasks.map((x) => `${x.customer_id}|${x.title}`)).size, 2 * matching, 'no task doubled');
  const more = await runNow(nc, ws.tenant_id, pb);
  t.equal(more.ok, true);
  t.equal((await counts(pb)).tasks, 2 * matching, 'a later evaluation adds nothing');
});

t.test('concurrent evaluations of one playbook on two instances fire once', async (t) => {
  const { ws, pb, matching } = await workspaceWithPlaybook();
  const nc = await natsClient(t, nats.url);
  await processorsTier(t, [], nats.env);
  await processorsTier(t, [], nats.env);
  const replies = await Promise.all(Array.from({ length: 6 }, () => runNow(nc, ws.tenant_id, pb)));
  t.same(
    replies.map((r) => r.ok),
    replies.map(() => true),
  );
  t.match(await counts(pb), { tasks: 2 * matching, firing: matching, runs: 6, outbox: 2 * matching });
  const [fired] = await db()<Array<{ n: number }>>`
    SELECT count(*)::int AS n FROM playbook_runs WHERE playbook_id = ${pb} AND actions <> '[]'::jsonb`;
  t.equal(fired.n, 1, 'one run fired, the others found every customer firing already');
});
