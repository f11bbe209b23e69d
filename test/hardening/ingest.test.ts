import t from '#tap';
import { closeDb, db, freePort } from '../helpers/stack.js';
import { call, EVENTS, BACKFILL, isProblem } from '../events/support.js';
import {
  BILLING,
  customerIds,
  expect422,
  ingest,
  natsClient,
  send,
  StreamTap,
  traceOf,
  USAGE,
  workspace,
} from '../ingest/support.js';

// Text PostgreSQL cannot hold (NUL, unpaired surrogates) and ids it would refuse are answered in
// each surface's documented shape, with X-Trace-Id, and nothing of a refused request is stored.
t.teardown(closeDb);
const ws = await workspace(2);
const tier = await ingest(t);
const base = tier.url;
const nc = await natsClient(t);
const usage = await StreamTap.open(t, nc, `ev.usage.${ws.tenant_id}`);
const billing = await StreamTap.open(t, nc, `ev.billing.${ws.tenant_id}`);
const backfill = await StreamTap.open(t, nc, `ev.backfill.${ws.tenant_id}`);
const [c1] = [...(await customerIds(ws.tenant_id)).values()];
const a = (body: string) => send(base, USAGE, body, { key: ws.ingestion_key });
const b = (body: string, path = EVENTS, headers: Record<string, string> = {}) =>
  call(base, 'POST', path, { token: ws.api_key, body, headers });

t.test('surface A: NUL or an unpaired surrogate anywhere is a 422 naming the string', async (t) => {
  const ev = (fields: string) => `{"events":[{"event_name":"x",${fields}}]}`;
  for (const [body, loc] of [
    [ev('"external_customer_id":"cust\\u0000001"'), ['events', 0, 'external_customer_id']],
    [ev('"customer_id":"\\u0000"'), ['events', 0, 'customer_id']],
    [ev(`"customer_id":"${c1}","user_id":"u\\u0000"`), ['events', 0, 'user_id']],
    [ev(`"customer_id":"${c1}","product_code":"\\ud800"`), ['events', 0, 'product_code']],
    [ev(`"customer_id":"${c1}","external_source":"s\\u0000"`), ['events', 0, 'external_source']],
    [ev(`"customer_id":"${c1}","properties":{"k\\u0000":1}`), ['events', 0, 'properties', 'k\u0000']],
    [ev(`"customer_id":"${c1}","properties":{"k":["\\udfff"]}`), ['events', 0, 'properties', 'k', 0]],
  ] as Array<[string, Array<string | number>]>) {
    expect422(t, await a(body), { type: 'string_unicode', loc: ['body', ...loc] });
  }
  const bill = await send(base, BILLING, '{"events":[{"event_type":"payment_failed","customer_id":"\\u0000"}]}', {
    key: ws.ingestion_key,
  });
  expect422(t, bill, { type: 'string_unicode', loc: ['body', 'events', 0, 'customer_id'] });
  t.equal(await usage.pending(), 0, 'no usage event stored');
  t.equal(await billing.pending(), 0, 'no billing event stored');
});

t.test('surface A billing: customer_id must be a canonical UUID (urn:uuid:…, braces, very long: 422)', async (t) => {
  for (const id of [`urn:uuid:${c1}`, `{${c1}}`, c1.replaceAll('-', ''), c1.repeat(300), '-'.repeat(36)]) {
    const r = await send(
      base,
      BILLING,
      { events: [{ event_type: 'payment_failed', customer_id: id }] },
      {
        key: ws.ingestion_key,
      },
    );
    expect422(t, r, { type: 'uuid_parsing', loc: ['body', 'events', 0, 'customer_id'] });
  }
  // A usage event names its customer per event: the same ids are a per-event rejection there.
  const r = await send(
    base,
    USAGE,
    { events: [{ event_name: 'x', customer_id: `urn:uuid:${c1}` }] },
    {
      key: ws.ingestion_key,
    },
  );
  t.equal(r.status, 202);
  traceOf(t, r);
  t.equal(r.body.errors?.[0]?.code, 'invalid_customer_id');
  t.equal(await billing.pending(), 0);
  t.equal(await usage.pending(), 0);
});

t.test('surface B: bad text inside an event rejects that event (invalid_unicode), not the batch', async (t) => {
  const events = [
    `{"customer_id":"${c1}","event_name":"a","external_id":"x\\u0000"}`,
    `{"customer_id":"${c1}","event_name":"b"}`,
    `{"customer_id":"${c1}","event_name":"c","properties":{"k":"\\ud800"}}`,
    `{"customer_id":"${c1}","event_name":"d","user_external_id":"\\u0000"}`,
  ];
  for (const [path, tap] of [
    [EVENTS, usage],
    [BACKFILL, backfill],
  ] as const) {
    const r = await b(`{"events":[${events.join(',')}]}`, path);
    t.equal(r.status, path === EVENTS ? 200 : 202, r.text.slice(0, 300));
    t.match(r.headers.get('x-trace-id') ?? '', /^[0-9a-f-]{36}$/, 'X-Trace-Id');
    t.equal(r.body.accepted, 1);
    t.same(
      r.body.errors.map((e: { index: number; code: string; message: string }) => [e.index, e.code]),
      [
        [0, 'invalid_unicode'],
        [2, 'invalid_unicode'],
        [3, 'invalid_unicode'],
      ],
    );
    t.match(r.body.errors[0].message, /^external_id /, 'the message names the field');
    t.match(r.body.errors[1].message, /^properties\.k /);
    const stored = await tap.drain();
    t.same(
      stored.flatMap((m) => m.rows.map((row) => row.event_name)),
      ['b'],
      'only the good event is stored',
    );
  }
  const dedup = await db()`SELECT count(*)::int AS n FROM event_dedup WHERE tenant_id = ${ws.tenant_id}`;
  t.equal(dedup[0].n, 0, 'no deduplication key was recorded for the rejected event');
});

t.test('surface B: bad text outside the events, or a body that is not JSON, fails the request (400)', async (t) => {
  const r = await b(`{"events":[{"customer_id":"${c1}","event_name":"a"}],"x\\u0000":1}`);
  isProblem(t, r, 400, 'validation_failed');
  t.same(
    r.body.errors.map((e: { field: string; code: string }) => [e.field, e.code]),
    [['x\\u0000', 'invalid_unicode']],
  );
  isProblem(t, await b('{"events":[{"customer_id":"\\u0000"'), 400, 'malformed_json');
  const bytes = await fetch(base + EVENTS, {
    method: 'POST',
    headers: { authorization: `Bearer ${ws.api_key}`, 'content-type': 'application/json' },
    body: Buffer.from([0x7b, 0xff, 0x7d]),
  });
  t.equal(bytes.status, 400, 'a body that is not UTF-8');
  t.match(((await bytes.json()) as { type: string }).type, /\/errors\/malformed_json$/);
  t.equal(await usage.pending(), 0, 'nothing stored');
});

t.test('surface B query: ids, date-times and cursors are checked before they reach ClickHouse', async (t) => {
  const q = (qs: string) => call(base, 'GET', `${EVENTS}?${qs}`, { token: ws.api_key });
  for (const [qs, field] of [
    [`customer_id=urn:uuid:${c1}`, 'customer_id'],
    [`customer_id=${'-'.repeat(36)}`, 'customer_id'],
    ['from=2026-02-30T10:00:00Z', 'from'],
    ['to=2026-05-01T25:61:61Z', 'to'],
    ['from=2026-05-01T10:00:00%2B99', 'from'],
    ['from=2026-05-01T10:00:00%2B16:00', 'from'],
  ]) {
    const r = await q(qs);
    isProblem(t, r, 400, 'validation_failed');
    t.equal(r.body.errors?.[0]?.field, field, `${qs} names ${field}`);
  }
  const cursor = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  for (const v of [
    [1e21, 0, c1],
    [2 ** 32, 0, c1],
    [1, 0, c1.toUpperCase()],
    [1, 0, `urn:uuid:${c1}`],
    [1, 1000, c1],
  ])
    isProblem(t, await q(`cursor=${cursor(v)}`), 400, 'invalid_cursor');
  const extremes = await q('from=0001-01-01T00:00:00Z&to=9999-12-31T23:59:59Z');
  t.equal(extremes.status, 200, `the widest range a date-time allows is answered (${extremes.text.slice(0, 200)})`);
});

t.test(
  'surface B with an Idempotency-Key: an unpaired surrogate in a property key costs that event only',
  async (t) => {
    const body = `{"events":[{"customer_id":"${c1}","event_name":"kept"},{"customer_id":"${c1}","event_name":"bad","properties":{"\\ud800":1}}]}`;
    for (const [path, tap, status] of [
      [EVENTS, usage, 200],
      [BACKFILL, backfill, 202],
    ] as const) {
      const headers = { 'idempotency-key': `surrogate-${path}` };
      const r = await b(body, path, headers);
      t.equal(r.status, status, r.text.slice(0, 300));
      t.match(r.headers.get('x-trace-id') ?? '', /^[0-9a-f-]{36}$/, 'X-Trace-Id');
      t.same(
        r.body.errors?.map((e: { index: number; code: string }) => [e.index, e.code]),
        [[1, 'invalid_unicode']],
      );
      t.match(r.body.errors?.[0]?.message, /^properties\.\\ud800 /, 'the key is named, written as its escape');
      t.same(
        (await tap.drain()).flatMap((m) => m.rows.map((row) => row.event_name)),
        ['kept'],
        'the good event is stored',
      );
      const [rec] = await db()<{ status: number }[]>`
      SELECT status FROM idempotency_keys WHERE tenant_id = ${ws.tenant_id} AND key = ${headers['idempotency-key']}`;
      t.equal(rec?.status, status, 'the answer is recorded');
      const again = await b(body, path, headers);
      t.equal(again.status, status);
      t.equal(again.headers.get('idempotent-replayed'), 'true', 'a retry is replayed');
      t.equal(again.text, r.text, 'byte for byte');
      t.equal(await tap.pending(), 0, 'and stores nothing more');
    }
  },
);

t.test('GET /v1/events while ClickHouse does not answer: 503 service_unavailable with Retry-After', async (t) => {
  const lonely = await ingest(t, { CLICKHOUSE_URL: `http://127.0.0.1:${await freePort()}` });
  const r = await call(lonely.url, 'GET', EVENTS, { token: ws.api_key });
  isProblem(t, r, 503, 'service_unavailable');
  t.match(r.headers.get('retry-after') ?? '', /^\d+$/, 'Retry-After in seconds');
  t.match(r.headers.get('x-trace-id') ?? '', /^[0-9a-f-]{36}$/, 'X-Trace-Id');
  t.equal(r.body.trace_id, r.headers.get('x-trace-id'));
});

t.test('ingest tier: unknown paths under /v1/events answer in surface B shape, others in surface A', async (t) => {
  for (const [method, path] of [
    ['POST', '/v1/events/'],
    ['POST', '//v1/events'],
    ['POST', '/v1/events/backfill/'],
    ['GET', '/v1/events/nope'],
  ]) {
    const r = await call(base, method, path, { token: ws.api_key, body: method === 'POST' ? '{}' : undefined });
    isProblem(t, r, 404, 'not_found');
    t.equal(r.body.trace_id, r.headers.get('x-trace-id'), `${method} ${path}: trace_id is X-Trace-Id`);
  }
  for (const path of ['/v1/ingest/events/', '/v1/eventsx', '/nope']) {
    const r = await call(base, 'POST', path, { body: '{}' });
    t.equal(r.status, 404);
    t.same(r.body, { detail: 'Not Found' }, `${path}: surface A's 404`);
  }
  t.equal(await usage.pending(), 0, 'nothing stored');
});
