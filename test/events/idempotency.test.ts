import t from '#tap';
import { closeDb, db } from '../helpers/stack.js';
import { natsClient, StreamTap } from '../ingest/support.js';
import {
  BACKFILL,
  call,
  DAY,
  EVENTS,
  ev,
  ingest,
  isProblem,
  postEvents,
  REQUEST_PATH,
  workspace,
  xid,
} from './support.js';

// Idempotency-Key: the first response is replayed byte for byte for 24 hours and nothing is
// stored again; the same key with another body is 422; concurrent requests with one key store once.
t.teardown(closeDb);
const { ws, ids } = await workspace(2);
// The request path: every live request on ev.usage, where one tap sees it.
const [a, b] = await Promise.all([ingest(t, REQUEST_PATH), ingest(t, REQUEST_PATH)]);
const nc = await natsClient(t);
const live = await StreamTap.open(t, nc, `ev.usage.${ws.tenant_id}`);
const backfill = await StreamTap.open(t, nc, `ev.backfill.${ws.tenant_id}`);
const raw = (base: string, body: string, key: string, path = EVENTS) =>
  call(base, 'POST', path, { token: ws.api_key, body, headers: { 'idempotency-key': key } });

t.test('a repeated request returns the first response byte for byte and stores nothing again', async (t) => {
  const key = `key-${xid()}`;
  const body = JSON.stringify({
    events: [ev(ids[0]), ev(ids[1], { event_name: 'BAD' }), ev(ids[0], { external_id: xid() })],
  });
  const first = await raw(a.url, body, key);
  t.equal(first.status, 200);
  t.equal(first.headers.get('idempotent-replayed'), null);
  t.equal((await live.drain()).length, 1);
  for (const base of [a.url, b.url]) {
    const again = await raw(base, body, key);
    t.equal(again.status, 200);
    t.equal(again.text, first.text, 'same bytes');
    t.equal(again.headers.get('content-type'), first.headers.get('content-type'));
    t.equal(again.headers.get('idempotent-replayed'), 'true');
    t.not(again.headers.get('x-trace-id'), first.headers.get('x-trace-id'), 'each request has its own trace id');
  }
  t.equal(await live.pending(), 0, 'nothing stored by the replays');
});

t.test('the same key with a different body is 422 idempotency_key_reused', async (t) => {
  const key = `key-${xid()}`;
  t.equal((await raw(a.url, JSON.stringify({ events: [ev(ids[0])] }), key)).status, 200);
  await live.drain();
  isProblem(t, await raw(b.url, JSON.stringify({ events: [ev(ids[1])] }), key), 422, 'idempotency_key_reused');
  t.equal(await live.pending(), 0);
  isProblem(
    t,
    await raw(a.url, JSON.stringify({ events: [ev(ids[1])] }), 'bad key with spaces'),
    400,
    'validation_failed',
  );
});

t.test('after 24 hours the key is free again', async (t) => {
  const key = `key-${xid()}`;
  const body = JSON.stringify({ events: [ev(ids[0])] });
  t.equal((await raw(a.url, body, key)).status, 200);
  await db()`UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE tenant_id = ${ws.tenant_id} AND key = ${key}`;
  const later = await raw(a.url, body, key);
  t.equal(later.status, 200);
  t.equal(later.headers.get('idempotent-replayed'), null, 'processed again');
  t.equal((await live.drain()).length, 2);
});

t.test('concurrent requests with one key: one stores, the others wait and replay its answer', async (t) => {
  const key = `key-${xid()}`;
  const body = JSON.stringify({ events: Array.from({ length: 500 }, (_, i) => ev(ids[i % 2], { properties: { i } })) });
  const all = await Promise.all(Array.from({ length: 8 }, (_, i) => raw(i % 2 ? a.url : b.url, body, key)));
  for (const r of all) t.equal(r.status, 200, r.text.slice(0, 200));
  t.equal(new Set(all.map((r) => r.text)).size, 1, 'one answer');
  t.equal(all.filter((r) => r.headers.get('idempotent-replayed') === 'true').length, 7, 'seven replays');
  t.equal((await live.drain()).length, 1, 'stored once');
});

t.test('backfill replays its job id', async (t) => {
  const key = `key-${xid()}`;
  const body = JSON.stringify({ events: [ev(ids[0], { timestamp: new Date(Date.now() - 90 * DAY).toISOString() })] });
  const first = await raw(a.url, body, key, BACKFILL);
  t.equal(first.status, 202);
  const again = await raw(b.url, body, key, BACKFILL);
  t.equal(again.status, 202);
  t.equal(again.text, first.text);
  t.equal(again.headers.get('location'), `/v1/jobs/${first.body.job_id}`);
  t.equal((await backfill.drain()).length, 1);
  // A key is scoped to its endpoint: on /v1/events the same key is a new request.
  const live30 = await raw(a.url, body, key);
  t.equal(live30.status, 200);
  t.equal(live30.body.errors[0].code, 'invalid_timestamp');
});

t.test('a request without a key is never replayed', async (t) => {
  const body = [ev(ids[0])];
  await postEvents(a.url, ws.api_key, body);
  await postEvents(a.url, ws.api_key, body);
  t.equal((await live.drain()).length, 2);
});
