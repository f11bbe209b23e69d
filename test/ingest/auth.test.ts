import t from '#tap';
import { randomBytes } from 'node:crypto';
import { closeDb } from '../helpers/stack.js';
import {
  BILLING,
  USAGE,
  batch,
  customerIds,
  expect202,
  ingest,
  natsClient,
  send,
  StreamTap,
  traceOf,
  workspace,
} from './support.js';

// Surface A authentication (X-API-Key), the tenant it yields, and the answers outside the two routes.
t.teardown(closeDb);
const [a, b] = await Promise.all([workspace(1), workspace(1)]);
const tier = await ingest(t);
const nc = await natsClient(t);
const liveKey = () => `sk_live_${randomBytes(32).toString('hex')}`;

t.test('a request without X-API-Key gets 401 "Missing X-API-Key header", on both endpoints', async (t) => {
  for (const path of [USAGE, BILLING]) {
    const res = await send(tier.url, path, batch(1), { key: null });
    t.equal(res.status, 401, path);
    t.equal(res.text, '{"detail":"Missing X-API-Key header"}', `${path}: body verbatim`);
    t.match(res.headers.get('content-type'), /^application\/json/);
    traceOf(t, res);
  }
});

t.test('a key of the wrong format gets 401 "Invalid API key"', async (t) => {
  const hex = randomBytes(32).toString('hex');
  for (const key of [
    'not-a-key',
    `sk_live_${hex.slice(1)}`,
    `sk_live_${hex}0`,
    `sk_test_${hex}`,
    `sk_live_${hex.toUpperCase()}`,
    a.api_key,
  ]) {
    const res = await send(tier.url, USAGE, batch(1), { key });
    t.equal(res.status, 401, key);
    t.equal(res.text, '{"detail":"Invalid API key"}', `${key}: body verbatim`);
    traceOf(t, res);
  }
});

t.test('a well-formed key that no workspace holds gets 401 "Invalid API key", also when repeated', async (t) => {
  const key = liveKey();
  for (const path of [USAGE, BILLING, USAGE]) {
    const res = await send(tier.url, path, batch(1), { key });
    t.equal(res.status, 401, path);
    t.equal(res.text, '{"detail":"Invalid API key"}');
    traceOf(t, res);
  }
});

t.test('a valid key is accepted', async (t) => {
  expect202(t, await send(tier.url, USAGE, batch(1), { key: a.ingestion_key }), 1);
});

t.test('the tenant comes from the key, never from the body', async (t) => {
  const tapA = await StreamTap.open(t, nc, `ev.usage.${a.tenant_id}`);
  const tapB = await StreamTap.open(t, nc, `ev.usage.${b.tenant_id}`);
  const idsA = await customerIds(a.tenant_id);
  const idsB = await customerIds(b.tenant_id);
  // Both workspaces have a cust-000001; the body claims workspace B everywhere it can.
  const body = {
    tenant_id: b.tenant_id,
    events: [
      {
        event_name: 'login',
        external_customer_id: 'cust-000001',
        tenant_id: b.tenant_id,
        properties: { tenant_id: b.tenant_id },
      },
    ],
  };
  const res = await send(tier.url, USAGE, body, { key: a.ingestion_key });
  expect202(t, res, 1);
  const msg = await tapA.one(t);
  t.equal(msg.subject, `ev.usage.${a.tenant_id}`);
  t.equal(msg.rows[0].tenant_id, a.tenant_id, "stored under the key's workspace");
  t.equal(msg.rows[0].customer_id, idsA.get('cust-000001'), "customer resolved in the key's workspace");
  t.not(msg.rows[0].customer_id, idsB.get('cust-000001'));
  t.equal(await tapB.pending(), 0, 'nothing stored for the workspace named in the body');
});

// /v1/events and the paths under it are surface B's, its 404 too (test/events/, test/hardening/ingest.test.ts).
t.test('unknown paths answer 404 with X-Trace-Id', async (t) => {
  for (const [method, path] of [
    ['POST', '/v1/ingest/unknown'],
    ['POST', '/v1/ingest/events/extra'],
    ['GET', '/v1/nothing'],
    ['POST', '/'],
  ]) {
    const res = await send(tier.url, path, method === 'GET' ? undefined : batch(1), { key: a.ingestion_key, method });
    t.equal(res.status, 404, `${method} ${path}`);
    t.same(res.body, { detail: 'Not Found' });
    traceOf(t, res);
  }
});

t.test('other methods on the ingest paths answer 405 with Allow: POST and X-Trace-Id', async (t) => {
  for (const path of [USAGE, BILLING]) {
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
      const res = await send(tier.url, path, method === 'GET' ? undefined : batch(1), { key: a.ingestion_key, method });
      t.equal(res.status, 405, `${method} ${path}`);
      t.equal(res.headers.get('allow'), 'POST');
      t.same(res.body, { detail: 'Method Not Allowed' });
      traceOf(t, res);
    }
  }
});
