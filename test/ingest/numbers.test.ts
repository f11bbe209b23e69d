import t from '#tap';
import { closeDb } from '../helpers/stack.js';
import { call, EVENTS, expect200, ingest as ingestB, workspace as workspaceB } from '../events/support.js';
import {
  type Asserts,
  BILLING,
  USAGE,
  customerIds,
  expect202,
  expect422,
  ingest as ingestA,
  natsClient,
  send,
  StreamTap,
  workspace,
} from './support.js';

// A number is stored as the 64-bit float JSON.parse makes of it. Where that float has another value
// than the text the producer wrote (beyond ±1.8e308, a non-zero below 5e-324, more significant digits
// than a float holds), the event is refused with `invalid_number` naming the property; every other
// number is stored with its value, on both surfaces, whether the body is read from its bytes or parsed.
t.teardown(closeDb);

/** Events whose properties a float cannot keep: [properties as written, the field the error names]. */
const LOSSY: Array<[string, string]> = [
  ['{"big":1E400,"ok":1.5,"name":"kept?"}', 'properties.big'],
  ['{"nested":{"big":1E400}}', 'properties.nested.big'],
  ['{"tiny":1e-400}', 'properties.tiny'],
  ['{"id":123456789012345678901}', 'properties.id'],
  ['{"list":[1,2,{"x":9007199254740993}]}', 'properties.list[2].x'],
  ['{"neg":-1.7976931348623159e308}', 'properties.neg'],
  ['{"long":0.12345678901234567890}', 'properties.long'],
  ['{"pow":1152921504606846976}', 'properties.pow'],
];

/** Numbers written otherwise than JSON.stringify writes them, each with the value a float holds exactly. */
const EXACT = [
  '{"a":1.50,"b":1E2,"c":-0,"d":9007199254740994,"e":0.1,"f":[1.0,2e0,-0.0],"g":9007199254740992}',
  '{"h":{"i":1.7976931348623157e308,"j":5e-324,"k":100000000000000000000000},"l":0.000001000}',
];
const EXACT_STORED = [
  '{"a":1.5,"b":100,"c":0,"d":9007199254740994,"e":0.1,"f":[1,2,0],"g":9007199254740992}',
  '{"h":{"i":1.7976931348623157e+308,"j":5e-324,"k":1e+23},"l":0.000001}',
];

/** A body of events with `reference` and the properties above, in order: LOSSY, EXACT, then one plain event. */
function body(reference: string, general: boolean): string {
  const events = [...LOSSY.map(([p]) => p), ...EXACT, '{"n":3}'].map(
    (p, i) => `{"event_name":"num_${i}",${reference},"properties":${p}}`,
  );
  // A \u escape is outside what the byte scanner reads (lib/json-scan.ts): the body is then parsed.
  if (general) events.push(`{"event_name":"escaped",${reference},"properties":{"s":"caf\\u00e9"}}`);
  return `{"events":[${events.join(',')}]}`;
}

function checkErrors(t: Asserts, errors: Array<{ index: number; code: string; message: string }>): void {
  t.same(
    errors.map((e) => [e.index, e.code]),
    LOSSY.map((_, i) => [i, 'invalid_number']),
    'each lossy event refused as invalid_number',
  );
  for (const [i, [, field]] of LOSSY.entries())
    t.ok(errors[i].message.startsWith(`${field} is `), `the message names ${field}: ${errors[i].message}`);
}

function checkStored(t: Asserts, rows: Array<{ event_name: string; properties: string }>, general: boolean): void {
  const names = [...EXACT.map((_, i) => `num_${LOSSY.length + i}`), `num_${LOSSY.length + EXACT.length}`];
  if (general) names.push('escaped');
  t.same(
    rows.map((r) => r.event_name),
    names,
    'only the exact events are stored',
  );
  t.same(
    rows.slice(0, EXACT.length).map((r) => r.properties),
    EXACT_STORED,
    'each number stored with the value written',
  );
  t.equal(rows[EXACT.length].properties, '{"n":3}');
}

t.test('surface A: an event with a number a float cannot keep is refused alone, naming the property', async (t) => {
  const ws = await workspace(1);
  const tier = await ingestA(t);
  const tap = await StreamTap.open(t, await natsClient(t), `ev.usage.${ws.tenant_id}`);
  for (const general of [false, true]) {
    const res = await send(tier.url, USAGE, body('"external_customer_id":"cust-000001"', general), {
      key: ws.ingestion_key,
    });
    const kept = EXACT.length + 1 + (general ? 1 : 0);
    const answer = expect202(t, res, kept, LOSSY.length);
    checkErrors(t, answer.errors);
    checkStored(t, (await tap.one(t)).rows, general);
  }
});

t.test('surface A billing: an amount a float cannot keep fails the batch with 422 invalid_number', async (t) => {
  const ws = await workspace(1);
  const id = (await customerIds(ws.tenant_id)).get('cust-000001')!;
  const tier = await ingestA(t);
  const tap = await StreamTap.open(t, await natsClient(t), `ev.billing.${ws.tenant_id}`);
  const billing = (amount: string) =>
    send(
      tier.url,
      BILLING,
      `{"events":[{"event_type":"payment_failed","customer_id":"${id}","amount":12.50},` +
        `{"event_type":"payment_failed","customer_id":"${id}","amount":${amount}}]}`,
      { key: ws.ingestion_key },
    );
  for (const amount of ['1E400', '1e-400', '12345678901234567.89']) {
    const [detail] = expect422(t, await billing(amount), {
      type: 'invalid_number',
      loc: ['body', 'events', 1, 'amount'],
    });
    t.equal(detail.input, amount, 'the input as written');
  }
  t.equal(await tap.pending(), 0, 'nothing stored');
  const ok = await billing('1.0E2');
  t.equal(ok.status, 202, ok.text);
  t.same(
    (await tap.one(t)).rows.map((r) => r.amount),
    [12.5, 100],
  );
});

t.test('surface B: an event with a number a float cannot keep is refused alone, naming the property', async (t) => {
  const { ws, ids } = await workspaceB(1);
  const tier = await ingestB(t);
  const tap = await StreamTap.open(t, await natsClient(t), `ev.usage.${ws.tenant_id}`);
  for (const general of [false, true]) {
    const res = await call(tier.url, 'POST', EVENTS, {
      token: ws.api_key,
      body: body(`"customer_id":"${ids[0]}"`, general),
    });
    const kept = EXACT.length + 1 + (general ? 1 : 0);
    checkErrors(t, expect200(t, res, kept, LOSSY.length));
    checkStored(t, (await tap.one(t)).rows, general);
  }
});
