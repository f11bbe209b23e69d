import t from '#tap';
import { bootstrap, closeDb, db, seed } from '../helpers/stack.js';
import { customerIds } from '../ingest/support.js';
import { insertPlaybook, natsClient, newId, processorsTier, runNow, runRow, storeValues, tasksOf } from './support.js';

// A condition playbook over health, a segment and a metric: tasks for exactly the customers the
// expression holds for, once; re-armed when a customer stops matching, fired again when it
// matches anew.
t.teardown(closeDb);

async function setHealth(tenant: string, customer: string, score: number, status: string): Promise<void> {
  await db()`
    INSERT INTO customer_health (customer_id, tenant_id, score, status, dimensions, calculated_at)
    VALUES (${customer}, ${tenant}, ${score}, ${status}, '{}', now())
    ON CONFLICT (customer_id) DO UPDATE SET score = EXCLUDED.score, status = EXCLUDED.status`;
}

t.test('condition: health, segment and metric, edge-triggered', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 5);
  const ids = await customerIds(ws.tenant_id);
  const [a, b, c, d, e] = [1, 2, 3, 4, 5].map((i) => ids.get(`cust-00000${i}`)!);
  await db()`UPDATE customers SET arr = 90000 WHERE id IN (${a}, ${b}, ${c})`;
  await db()`UPDATE customers SET arr = 1000 WHERE id IN (${d}, ${e})`;
  await db()`
    INSERT INTO segments (tenant_id, name, rules, match)
    VALUES (${ws.tenant_id}, 'Enterprise', ${db().json([{ field: 'arr', op: 'gte', value: 50000 }] as never)}, 'all')`;
  const metricId = newId();
  await db()`
    INSERT INTO metrics (id, tenant_id, slug, name, source_event, calculation, window_def, grain)
    VALUES (${metricId}, ${ws.tenant_id}, 'logins', 'Logins', 'login', 'count',
      ${db().json({ type: 'rolling', days: 30 } as never)}, 'customer')`;
  await storeValues(ws.tenant_id, metricId, { [a]: 2, [b]: 2, [c]: 40, [d]: 1 }, new Date(Date.now() - 60_000));
  await setHealth(ws.tenant_id, a, 30, 'at_risk');
  await setHealth(ws.tenant_id, b, 85, 'healthy');
  await setHealth(ws.tenant_id, c, 20, 'at_risk');
  await setHealth(ws.tenant_id, d, 10, 'at_risk');
  // e is unscored: `health_score < 40` is false for it.

  const pb = await insertPlaybook(ws.tenant_id, {
    trigger: { type: 'condition', expression: 'health_score < 40 and segment == "Enterprise" and metric.logins < 10' },
    actions: [{ type: 'create_task', title: 'Save the account', assignee: 'owner' }],
    metric_ids: [metricId],
  });
  await processorsTier(t, []);
  const nc = await natsClient(t);

  const first = await runNow(nc, ws.tenant_id, pb);
  t.equal(first.ok, true, JSON.stringify(first));
  t.match(await runRow(first.run_id!), { evaluated: 5, matched_count: 1, matched: [a] });
  t.same(
    (await tasksOf(pb)).map((x) => x.customer_id),
    [a],
    'a task for the one at-risk enterprise customer with few logins',
  );

  const again = await runNow(nc, ws.tenant_id, pb);
  t.match(await runRow(again.run_id!), { matched: [a], actions: [] }, 'still matching: nothing fires');
  t.equal((await tasksOf(pb)).length, 1);

  await setHealth(ws.tenant_id, a, 70, 'healthy');
  await setHealth(ws.tenant_id, b, 35, 'at_risk');
  const third = await runNow(nc, ws.tenant_id, pb);
  t.match(await runRow(third.run_id!), { matched: [b] }, 'a recovered, b slipped');
  t.same((await tasksOf(pb)).map((x) => x.customer_id).sort(), [a, b].sort(), 'b fires');

  await setHealth(ws.tenant_id, a, 25, 'at_risk');
  const fourth = await runNow(nc, ws.tenant_id, pb);
  t.same((await runRow(fourth.run_id!)).matched.sort(), [a, b].sort());
  const tasks = await tasksOf(pb);
  t.equal(tasks.filter((x) => x.customer_id === a).length, 2, 'a re-armed when it recovered and fires again');
  t.equal(tasks.filter((x) => x.customer_id === b).length, 1, 'b fired once');
});
