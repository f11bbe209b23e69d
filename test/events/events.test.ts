import t from '#tap';
import { closeDb } from '../helpers/stack.js';
import { natsClient, StreamTap, send } from '../ingest/support.js';
import {
  BACKFILL,
  call,
  DAY,
  EVENTS,
  ev,
  expect200,
  ingest,
  isProblem,
  postEvents,
  REQUEST_PATH,
  UUID_RE,
  workspace,
} from './support.js';

// POST /v1/events: what is accepted, what is rejected per event and why, what fails the whole
// request, and what the stream receives.
t.teardown(closeDb);
const [{ ws, ids }, other] = await Promise.all([workspace(3), workspace(1)]);
// Keyed requests publish on ev.usage (the request path): one tap sees every message.
const tier = await ingest(t, REQUEST_PATH);
const nc = await natsClient(t);
const tap = await StreamTap.open(t, nc, `ev.usage.${ws.tenant_id}`);
const post = (events: unknown[], h: Record<string, string> = {}) => postEvents(tier.url, ws.api_key, events, h);

t.test('accepted events are stored as surface-b rows in one message per request', async (t) => {
  const ts = new Date(Date.now() - 3 * DAY).toISOString();
  const res = await post([
    ev(ids[0], {
      event_name: 'report_exported',
      user_email: 'ann@acme.com',
      user_external_id: 'u-1',
      timestamp: ts,
      properties: { plan: 'pro', seats: 3 },
      external_id: 'evt-1',
    }),
    ev(ids[1].toUpperCase()),
  ]);
  expect200(t, res, 2);
  const trace = res.headers.get('x-trace-id')!;
  t.match(trace, UUID_RE);
  t.ok(res.headers.get('x-ratelimit-limit'), 'rate-limit headers');
  const msg = await tap.one(t);
  t.equal(msg.msgId, trace);
  t.equal(msg.headers['Cs-Rows'], '2');
  const [a, b] = msg.rows;
  t.match(a, {
    tenant_id: ws.tenant_id,
    customer_id: ids[0],
    event_name: 'report_exported',
    surface: 'b',
    external_id: 'evt-1',
    user_email: 'ann@acme.com',
    user_external_id: 'u-1',
    user_id: 'u-1',
    batch_id: trace,
  });
  t.equal(a.ts * 1000 + a.ts_ms, Date.parse(ts), 'timestamp kept to the millisecond');
  t.same(JSON.parse(a.properties), { plan: 'pro', seats: 3 });
  t.same(
    [a.prop_keys, a.prop_values],
    [
      ['plan', 'seats'],
      ['pro', '3'],
    ],
  );
  t.equal(b.customer_id, ids[1], 'customer_id normalized to lower case');
  t.ok(Math.abs(b.ts * 1000 + b.ts_ms - Date.now()) < 60_000, 'timestamp defaults to now');
});

t.test('every surface-B rule rejects per event with index, code and message; the request stays 200', async (t) => {
  const cases: Array<[unknown, string]> = [
    [ev('not-a-uuid'), 'unknown_customer'],
    [ev('0192f0c4-8a55-7b3e-9d1c-000000000000'), 'unknown_customer'],
    [ev(other.ids[0]), 'unknown_customer'],
    [{ event_name: 'x' }, 'invalid_customer_id'],
    [ev(ids[0], { event_name: 'NotSnake' }), 'invalid_event_name'],
    [ev(ids[0], { event_name: 'a'.repeat(65) }), 'invalid_event_name'],
    [ev(ids[0], { timestamp: '2026-01-01T00:00:00' }), 'invalid_timestamp'],
    [ev(ids[0], { timestamp: 'yesterday' }), 'invalid_timestamp'],
    [ev(ids[0], { timestamp: new Date(Date.now() - 31 * DAY).toISOString() }), 'invalid_timestamp'],
    [ev(ids[0], { timestamp: new Date(Date.now() + 3600_000).toISOString() }), 'invalid_timestamp'],
    [ev(ids[0], { properties: { blob: 'x'.repeat(10 * 1024) } }), 'properties_too_large'],
    [ev(ids[0], { properties: [1, 2] }), 'invalid_properties'],
    [ev(ids[0], { external_id: 'e'.repeat(129) }), 'invalid_external_id'],
    [ev(ids[0], { user_email: 'not-an-email' }), 'invalid_user_email'],
    ['just a string', 'invalid_event'],
    ...[
      'email_sent',
      'email_received',
      'meeting_held',
      'ticket_opened',
      'ticket_closed',
      'health_changed',
      'task_created',
      'task_completed',
    ].map((name): [unknown, string] => [ev(ids[0], { event_name: name }), 'reserved_event_name']),
  ];
  const res = await post([
    ev(ids[0], { event_name: 'ok_first', external_id: 'e'.repeat(128), event_name_len: 1 }),
    ...cases.map((c) => c[0]),
    ev(ids[2], { event_name: 'a'.repeat(64) }),
  ]);
  const errors = expect200(t, res, 2, cases.length);
  t.same(
    errors.map((e) => [e.index, e.code]),
    cases.map((c, i) => [i + 1, c[1]]),
    'each rejected event by index and code',
  );
  for (const e of errors) t.ok(e.message.length > 10, `message for ${e.code}`);
  t.same(Object.keys(errors[0]).sort(), ['code', 'index', 'message']);
  const { rows } = await tap.one(t);
  t.same(
    rows.map((r) => r.event_name),
    ['ok_first', 'a'.repeat(64)],
    'only the valid events are stored',
  );
});

t.test('a request whose events are all rejected stores nothing and still answers 200', async (t) => {
  expect200(t, await post([ev(ids[0], { event_name: 'meeting_held' })]), 0, 1);
  t.equal(await tap.pending(), 0);
});

t.test('failures of the body itself are 400 problem+json with errors[] (field, code, message)', async (t) => {
  const many = await post(Array.from({ length: 1001 }, () => ev(ids[0])));
  isProblem(t, many, 400, 'validation_failed');
  t.same(many.body.errors, [
    { field: 'events', code: 'too_many_items', message: 'events must have at most 1000 items' },
  ]);
  isProblem(t, await post([]), 400, 'validation_failed');
  isProblem(
    t,
    await call(tier.url, 'POST', EVENTS, { token: ws.api_key, body: { event: [] } }),
    400,
    'validation_failed',
  );
  isProblem(
    t,
    await call(tier.url, 'POST', EVENTS, { token: ws.api_key, body: '{"events": [' }),
    400,
    'malformed_json',
  );
  isProblem(
    t,
    await call(tier.url, 'POST', EVENTS, {
      token: ws.api_key,
      body: '{"events":[]}',
      headers: { 'content-type': 'text/plain' },
    }),
    415,
    'unsupported_media_type',
  );
  isProblem(
    t,
    await call(tier.url, 'POST', EVENTS, {
      token: ws.api_key,
      body: JSON.stringify({ events: [ev(ids[0], { properties: { p: 'x'.repeat(4 * 1024 * 1024) } })] }),
    }),
    413,
    'payload_too_large',
  );
  isProblem(t, await call(tier.url, 'DELETE', EVENTS, { token: ws.api_key }), 405, 'method_not_allowed');
  t.equal(await tap.pending(), 0, 'nothing stored');
});

t.test('1000 events in one batch are one message', async (t) => {
  const res = await post(
    Array.from({ length: 1000 }, (_, i) => ev(ids[i % 3], { external_id: `bulk-${i}`, properties: { i } })),
  );
  expect200(t, res, 1000);
  const msg = await tap.one(t);
  t.equal(msg.rows.length, 1000);
});

t.test('surface A refuses the names the service generates itself, per event', async (t) => {
  const res = await send(
    tier.url,
    '/v1/ingest/events',
    {
      events: [
        { event_name: 'health_changed', external_customer_id: 'cust-000001' },
        { event_name: 'fine', external_customer_id: 'cust-000001' },
      ],
    },
    { key: ws.ingestion_key },
  );
  t.equal(res.status, 202);
  t.same(
    res.body.errors.map((e: { index: number; code: string }) => [e.index, e.code]),
    [[0, 'reserved_event_name']],
  );
  t.equal(res.body.accepted, 1);
  await tap.one(t);
});

t.test('backfill accepts the same schema with a two-year window', async (t) => {
  const res = await postEvents(
    tier.url,
    ws.api_key,
    [
      ev(ids[0], { timestamp: new Date(Date.now() - 400 * DAY).toISOString() }),
      ev(ids[0], { timestamp: new Date(Date.now() - 740 * DAY).toISOString() }),
      ev(ids[0], { event_name: 'task_created', timestamp: new Date(Date.now() - 40 * DAY).toISOString() }),
    ],
    {},
    BACKFILL,
  );
  t.equal(res.status, 202, res.text);
  t.match(res.body, { status: 'queued', accepted: 1, rejected: 2 });
  t.same(
    res.body.errors.map((e: { index: number; code: string }) => [e.index, e.code]),
    [
      [1, 'invalid_timestamp'],
      [2, 'reserved_event_name'],
    ],
  );
  t.equal(res.headers.get('location'), `/v1/jobs/${res.body.job_id}`);
  t.equal(await tap.pending(), 0, 'backfill does not go to the live subject');
});
