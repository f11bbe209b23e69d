import t, { type Test } from '#tap';
import zlib from 'node:zlib';
import { closeDb } from '../helpers/stack.js';
import {
  BILLING,
  USAGE,
  batch,
  event,
  expect202,
  expect422,
  ingest,
  natsClient,
  send,
  sendRaw,
  StreamTap,
  traceOf,
  workspace,
  type Answer,
} from './support.js';

// How the request body is read: content type, encoding, size cap, JSON and Unicode validity, and
// bodies built to hurt the parser. None of these may take the server down.
t.teardown(closeDb);
const ws = await workspace(1);
const tier = await ingest(t);
const nc = await natsClient(t);
const tap = await StreamTap.open(t, nc, `ev.usage.${ws.tenant_id}`);
const MiB = 1024 * 1024;
const key = ws.ingestion_key;
const post = (body: unknown, opts: { contentType?: string | null; headers?: Record<string, string> } = {}) =>
  send(tier.url, USAGE, body, { key, ...opts });

function expect413(t: Test, res: Answer) {
  t.equal(res.status, 413, `413 (${res.text.slice(0, 200)})`);
  traceOf(t, res);
  const d = res.body?.detail;
  t.ok(
    Array.isArray(d) && d[0]?.type === 'payload_too_large',
    `detail names payload_too_large: ${res.text.slice(0, 200)}`,
  );
}

/** A valid usage body padded with JSON whitespace to exactly `size` bytes. */
function padded(size: number): Buffer {
  const json = JSON.stringify(batch(1));
  return Buffer.from(json.slice(0, -1) + ' '.repeat(size - json.length) + '}');
}

/** The server still serves ordinary requests. */
async function stillAnswers(t: Test) {
  expect202(t, await post(batch(1)), 1);
  t.equal((await tap.drain()).length, 1);
}

t.test('malformed JSON is refused with 422 json_invalid', async (t) => {
  for (const body of [
    '{"events":[',
    '{"events":[{"event_name":"x",}]}',
    "{'events':[]}",
    'events=1',
    '{"events":[]} trailing',
  ]) {
    const res = await post(body);
    t.equal(res.status, 422, body);
    traceOf(t, res);
    t.equal(res.body?.detail?.length, 1);
    const [d] = res.body?.detail ?? [];
    t.equal(d?.type, 'json_invalid');
    // loc is ["body", <character position where parsing stopped>].
    t.equal(d?.loc?.[0], 'body');
    t.equal(typeof d?.loc?.[1], 'number');
  }
  t.equal(await tap.pending(), 0);
});

t.test('an empty body is refused with 422', async (t) => {
  expect422(t, await post(''), { type: 'missing', loc: ['body'] });
});

t.test('a content type other than application/json is refused with 422 content_type_invalid', async (t) => {
  const body = JSON.stringify(batch(1));
  for (const contentType of [
    'text/plain',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/jsonp',
  ]) {
    const [d] = expect422(t, await post(body, { contentType }), {
      type: 'content_type_invalid',
      loc: ['header', 'content-type'],
    });
    t.equal(d?.input, contentType);
  }
  const [d] = expect422(t, await post(body, { contentType: null }), {
    type: 'content_type_invalid',
    loc: ['header', 'content-type'],
  });
  t.equal(d?.input, null, 'missing Content-Type');
  const billing = await send(tier.url, BILLING, body, { key, contentType: 'text/plain' });
  expect422(t, billing, { type: 'content_type_invalid', loc: ['header', 'content-type'] });
  t.equal(await tap.pending(), 0);
  for (const contentType of ['application/json; charset=utf-8', 'Application/JSON'])
    expect202(t, await post(body, { contentType }), 1);
  t.equal((await tap.drain()).length, 2);
});

/** Chunked transfer coding of `body` in 64 KiB chunks; `end` adds the terminating chunk. */
function chunked(body: Buffer, end = true): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < body.length; i += 64 * 1024) {
    const piece = body.subarray(i, i + 64 * 1024);
    out.push(Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]));
  }
  if (end) out.push(Buffer.from('0\r\n\r\n'));
  return out;
}
const head = (...extra: string[]) => [`X-API-Key: ${key}`, 'Content-Type: application/json', ...extra];

t.test('a body of exactly 1 MiB is read; a declared Content-Length one byte larger is refused with 413', async (t) => {
  expect202(t, await post(padded(MiB)), 1);
  t.equal((await tap.drain()).length, 1);
  // Refused on the declaration alone, before any of the body is sent.
  expect413(t, await sendRaw(tier.port, USAGE, head(`Content-Length: ${MiB + 1}`), []));
  expect413(t, await sendRaw(tier.port, BILLING, head(`Content-Length: ${50 * MiB}`), []));
  t.equal(await tap.pending(), 0);
  await stillAnswers(t);
});

t.test('without Content-Length (chunked), 1 MiB is read and one byte more is refused with 413', async (t) => {
  expect202(t, await sendRaw(tier.port, USAGE, head('Transfer-Encoding: chunked'), chunked(padded(MiB))), 1);
  t.equal((await tap.drain()).length, 1);
  // The sender stops right after the byte that crosses the cap and waits: the answer must come
  // from counting what arrived, with no length announced.
  const over = chunked(padded(MiB + 1), false);
  expect413(t, await sendRaw(tier.port, USAGE, head('Transfer-Encoding: chunked'), over));
  expect413(t, await sendRaw(tier.port, BILLING, head('Transfer-Encoding: chunked'), over));
  t.equal(await tap.pending(), 0);
  await stillAnswers(t);
});

t.test('a gzip body (Content-Encoding: gzip) is accepted', async (t) => {
  const res = await post(zlib.gzipSync(JSON.stringify(batch(3))), { headers: { 'content-encoding': 'gzip' } });
  expect202(t, res, 3);
  t.equal((await tap.one(t)).rows.length, 3);
});

t.test('a small gzip body that inflates beyond 1 MiB is refused with 413', async (t) => {
  // ~1 KB on the wire, 8 MiB once inflated: the cap applies after decompression too.
  const bomb = zlib.gzipSync(
    Buffer.concat([Buffer.from('{"events":[],"pad":"'), Buffer.alloc(8 * MiB, 0x61), Buffer.from('"}')]),
    { level: 9 },
  );
  t.ok(bomb.length < 64 * 1024, `bomb is small (${bomb.length} bytes)`);
  expect413(t, await post(bomb, { headers: { 'content-encoding': 'gzip' } }));
  t.equal(await tap.pending(), 0);
  await stillAnswers(t);
});

t.test('bytes that are not valid UTF-8 are refused with 422', async (t) => {
  const body = Buffer.concat([
    Buffer.from('{"events":[{"event_name":"x","external_customer_id":"cust-000001","user_id":"'),
    Buffer.from([0xc3, 0x28, 0xff]),
    Buffer.from('"}]}'),
  ]);
  expect422(t, await post(body), { type: 'json_invalid', loc: ['body'] });
  t.equal(await tap.pending(), 0);
});

t.test('a lone surrogate escape such as "\\ud800" in any string is refused with 422 naming it', async (t) => {
  const base = '{"events":[{"event_name":"x","external_customer_id":"cust-000001"';
  const at = ['body', 'events', 0];
  for (const [tail, loc] of [
    [',"user_id":"\\ud800"}]}', [...at, 'user_id']],
    [',"properties":{"k":"a\\udfffb"}}]}', [...at, 'properties', 'k']],
    [',"properties":{"\\ud800":1}}]}', [...at, 'properties', '\ud800']],
    [',"properties":{"deep":[[{"s":"\\uDBFF"}]]}}]}', [...at, 'properties', 'deep', 0, 0, 's']],
  ] as Array<[string, Array<string | number>]>) {
    expect422(t, await post(base + tail), { type: 'string_unicode', loc });
  }
  t.equal(await tap.pending(), 0);
  // A proper pair written as escapes is an ordinary character.
  expect202(t, await post(`${base},"properties":{"emoji":"\\ud83d\\ude00"}}]}`), 1);
  t.equal(JSON.parse((await tap.one(t)).rows[0].properties).emoji, '😀');
});

t.test('deeply nested properties are rejected per event, never crash the server', async (t) => {
  const nest = (depth: number, inner = '') => '['.repeat(depth) + inner + ']'.repeat(depth);
  const deep = `{"a":${nest(5000)}}`;
  t.ok(deep.length < 10_240, `5000 levels fit in ${deep.length} bytes`);
  const good = JSON.stringify(event({ event_name: 'shallow' }));
  const res = await post(
    `{"events":[{"event_name":"deep","external_customer_id":"cust-000001","properties":${deep}},${good}]}`,
  );
  const body = expect202(t, res, 1, 1);
  t.same(
    body.errors.map((e) => [e.index, e.event_name, e.code]),
    [[0, 'deep', 'invalid_properties']],
  );
  t.same(
    (await tap.one(t)).rows.map((r) => r.event_name),
    ['shallow'],
  );
  await stillAnswers(t);

  // Far deeper (100,000 levels, still under 1 MiB), combined with other failures: each answered
  // as the rule it breaks, 422 for the body, not 500.
  const abyss = nest(100_000);
  expect202(
    t,
    await post(`{"events":[{"event_name":"abyss","external_customer_id":"cust-000001","properties":{"a":${abyss}}}]}`),
    0,
    1,
  );
  expect422(t, await post(`{"events":[{"external_customer_id":"cust-000001","properties":{"a":${abyss}}}]}`), {
    type: 'missing',
    loc: ['body', 'events', 0, 'event_name'],
  });
  expect422(
    t,
    await post(`{"events":[{"event_name":"x","external_customer_id":"cust-000001","properties":${abyss}}]}`),
    { type: 'object_type', loc: ['body', 'events', 0, 'properties'] },
  );
  // The path to a string that deep is cut at 32 steps: the ancestor at that depth is named.
  expect422(
    t,
    await post(
      `{"events":[{"event_name":"x","external_customer_id":"cust-000001","properties":{"a":${nest(100_000, '"\\ud800"')}}}]}`,
    ),
    { type: 'string_unicode', loc: ['body', 'events', 0, 'properties', 'a', ...new Array(28).fill(0)] },
  );
  expect202(
    t,
    await post(
      `{"events":[{"event_name":"x","external_customer_id":"cust-000001","properties":{"a":${nest(100_000, '"\\ud83d\\ude00"')}}}]}`,
    ),
    0,
    1,
  );
  t.equal(await tap.pending(), 0);
  await stillAnswers(t);
});
