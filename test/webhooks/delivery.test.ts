import t from '#tap';
import { client, startApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb, db, privateJetStream, waitFor, type Workspace } from '../helpers/stack.js';
import { type Receiver, startReceiver, verifySignature } from '../helpers/webhook-receiver.js';
import { processorsTier } from '../playbooks/support.js';

// Deliveries end to end, to a local receiver that checks every signature with its own Standard
// Webhooks implementation: the events of customers and tasks with the resource as GET shows it;
// retries on the configured schedule with the same webhook-id, then failed; 410 disables; a
// rotated secret signs beside the new one; a hanging endpoint does not hold up another; a
// subscription failing for WEBHOOK_DISABLE_AFTER_MS is disabled; a dispatcher killed with SIGKILL
// mid-attempt loses nothing and its duplicates keep their webhook-id.
t.teardown(closeDb);
// A bus of its own: what the killed dispatcher's tier held is this file's alone.
const nats = await privateJetStream(t);
const api = await startApi(t, nats.env);
const rx = await startReceiver(t);
const ws = await bootstrap();
const admin = client(api.url, ws.api_key);

const SCHEDULE = '300,600';
const env = (w: Workspace, extra: Record<string, string> = {}) => ({
  WEBHOOK_TENANTS: w.tenant_id,
  WEBHOOK_RETRY_SCHEDULE: SCHEDULE,
  WEBHOOK_TIMEOUT_MS: '1000',
  WEBHOOK_POLL_MS: '50',
  ...nats.env,
  ...extra,
});
await processorsTier(t, [], env(ws));

async function subscribe(c: ReturnType<typeof client>, path: string, events: string[]) {
  const r = await c.post('/v1/webhook-subscriptions', { url: rx.url(path), events });
  if (r.status !== 201) throw new Error(r.text);
  return r.body as { id: string; secret: string };
}
const received = (r: Receiver, path: string, n: number, timeoutMs = 20_000) =>
  waitFor(`${n} deliveries at ${path}`, () => (r.at(path).length >= n ? r.at(path) : undefined), timeoutMs);

t.test('customer and task events: the resource as GET shows it, signed', async (t) => {
  const sub = await subscribe(admin, '/crm', [
    'customer.created',
    'customer.updated',
    'customer.deleted',
    'task.created',
    'task.completed',
  ]);
  const made = await admin.post('/v1/customers', { name: 'Hooked', arr: 1200, custom_fields: { tier: 'gold' } });
  const [created] = await received(rx, '/crm', 1);
  t.ok(verifySignature(sub.secret, created), 'the signature verifies with an independent check');
  t.equal(created.json.type, 'customer.created');
  const {
    segments: _s,
    health: _h,
    renewal: _r,
    pending_tasks: _p,
    ...shown
  } = (await admin.get(`/v1/customers/${made.body.id}`)).body;
  t.same(created.json.data, shown, 'data is the customer as GET shows it');
  t.match(created.json.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

  await admin.patch(`/v1/customers/${made.body.id}`, { arr: 1500 });
  await admin.patch(`/v1/customers/${made.body.id}`, { arr: 1500 });
  const task = await admin.post('/v1/tasks', { customer_id: made.body.id, title: 'Call' });
  await admin.post(`/v1/tasks/${task.body.id}/complete`, { outcome: 'successful' });
  await admin.del(`/v1/customers/${made.body.id}`);
  const all = await received(rx, '/crm', 5);
  await new Promise((r) => setTimeout(r, 500));
  const types = rx.at('/crm').map((r) => r.json.type);
  t.same(
    [...types].sort(),
    ['customer.created', 'customer.deleted', 'customer.updated', 'task.completed', 'task.created'],
    'one event per change; a PATCH that changes nothing sends none',
  );
  const byType = new Map(all.map((r) => [r.json.type, r]));
  t.equal(byType.get('customer.updated')?.json.data.arr, 1500);
  t.ok(byType.get('customer.deleted')?.json.data.deleted_at, 'customer.deleted carries deleted_at');
  const completed = (await admin.get(`/v1/tasks/${task.body.id}`)).body;
  t.same(byType.get('task.completed')?.json.data, completed, 'task.completed carries the task as GET shows it');
  t.equal(new Set(all.map((r) => r.id)).size, all.length, 'a webhook-id per message');
  for (const r of all) t.ok(verifySignature(sub.secret, r), `${r.json.type} signed`);

  const log = await admin.get(`/v1/webhook-subscriptions/${sub.id}/deliveries`);
  t.equal(log.body.data.length, 5);
  t.match(log.body.data[0], {
    attempt: 1,
    status: 'succeeded',
    response_status: 204,
    error: null,
    next_attempt_at: null,
  });
  t.ok(log.body.data.every((a: { duration_ms: number }) => a.duration_ms >= 0));
  await admin.del(`/v1/webhook-subscriptions/${sub.id}`);
});

t.test('retries on the schedule with the same webhook-id, then failed', async (t) => {
  rx.on('/flaky', { status: [500, 503, 200] });
  rx.on('/down', { status: 500 });
  const flaky = await subscribe(admin, '/flaky', ['customer.created']);
  const down = await subscribe(admin, '/down', ['customer.created']);
  await admin.post('/v1/customers', { name: 'Retried' });
  const tries = await received(rx, '/flaky', 3);
  t.equal(new Set(tries.map((r) => r.id)).size, 1, 'the same webhook-id on every attempt');
  t.ok(tries[1].at - tries[0].at >= 290, `first retry after ≥ 300 ms (${tries[1].at - tries[0].at})`);
  t.ok(tries[2].at - tries[1].at >= 590, `second retry after ≥ 600 ms (${tries[2].at - tries[1].at})`);
  const log = await waitFor('three attempts logged', async () => {
    const r = await admin.get(`/v1/webhook-subscriptions/${flaky.id}/deliveries`);
    return r.body.data.length === 3 && r.body.data[0].status !== 'pending' ? r.body.data : undefined;
  });
  t.match(log, [
    { attempt: 3, status: 'succeeded', response_status: 200, next_attempt_at: null },
    { attempt: 2, status: 'failed', response_status: 503, error: 'HTTP 503' },
    { attempt: 1, status: 'failed', response_status: 500 },
  ]);
  t.ok(log[1].next_attempt_at && log[2].next_attempt_at, 'a failed attempt with retries left says when');
  t.equal(new Set(log.map((a: { message_id: string }) => a.message_id)).size, 1);

  await received(rx, '/down', 3);
  const final = await waitFor('the last attempt failed', async () => {
    const [d] = await db()<Array<{ status: string; attempts: number }>>`
      SELECT status, attempts FROM webhook_deliveries WHERE subscription_id = ${down.id}`;
    return d?.status === 'failed' ? d : undefined;
  });
  t.same(final, { status: 'failed', attempts: 3 }, '1 + the schedule’s 2 retries');
  const downLog = (await admin.get(`/v1/webhook-subscriptions/${down.id}/deliveries`)).body.data;
  t.match(downLog[0], { attempt: 3, status: 'failed', next_attempt_at: null });
  await new Promise((r) => setTimeout(r, 800));
  t.equal(rx.at('/down').length, 3, 'no attempt after the last');
  await admin.del(`/v1/webhook-subscriptions/${flaky.id}`);
  await admin.del(`/v1/webhook-subscriptions/${down.id}`);
});

t.test('410 Gone disables the subscription; enabling it again resumes', async (t) => {
  rx.on('/gone', { status: [410, 204] });
  const sub = await subscribe(admin, '/gone', ['customer.created']);
  await admin.post('/v1/customers', { name: 'Gone 1' });
  await received(rx, '/gone', 1);
  const off = await waitFor('disabled', async () => {
    const r = (await admin.get(`/v1/webhook-subscriptions/${sub.id}`)).body;
    return r.enabled === false ? r : undefined;
  });
  t.equal(off.disabled_reason, 'gone');
  await new Promise((r) => setTimeout(r, 700));
  t.equal(rx.at('/gone').length, 1, 'no retry after 410');
  await admin.post('/v1/customers', { name: 'Gone 2' });
  await new Promise((r) => setTimeout(r, 700));
  t.equal(rx.at('/gone').length, 1, 'a disabled subscription gets nothing');
  const on = await admin.patch(`/v1/webhook-subscriptions/${sub.id}`, { enabled: true });
  t.match(on.body, { enabled: true, disabled_reason: null });
  await admin.post('/v1/customers', { name: 'Gone 3' });
  const after = await received(rx, '/gone', 2);
  t.equal(after[1].json.data.name, 'Gone 3', 'events after re-enabling are delivered');
  await admin.del(`/v1/webhook-subscriptions/${sub.id}`);
});

t.test('a rotated secret: both signatures for a day, each verifiable', async (t) => {
  const sub = await subscribe(admin, '/rotated', ['customer.created']);
  const { secret } = (await admin.post(`/v1/webhook-subscriptions/${sub.id}/rotate-secret`)).body;
  await admin.post('/v1/customers', { name: 'Rotated' });
  const [r] = await received(rx, '/rotated', 1);
  t.equal(r.signatures.length, 2, 'two v1 signatures');
  t.ok(verifySignature(secret, { ...r, signatures: [r.signatures[0]] }), 'the first by the new secret');
  t.ok(verifySignature(sub.secret, { ...r, signatures: [r.signatures[1]] }), 'the second by the previous one');
  await db()`UPDATE webhook_subscriptions SET previous_until = now() - interval '1 second' WHERE id = ${sub.id}`;
  await admin.post('/v1/customers', { name: 'Rotated 2' });
  const [, later] = await received(rx, '/rotated', 2);
  t.equal(later.signatures.length, 1, 'after the grace period, only the new secret');
  t.ok(verifySignature(secret, later));
  await admin.del(`/v1/webhook-subscriptions/${sub.id}`);
});

t.test('ping and a hanging endpoint that never holds up another', async (t) => {
  rx.on('/hang', { delayMs: 3000 });
  const slow = await subscribe(admin, '/hang', ['customer.created']);
  const fast = await subscribe(admin, '/fast', ['customer.created']);
  const ping = await admin.post(`/v1/webhook-subscriptions/${fast.id}/test`);
  const [p] = await received(rx, '/fast', 1);
  t.same([p.json.type, p.id], ['ping', ping.body.message_id], 'the ping, its message id as webhook-id');
  const t0 = Date.now();
  for (let i = 0; i < 20; i++) await admin.post('/v1/customers', { name: `Burst ${i}` });
  await received(rx, '/fast', 21, 10_000);
  t.ok(Date.now() - t0 < 5000, `the healthy endpoint got all 20 while the other hangs (${Date.now() - t0} ms)`);
  const slowLog = await waitFor('timeouts logged', async () => {
    const r = (await admin.get(`/v1/webhook-subscriptions/${slow.id}/deliveries?limit=200`)).body.data;
    return r.some((a: { error: string | null }) => a.error?.startsWith('timeout')) ? r : undefined;
  });
  t.match(
    slowLog.find((a: { error: string | null }) => a.error),
    { status: 'failed', error: 'timeout after 1000 ms', response_status: null },
  );
  await admin.del(`/v1/webhook-subscriptions/${slow.id}`);
  await admin.del(`/v1/webhook-subscriptions/${fast.id}`);
});

t.test('failing for WEBHOOK_DISABLE_AFTER_MS disables the subscription', async (t) => {
  const w = await bootstrap();
  const c = client(api.url, w.api_key);
  await processorsTier(
    t,
    [],
    env(w, { WEBHOOK_RETRY_SCHEDULE: '200,200,200,200,200,200,200,200', WEBHOOK_DISABLE_AFTER_MS: '1000' }),
  );
  rx.on('/failing', { status: 500 });
  const sub = await subscribe(c, '/failing', ['customer.created']);
  await c.post('/v1/customers', { name: 'Failing' });
  const off = await waitFor('disabled for failing', async () => {
    const r = (await c.get(`/v1/webhook-subscriptions/${sub.id}`)).body;
    return r.enabled === false ? r : undefined;
  });
  t.equal(off.disabled_reason, 'failing');
  t.ok(rx.at('/failing').length >= 3, 'after several failed attempts');
});

t.test('a dispatcher killed mid-attempt: nothing lost, duplicates keep their webhook-id', async (t) => {
  const w = await bootstrap();
  const c = client(api.url, w.api_key);
  rx.on('/killed', { delayMs: 600 });
  const sub = await subscribe(c, '/killed', ['customer.created']);
  const first = await processorsTier(t, [], env(w, { WEBHOOK_TIMEOUT_MS: '2000' }));
  for (let i = 0; i < 10; i++) await c.post('/v1/customers', { name: `Killed ${i}` });
  await waitFor('attempts in flight', () => rx.at('/killed').length > 0 || undefined);
  await first.stop('SIGKILL');
  const inFlight = await db()<Array<{ n: number }>>`
    SELECT count(*)::int AS n FROM webhook_attempts WHERE subscription_id = ${sub.id} AND status = 'pending'`;
  t.ok(inFlight[0].n > 0, `attempts were in flight when the dispatcher died (${inFlight[0].n})`);
  await processorsTier(t, [], env(w, { WEBHOOK_TIMEOUT_MS: '2000' }));
  const names = await waitFor(
    'every customer.created delivered',
    () => {
      const got = new Set(rx.at('/killed').map((r) => r.json.data.name as string));
      return got.size === 10 ? got : undefined;
    },
    40_000,
  );
  t.equal(names.size, 10, 'all ten delivered');
  const byId = new Map<string, Set<string>>();
  for (const r of rx.at('/killed')) {
    const set = byId.get(r.id) ?? new Set<string>();
    set.add(r.body);
    byId.set(r.id, set);
    t.ok(verifySignature(sub.secret, r));
  }
  t.equal(byId.size, 10, 'ten webhook-ids: a duplicate carries its message’s id');
  t.ok(
    [...byId.values()].every((bodies) => bodies.size === 1),
    'and its body',
  );
  const log = await waitFor('no attempt left pending', async () => {
    const r = (await c.get(`/v1/webhook-subscriptions/${sub.id}/deliveries?limit=200`)).body.data;
    return r.every((a: { status: string }) => a.status !== 'pending') ? r : undefined;
  });
  t.ok(
    log.some((a: { error: string | null }) => a.error?.startsWith('interrupted')),
    'the attempts cut off by the kill are logged as interrupted',
  );
});

t.test('playbooks: notify on the webhook channel, run completed, tasks created', async (t) => {
  const w = await bootstrap();
  const c = client(api.url, w.api_key);
  await processorsTier(t, [], env(w));
  const sub = await subscribe(c, '/pb', ['playbook.notification', 'playbook.run.completed', 'task.created']);
  const customer = (await c.post('/v1/customers', { name: 'Big one', arr: 5000 })).body;
  const actions = [
    { type: 'create_task', title: 'Call', assignee: 'owner' },
    { type: 'notify', channel: 'webhook', target: 'crm-queue', message: 'A big account' },
    { type: 'notify', channel: 'slack', target: '#cs' },
  ];
  const pb = (
    await c.post('/v1/playbooks', { name: 'Big', trigger: { type: 'condition', expression: 'arr > 1000' }, actions })
  ).body;
  const run = await c.post(`/v1/playbooks/${pb.id}/run`, {});
  t.equal(run.status, 200, run.text);
  t.match(run.body.actions, [
    { type: 'create_task', status: 'succeeded' },
    { type: 'notify', status: 'succeeded' },
    { type: 'notify', status: 'failed', reason: 'integration_not_connected' },
  ]);
  const got = await received(rx, '/pb', 3);
  const byType = new Map(got.map((r) => [r.json.type, r.json.data]));
  t.same(byType.get('playbook.notification'), {
    playbook_id: pb.id,
    run_id: run.body.id,
    customer_id: customer.id,
    target: 'crm-queue',
    message: 'A big account',
  });
  t.same(byType.get('playbook.run.completed'), run.body, 'the run record as its GET shows it');
  const [task] = (await c.get(`/v1/tasks?playbook_id=${pb.id}`)).body.data;
  t.same(byType.get('task.created'), task);
  for (const r of got) t.ok(verifySignature(sub.secret, r));

  await c.del(`/v1/webhook-subscriptions/${sub.id}`);
  const again = (
    await c.post('/v1/playbooks', {
      name: 'Again',
      trigger: { type: 'condition', expression: 'arr > 1000' },
      actions: [actions[1]],
    })
  ).body;
  const second = await c.post(`/v1/playbooks/${again.id}/run`, {});
  t.match(second.body.actions, [{ type: 'notify', status: 'failed', reason: 'no_webhook_subscription' }]);
  const [n] = await db()<Array<{ n: number }>>`
    SELECT count(*)::int AS n FROM webhook_outbox WHERE tenant_id = ${w.tenant_id} AND type = 'playbook.notification'`;
  t.equal(n.n, 1, 'no event queued without a subscription');
});
