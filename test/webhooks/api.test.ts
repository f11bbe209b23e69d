import t from '#tap';
import { client, isProblem, randomUuid, sharedApi, startApi } from '../core-api/_helpers.js';
import { integrationTokenKey } from '../../infra/stack.js';
import { DataCipher } from '../../lib/credentials/data-cipher.js';
import { bootstrap, closeDb, db, profile } from '../helpers/stack.js';
import { apiKey } from '../metrics/support.js';

// The webhook subscription endpoints over HTTP: create (the secret shown once), read, list,
// change, delete, rotate; every validation rule with the error a client gets, including the SSRF
// policy of a production configuration (a core API without WEBHOOK_ALLOW_HTTP/PRIVATE); scopes and
// roles; another workspace's subscriptions answer 404. Deliveries: delivery.test.ts.
t.teardown(closeDb);
const api = await sharedApi(t);
const ws = await bootstrap();
const other = await bootstrap();
const admin = client(api.url, ws.api_key);
const hook = 'http://127.0.0.1:9/hook';

t.test('create, read, list, change, rotate, delete', async (t) => {
  const made = await admin.post('/v1/webhook-subscriptions', {
    url: hook,
    events: ['customer.created', 'task.completed'],
    description: 'CRM sync',
  });
  t.equal(made.status, 201, made.text);
  t.equal(made.headers.get('location'), `${api.url}/v1/webhook-subscriptions/${made.body.id}`);
  t.match(made.body, {
    url: hook,
    events: ['customer.created', 'task.completed'],
    description: 'CRM sync',
    enabled: true,
    disabled_reason: null,
  });
  t.match(made.body.secret, /^whsec_[A-Za-z0-9+/]{43}=$/, 'whsec_ + base64 of 32 bytes');
  const got = await admin.get(`/v1/webhook-subscriptions/${made.body.id}`);
  const { secret, ...shown } = made.body;
  t.same(got.body, shown, 'GET shows what POST answered, without the secret');
  t.notOk(JSON.stringify((await admin.get('/v1/webhook-subscriptions')).body).includes(secret), 'never listed');

  const second = (await admin.post('/v1/webhook-subscriptions', { url: `${hook}2`, events: ['*'], enabled: false }))
    .body;
  t.equal(second.enabled, false);
  const first = await admin.get('/v1/webhook-subscriptions?limit=1');
  const next = await admin.get(`/v1/webhook-subscriptions?limit=1&cursor=${first.body.next_cursor}`);
  t.same([first.body.data[0].id, next.body.data[0].id], [made.body.id, second.id], 'oldest first, cursor pages');

  const changed = await admin.patch(`/v1/webhook-subscriptions/${made.body.id}`, {
    events: ['health.changed'],
    description: null,
  });
  t.equal(changed.status, 200, changed.text);
  t.match(changed.body, { events: ['health.changed'], description: null, url: hook });

  const rotated = await admin.post(`/v1/webhook-subscriptions/${made.body.id}/rotate-secret`);
  t.equal(rotated.status, 200, rotated.text);
  t.match(rotated.body.secret, /^whsec_/);
  t.not(rotated.body.secret, secret, 'a new secret');
  const [row] = await db()<Array<{ secret: string; previous_secret: string; grace_h: number }>>`
    SELECT secret, previous_secret, round(extract(epoch FROM previous_until - now()) / 3600)::int AS grace_h
    FROM webhook_subscriptions WHERE id = ${made.body.id}`;
  // Stored encrypted under the stack's data key, never as shown.
  const cipher = new DataCipher([integrationTokenKey(profile)]);
  t.match(row.secret, /^v2\./, 'the secret is stored encrypted');
  t.notOk(`${row.secret} ${row.previous_secret}`.includes('whsec_'), 'neither secret is stored in clear');
  t.same(
    { secret: cipher.decrypt(row.secret), previous_secret: cipher.decrypt(row.previous_secret), grace_h: row.grace_h },
    { secret: rotated.body.secret, previous_secret: secret, grace_h: 24 },
    'the old one signs for 24 h',
  );

  t.equal((await admin.del(`/v1/webhook-subscriptions/${made.body.id}`)).status, 204);
  isProblem(t, await admin.get(`/v1/webhook-subscriptions/${made.body.id}`), 404, 'not_found');
  isProblem(t, await admin.del(`/v1/webhook-subscriptions/${made.body.id}`), 404, 'not_found');
  await admin.del(`/v1/webhook-subscriptions/${second.id}`);
});

t.test('validation: event kinds and URL form', async (t) => {
  const bad = async (body: object, field: string, code: string) => {
    const r = await admin.post('/v1/webhook-subscriptions', body);
    isProblem(t, r, 400, 'validation_failed');
    t.match(r.body.errors, [{ field, code }], `${JSON.stringify(body)} → ${field} ${code}`);
  };
  await bad({ url: hook, events: ['customer.created', 'customer.exploded'] }, 'events[1]', 'unknown_event_type');
  await bad({ url: hook, events: ['*', 'ping'] }, 'events[0]', 'invalid_value');
  await bad({ url: '/relative', events: ['*'] }, 'url', 'invalid_url');
  await bad({ url: 'ftp://example.com/x', events: ['*'] }, 'url', 'invalid_url');
  await bad({ url: 'https://user:pw@example.com/x', events: ['*'] }, 'url', 'invalid_url');
  isProblem(t, await admin.post('/v1/webhook-subscriptions', { url: hook, events: [] }), 400, 'validation_failed');
  isProblem(t, await admin.post('/v1/webhook-subscriptions', { url: hook }), 400, 'validation_failed');
  isProblem(
    t,
    await admin.post('/v1/webhook-subscriptions', { url: hook, events: ['ping', 'ping'] }),
    400,
    'validation_failed',
  );
  isProblem(
    t,
    await admin.post('/v1/webhook-subscriptions', { url: hook, events: ['*'], secret: 'mine' }),
    400,
    'validation_failed',
  );
  const sub = (await admin.post('/v1/webhook-subscriptions', { url: hook, events: ['*'] })).body;
  const r = await admin.patch(`/v1/webhook-subscriptions/${sub.id}`, { events: ['nope'] });
  isProblem(t, r, 400, 'validation_failed');
  t.match(r.body.errors, [{ field: 'events[0]', code: 'unknown_event_type' }]);
  t.same((await admin.get(`/v1/webhook-subscriptions/${sub.id}`)).body.events, ['*'], 'nothing stored');
  await admin.del(`/v1/webhook-subscriptions/${sub.id}`);
});

t.test('a production configuration refuses plain http and private destinations', async (t) => {
  const strict = await startApi(t, { WEBHOOK_ALLOW_HTTP: 'false', WEBHOOK_ALLOW_PRIVATE: 'false' });
  const c = client(strict.url, ws.api_key);
  const refused = async (url: string, code: string) => {
    const r = await c.post('/v1/webhook-subscriptions', { url, events: ['*'] });
    isProblem(t, r, 400, 'validation_failed');
    t.match(r.body.errors, [{ field: 'url', code }], `${url} → ${code}`);
  };
  await refused('http://example.com/hook', 'insecure_url');
  for (const url of [
    'https://127.0.0.1/hook',
    'https://localhost:8443/hook',
    'https://10.0.0.5/hook',
    'https://192.168.1.10/hook',
    'https://169.254.169.254/latest/meta-data',
    'https://[::1]/hook',
    'https://[fd00:ec2::254]/hook',
    'https://[::ffff:127.0.0.1]/hook',
    'https://metadata.google.internal/computeMetadata',
  ])
    await refused(url, 'forbidden_destination');
  await refused('https://no-such-host.invalid/hook', 'unresolvable_host');
  const sub = (await admin.post('/v1/webhook-subscriptions', { url: hook, events: ['*'] })).body;
  const r = await c.patch(`/v1/webhook-subscriptions/${sub.id}`, { url: 'https://127.0.0.2/x' });
  isProblem(t, r, 400, 'validation_failed');
  t.equal((await c.get(`/v1/webhook-subscriptions/${sub.id}`)).body.url, hook, 'unchanged');
  await admin.del(`/v1/webhook-subscriptions/${sub.id}`);
});

t.test('scopes, roles and another workspace', async (t) => {
  const sub = (await admin.post('/v1/webhook-subscriptions', { url: hook, events: ['*'] })).body;
  const reader = client(api.url, await apiKey(api.url, ws, 'viewer', ['webhooks:read']));
  t.equal((await reader.get('/v1/webhook-subscriptions')).status, 200);
  t.equal((await reader.get(`/v1/webhook-subscriptions/${sub.id}/deliveries`)).status, 200);
  for (const r of [
    await reader.post('/v1/webhook-subscriptions', { url: hook, events: ['*'] }),
    await reader.patch(`/v1/webhook-subscriptions/${sub.id}`, { enabled: false }),
    await reader.del(`/v1/webhook-subscriptions/${sub.id}`),
    await reader.post(`/v1/webhook-subscriptions/${sub.id}/rotate-secret`),
    await reader.post(`/v1/webhook-subscriptions/${sub.id}/test`),
  ])
    isProblem(t, r, 403, 'insufficient_scope');
  const csm = client(api.url, await apiKey(api.url, ws, 'csm', ['webhooks:write', 'webhooks:read']));
  t.equal((await csm.patch(`/v1/webhook-subscriptions/${sub.id}`, { description: 'csm' })).status, 200);
  const none = client(api.url, await apiKey(api.url, ws, 'viewer', ['customers:read']));
  isProblem(t, await none.get('/v1/webhook-subscriptions'), 403, 'insufficient_scope');

  const them = client(api.url, other.api_key);
  for (const r of [
    await them.get(`/v1/webhook-subscriptions/${sub.id}`),
    await them.patch(`/v1/webhook-subscriptions/${sub.id}`, { enabled: false }),
    await them.del(`/v1/webhook-subscriptions/${sub.id}`),
    await them.post(`/v1/webhook-subscriptions/${sub.id}/rotate-secret`),
    await them.post(`/v1/webhook-subscriptions/${sub.id}/test`),
    await them.get(`/v1/webhook-subscriptions/${sub.id}/deliveries`),
    await admin.get(`/v1/webhook-subscriptions/${randomUuid()}`),
  ])
    isProblem(t, r, 404, 'not_found');
  t.notOk((await them.get('/v1/webhook-subscriptions')).body.data.some((s: { id: string }) => s.id === sub.id));
  t.match((await admin.get(`/v1/webhook-subscriptions/${sub.id}`)).body, { enabled: true, description: 'csm' });
  await admin.del(`/v1/webhook-subscriptions/${sub.id}`);
});

t.test('test ping: queued for that subscription; refused while disabled', async (t) => {
  const sub = (await admin.post('/v1/webhook-subscriptions', { url: hook, events: ['task.created'] })).body;
  const r = await admin.post(`/v1/webhook-subscriptions/${sub.id}/test`);
  t.equal(r.status, 202, r.text);
  t.match(r.body, { status: 'pending' });
  const [d] = await db()<Array<{ event_type: string; body: string }>>`
    SELECT event_type, body FROM webhook_deliveries WHERE message_id = ${r.body.message_id}`;
  t.equal(d.event_type, 'ping');
  t.match(JSON.parse(d.body), { type: 'ping', data: { subscription_id: sub.id, message: 'ping' } });
  await admin.patch(`/v1/webhook-subscriptions/${sub.id}`, { enabled: false });
  isProblem(t, await admin.post(`/v1/webhook-subscriptions/${sub.id}/test`), 409, 'subscription_disabled');
  await admin.del(`/v1/webhook-subscriptions/${sub.id}`);
});
