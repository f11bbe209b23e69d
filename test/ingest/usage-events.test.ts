import t from '#tap';
import { randomUUID } from 'node:crypto';
import {
  ch,
  closeDb,
  seed,
  startTier,
  waitFor,
  PROPERTY_COLUMNS,
  propertiesText,
  type StoredPropertyColumns,
} from '../helpers/stack.js';
import {
  USAGE,
  UUID_RE,
  customerIds,
  event,
  expect202,
  ingest,
  natsClient,
  productIds,
  send,
  StreamTap,
  traceOf,
  workspace,
} from './support.js';

// Per-event rules of surface A: customer references, timestamps, properties, products. A bad event
// is listed in `errors` while the request stays 202; what was accepted is checked in the stream.
t.teardown(closeDb);
const [ws, other] = await Promise.all([workspace(3, ['--products', '2']), workspace(1)]);
// The same external ids in a second source: each source keeps its own id space.
await seed(ws.tenant_id, 1, ['--source', 'crm']);
const internal = await customerIds(ws.tenant_id);
const crm = await customerIds(ws.tenant_id, 'crm');
const foreign = (await customerIds(other.tenant_id)).get('cust-000001')!;
const products = await productIds(ws.tenant_id);
const tier = await ingest(t);
const nc = await natsClient(t);
const tap = await StreamTap.open(t, nc, `ev.usage.${ws.tenant_id}`);
const post = (events: unknown[]) => send(tier.url, USAGE, { events }, { key: ws.ingestion_key });
const DAY = 24 * 3600_000;

t.test(
  "an accepted event is stored stamped with tenant, resolved customer, event id and the request's trace id",
  async (t) => {
    const res = await post([
      event({
        event_name: 'report_exported',
        external_customer_id: 'cust-000002',
        user_id: 'u-7',
        properties: { plan: 'pro', seats: 3 },
      }),
    ]);
    expect202(t, res, 1);
    t.equal(res.body.message, '1 events accepted');
    const trace = traceOf(t, res);
    const msg = await tap.one(t);
    t.equal(msg.msgId, trace, 'one message per request, identified by the trace id');
    t.equal(msg.headers['Cs-Rows'], '1');
    t.equal(msg.headers['Cs-Names'], 'report_exported');
    const [row] = msg.rows;
    t.equal(row.tenant_id, ws.tenant_id);
    t.equal(row.customer_id, internal.get('cust-000002'), 'customer_id resolved from the external id');
    t.equal(row.external_customer_id, 'cust-000002');
    t.equal(row.external_source, 'internal', 'external_source defaults to internal');
    t.match(row.event_id, UUID_RE);
    t.equal(row.batch_id, trace, 'batch_id is the X-Trace-Id of the response');
    t.equal(row.user_id, 'u-7');
    t.same(JSON.parse(row.properties), { plan: 'pro', seats: 3 });
    t.same(row.prop_keys, ['plan', 'seats']);
    t.same(row.prop_values, ['pro', '3']);
  },
);

t.test('external_source selects its own id space', async (t) => {
  t.not(crm.get('cust-000001'), internal.get('cust-000001'), 'two customers share the external id in two sources');
  const res = await post([
    event({ external_customer_id: 'cust-000001', external_source: 'crm' }),
    event({ external_customer_id: 'cust-000001' }),
    event({ event_name: 'crm_only', external_customer_id: 'cust-000002', external_source: 'crm' }),
    event({ external_customer_id: 'cust-000001', external_source: 'billing_system' }),
  ]);
  const body = expect202(t, res, 2, 2);
  t.same(
    body.errors.map((e) => [e.index, e.event_name, e.code]),
    [
      [2, 'crm_only', 'unknown_external_customer'],
      [3, 'feature_used', 'unknown_external_customer'],
    ],
  );
  const { rows } = await tap.one(t);
  t.same(
    rows.map((r) => [r.customer_id, r.external_source]),
    [
      [crm.get('cust-000001'), 'crm'],
      [internal.get('cust-000001'), 'internal'],
    ],
  );
});

t.test('customer_id wins over external_customer_id', async (t) => {
  const good = internal.get('cust-000003')!;
  // A bad external id next to a good customer_id is accepted: the external id is not consulted.
  const res = await post([
    event({ customer_id: good, external_customer_id: 'no-such-customer' }),
    event({ event_name: 'upper', customer_id: good.toUpperCase() }),
    event({ event_name: 'bad_uuid_wins', customer_id: randomUUID(), external_customer_id: 'cust-000001' }),
  ]);
  const body = expect202(t, res, 2, 1);
  t.same(
    body.errors.map((e) => [e.index, e.code]),
    [[2, 'unknown_customer']],
    'an unknown customer_id is not rescued by a good external id',
  );
  const { rows } = await tap.one(t);
  t.same(
    rows.map((r) => r.customer_id),
    [good, good],
  );
});

t.test('one bad event does not fail the batch: per-event errors with index, event_name, code, message', async (t) => {
  const res = await post([
    event({ event_name: 'ok_first' }),
    event({ event_name: 'not_uuid', customer_id: 'cust-000001' }),
    event({ event_name: 'nobody', customer_id: randomUUID() }),
    event({ event_name: 'other_workspace', customer_id: foreign }),
    event({ event_name: 'unknown_ext', external_customer_id: 'cust-999999' }),
    event({ event_name: 'ok_last', customer_id: internal.get('cust-000002') }),
  ]);
  const body = expect202(t, res, 2, 4);
  t.equal(body.message, '2 events accepted, 4 rejected');
  t.same(
    body.errors.map((e) => ({ index: e.index, event_name: e.event_name, code: e.code })),
    [
      { index: 1, event_name: 'not_uuid', code: 'invalid_customer_id' },
      { index: 2, event_name: 'nobody', code: 'unknown_customer' },
      { index: 3, event_name: 'other_workspace', code: 'unknown_customer' },
      { index: 4, event_name: 'unknown_ext', code: 'unknown_external_customer' },
    ],
  );
  for (const e of body.errors) t.ok(typeof e.message === 'string' && e.message.length > 0, `${e.code}: message`);
  const msg = await tap.one(t);
  t.equal(msg.headers['Cs-Rows'], '2');
  t.same(msg.headers['Cs-Names'].split(',').sort(), ['ok_first', 'ok_last']);
  t.same(
    msg.rows.map((r) => [r.event_name, r.customer_id]),
    [
      ['ok_first', internal.get('cust-000001')],
      ['ok_last', internal.get('cust-000002')],
    ],
  );
});

t.test('a customer of another workspace is unknown, and nothing reaches that workspace', async (t) => {
  const tapOther = await StreamTap.open(t, nc, `ev.usage.${other.tenant_id}`);
  const body = expect202(t, await post([event({ customer_id: foreign })]), 0, 1);
  t.equal(body.errors[0].code, 'unknown_customer');
  t.equal(await tapOther.pending(), 0);
  t.equal(await tap.pending(), 0, 'a request with no accepted event stores nothing');
});

t.test('an omitted timestamp defaults to the time of receipt', async (t) => {
  const before = Math.floor(Date.now() / 1000);
  expect202(t, await post([event()]), 1);
  const after = Math.ceil(Date.now() / 1000);
  const [row] = (await tap.one(t)).rows;
  t.ok(row.ts >= before && row.ts <= after, `ts ${row.ts} within [${before}, ${after}]`);
});

t.test('a timestamp exactly 30 days old is accepted as sent', async (t) => {
  const at = Date.now() - 30 * DAY;
  expect202(t, await post([event({ timestamp: new Date(at).toISOString() })]), 1);
  const [row] = (await tap.one(t)).rows;
  t.equal(row.ts, Math.floor(at / 1000));
  t.equal(row.ts_ms, at % 1000);
});

t.test('a timestamp more than 30 days old is rejected per event with invalid_timestamp', async (t) => {
  const res = await post([
    event({ event_name: 'days_31', timestamp: new Date(Date.now() - 31 * DAY).toISOString() }),
    // Beyond the server's 60 s allowance for clock skew.
    event({ event_name: 'days_30_and_2_min', timestamp: new Date(Date.now() - 30 * DAY - 120_000).toISOString() }),
    event({ event_name: 'year_2020', timestamp: '2020-01-01T00:00:00Z' }),
    event({ event_name: 'fine' }),
  ]);
  const body = expect202(t, res, 1, 3);
  t.same(
    body.errors.map((e) => [e.index, e.event_name, e.code]),
    [
      [0, 'days_31', 'invalid_timestamp'],
      [1, 'days_30_and_2_min', 'invalid_timestamp'],
      [2, 'year_2020', 'invalid_timestamp'],
    ],
  );
  t.same(
    (await tap.one(t)).rows.map((r) => r.event_name),
    ['fine'],
  );
});

t.test('a timestamp far in the future is rejected per event with invalid_timestamp', async (t) => {
  const res = await post([
    event({ event_name: 'tomorrow', timestamp: new Date(Date.now() + DAY).toISOString() }),
    event({ event_name: 'next_century', timestamp: '2100-01-01T00:00:00+00:00' }),
  ]);
  const body = expect202(t, res, 0, 2);
  t.same(
    body.errors.map((e) => [e.index, e.code]),
    [
      [0, 'invalid_timestamp'],
      [1, 'invalid_timestamp'],
    ],
  );
  t.equal(await tap.pending(), 0);
});

/** Properties whose JSON serialization is exactly `bytes` bytes: {"p":"<filler>"} plus `tail`. */
function propertiesOf(bytes: number, unit = 'x', tail = '') {
  const room = bytes - '{"p":""}'.length - Buffer.byteLength(tail);
  const each = Buffer.byteLength(unit);
  return { p: unit.repeat(Math.floor(room / each)) + tail + 'x'.repeat(room % each) };
}

t.test('properties of exactly 10,240 bytes are accepted, 10,241 are rejected with properties_too_large', async (t) => {
  const atLimit = propertiesOf(10_240);
  const over = propertiesOf(10_241);
  // Multi-byte characters count by their UTF-8 bytes, not by characters.
  const wideAtLimit = propertiesOf(10_240, 'é');
  const wideOver = propertiesOf(10_241, 'é');
  t.equal(Buffer.byteLength(JSON.stringify(atLimit)), 10_240);
  t.equal(Buffer.byteLength(JSON.stringify(wideOver)), 10_241);
  t.ok(JSON.stringify(wideOver).length < 10_240, 'fewer characters than the limit');
  const res = await post([
    event({ event_name: 'at_limit', properties: atLimit }),
    event({ event_name: 'over', properties: over }),
    event({ event_name: 'wide_at_limit', properties: wideAtLimit }),
    event({ event_name: 'wide_over', properties: wideOver }),
  ]);
  const body = expect202(t, res, 2, 2);
  t.same(
    body.errors.map((e) => [e.index, e.event_name, e.code]),
    [
      [1, 'over', 'properties_too_large'],
      [3, 'wide_over', 'properties_too_large'],
    ],
  );
  const { rows } = await tap.one(t);
  t.same(
    rows.map((r) => r.event_name),
    ['at_limit', 'wide_at_limit'],
  );
  t.equal(rows[0].properties, JSON.stringify(atLimit), 'stored as sent');
  t.equal(rows[1].properties, JSON.stringify(wideAtLimit));
});

t.test('a __proto__ key inside properties is stored faithfully and pollutes nothing', async (t) => {
  const processors = await startTier(t, 'processors', { PROCESSORS_THREADS: '1' });
  t.teardown(() => processors.stop('SIGTERM'));
  // Sent as raw text: JSON.parse makes "__proto__" an own key, as the server sees it.
  const raw = `{"events":[{"event_name":"proto_probe","external_customer_id":"cust-000001","properties":{"__proto__":{"polluted":"yes"},"plan":"pro"}}]}`;
  const res = await send(tier.url, USAGE, raw, { key: ws.ingestion_key });
  expect202(t, res, 1);
  const trace = traceOf(t, res);
  const [row] = (await tap.one(t)).rows;
  t.equal(row.properties, '{"__proto__":{"polluted":"yes"},"plan":"pro"}');
  t.same(row.prop_keys, ['__proto__', 'plan']);
  t.same(row.prop_values, ['{"polluted":"yes"}', 'pro']);
  // Had the server's Object.prototype been polluted, every later object would inherit the key.
  expect202(t, await post([event({ event_name: 'after_proto', properties: { only: 1 } })]), 1);
  const [next] = (await tap.one(t)).rows;
  t.same(next.prop_keys, ['only'], 'no inherited key shows up in later events');
  t.equal(next.properties, '{"only":1}');
  const stored = await waitFor(
    'the event in ClickHouse',
    async () => {
      const rows = await ch<StoredPropertyColumns>(
        `SELECT ${PROPERTY_COLUMNS} FROM events WHERE tenant_id = '${ws.tenant_id}' AND batch_id = '${trace}'`,
      );
      return rows.length > 0 ? rows : undefined;
    },
    60_000,
    250,
  );
  t.equal(stored.length, 1);
  t.equal(propertiesText(stored[0]), '{"__proto__":{"polluted":"yes"},"plan":"pro"}');
  t.same(stored[0].prop_keys, ['__proto__', 'plan']);
});

t.test('product_id wins over product_code; an unknown product is stored as account-level', async (t) => {
  const p1 = products.get('P0001')!;
  const p2 = products.get('P0002')!;
  const res = await post([
    event({ event_name: 'by_code', product_code: 'P0001' }),
    event({ event_name: 'by_id', product_id: p2 }),
    event({ event_name: 'both', product_id: p2, product_code: 'P0001' }),
    event({ event_name: 'unknown_code', product_code: 'P9999' }),
    event({ event_name: 'unknown_id', product_id: randomUUID() }),
    event({ event_name: 'account_level' }),
  ]);
  expect202(t, res, 6);
  const { rows } = await tap.one(t);
  t.same(
    rows.map((r) => [r.event_name, r.product_id]),
    [
      ['by_code', p1],
      ['by_id', p2],
      ['both', p2],
      ['unknown_code', ''],
      ['unknown_id', ''],
      ['account_level', ''],
    ],
  );
});
