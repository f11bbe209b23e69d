import t, { type Test } from '#tap';
import { Workload } from '../../bench/workload.js';
import { isRejection, rowStamp, storedProperties, writeEventRow } from '../../ingest/event-rules.js';
import { type IncomingUsage, scanUsage } from '../../ingest/surface-a/usage.js';
import { BatchScanner } from '../../ingest/scan.js';
import { scanEvents } from '../../ingest/surface-b/events.js';
import { decodeJson } from '../../lib/json.js';
import { decodeRows, EVENT_ROW_COLUMNS, RowBinaryWriter, uuidWire } from '../../lib/row-binary.js';
import { compile } from '../../schemas/ajv.js';
import { isDateTime } from '../../schemas/formats.js';
import { UsageBatchB } from '../../schemas/events.js';
import { UsageBatchA } from '../../schemas/ingest.js';

/**
 * Both surfaces read a batch straight from its bytes when they can (ingest/scan.ts).
 * Whenever one does, the events and their stored rows must be exactly those of the general path
 * (JSON.parse, the schema, splitProperties); whenever it cannot, the general path runs. These
 * tests hold the scanner to that on chosen edge cases, the benchmark's workload and random
 * documents.
 */

const batch = compile(UsageBatchA);
const CUSTOMER = '0190a000-0000-7000-8000-000000000003';
const stamp = rowStamp({
  tenantId: '0190a000-0000-7000-8000-000000000001',
  batchId: '0190a000-0000-7000-8000-000000000002',
  now: 1_700_000_000_000,
  surface: 'a',
});

type Check = (value: unknown) => boolean;

/** The general path: the events a valid body holds, or undefined where it answers an error. */
function general(body: Buffer, check: Check = batch.check): IncomingUsage[] | undefined {
  const d = decodeJson(body);
  if (!d.ok || !check(d.value)) return undefined;
  return (d.value as { events: IncomingUsage[] }).events;
}

/** What an event becomes: its fields and its stored row (or the properties' rejection). */
function outcome(e: IncomingUsage): unknown {
  const props = storedProperties(e.properties);
  const fields = {
    ...e,
    properties: undefined,
    external_source: e.external_source ?? 'internal',
    // The scanner reads the timestamp into unix ms as the rules would.
    timestamp: typeof e.timestamp === 'string' ? Date.parse(e.timestamp) : e.timestamp,
  };
  if (isRejection(props)) return { fields, rejected: props.code };
  const w = new RowBinaryWriter(64);
  writeEventRow(w, stamp, {
    customer: uuidWire(CUSTOMER),
    customerAt: 0,
    eventName: e.event_name,
    ts: 1_700_000_000_000,
    externalCustomerId: e.external_customer_id ?? '',
    externalSource: e.external_source ?? 'internal',
    userId: e.user_id ?? '',
    productId: e.product_id ?? '',
    productCode: e.product_code ?? '',
    externalId: '',
    userEmail: '',
    userExternalId: '',
    props,
  });
  const [row] = decodeRows(w.take(), EVENT_ROW_COLUMNS);
  return { fields, row: { ...row, event_id: '' } };
}

/** Scans `body`; when the scanner takes it, its result must be the general path's. Returns whether it scanned. */
function agree(
  t: Test,
  body: string | Buffer,
  what: string,
  scan: (b: Buffer) => unknown[] | undefined = scanUsage,
  check?: Check,
): boolean {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  const scanned = scan(bytes) as IncomingUsage[] | undefined;
  if (scanned === undefined) return false;
  const reference = general(bytes, check);
  if (reference === undefined) {
    t.fail(`${what}: scanned a body the general path refuses`, { body: bytes.toString() });
    return true;
  }
  t.same(scanned.map(outcome), reference.map(outcome), what);
  return true;
}

const one = (event: string) => `{"events":[${event}]}`;
const withProps = (props: string) => one(`{"event_name":"login","customer_id":"${CUSTOMER}","properties":${props}}`);

t.test('bodies as clients send them are scanned, and stored as the general path stores them', async (t) => {
  const cases: Record<string, string> = {
    'no properties': one(`{"event_name":"login","customer_id":"${CUSTOMER}"}`),
    'every field': one(
      `{"event_name":"feature_used_2","external_customer_id":"acme-1","external_source":"crm","user_id":"u-7","product_id":"0190A000-0000-7000-8000-00000000000F","product_code":"core","timestamp":"2026-11-20T10:00:00.123+01:00","properties":{"a":1}}`,
    ),
    'whitespace between tokens': ` { "events" : [ { "event_name" : "login" , "customer_id" : "${CUSTOMER}" , "properties" : { "plan" : "pro" , "n" : 3 } } ] } \n`,
    'empty properties': withProps('{}'),
    'scalar kinds': withProps('{"s":"x","i":-12,"f":0.5,"e":1.5e-7,"t":true,"f2":false,"n":null,"z":0}'),
    'escapes in a string value': withProps('{"note":"line\\nnext \\"quoted\\" back\\\\slash\\ttab\\b\\f\\r"}'),
    'non-ASCII text': withProps('{"name":"Zoë ✓ 𝄞","emoji":["😀",{"k":"ü"}]}'),
    'nested values as JSON.stringify writes them': withProps(
      '{"browser":{"name":"firefox","version":"120.0"},"tags":["a","b"],"deep":[[[{"x":[1,2,{"y":null}]}]]],"e":[],"o":{}}',
    ),
    'nested values written otherwise': withProps(
      '{"a":{ "x" : 1 },"b":[1.0, 2e2, -0],"c":{"k":1,"k":2},"d":{"b":1,"2":2,"a":3},"e":{"s":"x\\"y"}}',
    ),
    'a __proto__ property': withProps('{"__proto__":{"x":1},"y":2}'),
    'large integers and decimals': withProps(
      '{"a":123456789012345,"b":[9007199254740994,1e+21,0.30000000000000004,1.50],"c":0.1,"d":-1.25}',
    ),
    'several events': `{"events":[${Array.from({ length: 100 }, (_, i) => `{"event_name":"e_${i}","customer_id":"${CUSTOMER}","properties":{"i":${i}}}`).join(',')}]}`,
    // More spans than a request's first span list holds, and more nested keys than its first key list.
    'many keys in every event': `{"events":[${Array.from({ length: 50 }, (_, i) => `{"event_name":"e","customer_id":"${CUSTOMER}","properties":{${Array.from({ length: 40 }, (_, k) => `"k${k}":${i * k}`).join(',')}}}`).join(',')}]}`,
    'many keys nested': withProps(
      `{"a":{${Array.from({ length: 100 }, (_, k) => `"n${k}":{"x":${k},"y":[${k}]}`).join(',')},"n3":0},"b":{${Array.from({ length: 100 }, (_, k) => `"n${k}":${k}`).join(',')}}}`,
    ),
    'customer id not a UUID (a per-event error later)': one('{"event_name":"login","customer_id":"nope"}'),
    'an event without a customer (rule 1, later)': one('{"event_name":"login"}'),
  };
  for (const [what, body] of Object.entries(cases)) t.ok(agree(t, body, what), `${what}: scanned`);
});

t.test('the 10 KB limit on properties is measured as the general path measures it', async (t) => {
  // {"note":"…"} is 11 bytes around the text; a 2-byte character counts twice, an escape as written.
  for (const [pad, ch] of [
    ['x', 1],
    ['é', 2],
    ['\\n', 2],
  ] as const) {
    for (const total of [10_239, 10_240, 10_241]) {
      const n = Math.floor((total - 11) / ch);
      const rest = total - 11 - n * ch;
      const body = withProps(`{"note":"${pad.repeat(n)}${'x'.repeat(rest)}"}`);
      t.ok(agree(t, body, `${total} bytes with ${pad}`), `${total} bytes with ${pad}: scanned`);
    }
  }
  const nested = withProps(`{"a":{ "note" : "${'x'.repeat(10_220)}" }}`);
  t.ok(agree(t, nested, 'a rewritten nested value near the limit'));
});

t.test('bodies the scanner leaves to the general path', async (t) => {
  const cases: Record<string, string> = {
    'a \\u escape': withProps('{"a":"\\u0041"}'),
    'a NUL escape': withProps('{"a":"\\u0000"}'),
    'a \\/ escape': withProps('{"a":"a\\/b"}'),
    'an escaped key': withProps('{"\\"a":1}'),
    'a repeated property key': withProps('{"a":1,"a":2}'),
    'an index key': withProps('{"b":1,"7":2}'),
    'a number not as JSON.stringify writes it': withProps('{"a":1.0}'),
    'an integer past 15 digits that does not print back': withProps('{"a":1234567890123456789}'),
    'minus zero': withProps('{"a":-0}'),
    'a nested integer a float does not keep': withProps('{"a":[1234567890123456789]}'),
    'a nested number beyond a float': withProps('{"a":{"b":1E400}}'),
    'a nested number below a float, as a decimal': withProps(`{"a":[0.${'0'.repeat(400)}1]}`),
    'a nested decimal of more digits than a float keeps': withProps('{"a":{"b":0.12345678901234567890}}'),
    'properties not an object': withProps('[1]'),
    'properties null': withProps('null'),
    'nesting past the limit': withProps(`${'['.repeat(70)}${']'.repeat(70)}`),
    'an unknown event field': one(`{"event_name":"login","customer_id":"${CUSTOMER}","extra":1}`),
    'a repeated event field': one(`{"event_name":"login","event_name":"other","customer_id":"${CUSTOMER}"}`),
    'an event name not in snake_case': one(`{"event_name":"Login","customer_id":"${CUSTOMER}"}`),
    'a trailing underscore': one(`{"event_name":"login_","customer_id":"${CUSTOMER}"}`),
    'a double underscore': one(`{"event_name":"a__b","customer_id":"${CUSTOMER}"}`),
    'an event name too long': one(`{"event_name":"${'a'.repeat(256)}","customer_id":"${CUSTOMER}"}`),
    'an empty external id': one('{"event_name":"login","external_customer_id":""}'),
    'a bad product id': one('{"event_name":"login","customer_id":"x","product_id":"nope"}'),
    'a bad timestamp': one('{"event_name":"login","customer_id":"x","timestamp":"2026-11-20"}'),
    'a number where a string goes': one('{"event_name":"login","customer_id":7}'),
    'no events': '{"events":[]}',
    'another top-level key': `{"events":[{"event_name":"login","customer_id":"x"}],"x":1}`,
    '101 events': `{"events":[${Array(101).fill('{"event_name":"a","customer_id":"x"}').join(',')}]}`,
    'trailing text': `${one('{"event_name":"login","customer_id":"x"}')}x`,
    'a raw control character': withProps('{"a":"x\ty"}'),
    'not UTF-8': '',
  };
  for (const [what, body] of Object.entries(cases)) {
    const bytes =
      what === 'not UTF-8'
        ? Buffer.from([...Buffer.from(withProps('{"a":"')), 0xff, 0x22, 0x7d, 0x7d, 0x5d, 0x7d])
        : Buffer.from(body);
    t.equal(scanUsage(bytes), undefined, what);
  }
});

t.test('string content is skimmed a word at a time: every place of a quote, an escape or a control byte', async (t) => {
  // The scanner reads a string's bytes four at a time from any place of the body: a stop (end
  // quote, backslash, control byte) must be found at every offset of the body in its buffer, every
  // length and every place within a word, non-ASCII bytes beside it. A text field's string is made
  // as UTF-8 when the skim saw a non-ASCII byte, else as Latin-1: in a user_id, every place of one
  // must be seen (escapes there are left to the general path).
  const specials: Array<[string, string]> = [
    ['an escaped quote', '\\"'],
    ['an escaped backslash', '\\\\'],
    ['a newline escape', '\\n'],
    ['a raw control byte', '\u0001'],
    ['a raw tab', '\t'],
    ['a non-ASCII letter', 'é'],
    ['nothing', ''],
  ];
  let scanned = 0;
  let refused = 0;
  let userIds = 0;
  for (const [name, special] of specials)
    for (let length = 0; length <= 12; length++)
      for (let at = 0; at <= length; at++) {
        const text = 'x'.repeat(at) + special + 'y'.repeat(length - at);
        const body = Buffer.from(withProps(`{"note":"${text}","after":"z"}`));
        const userId = Buffer.from(
          one(`{"event_name":"login","customer_id":"${CUSTOMER}","user_id":"u${text}","properties":{}}`),
        );
        for (let offset = 0; offset < 4; offset++) {
          const place = (b: Buffer) => {
            const memory = Buffer.alloc(b.length + offset + 4, 0x20);
            b.copy(memory, offset);
            return memory.subarray(offset, offset + b.length);
          };
          if (agree(t, place(body), `${name} at ${at} of ${length}, body at offset ${offset}`)) scanned++;
          else refused++;
          if (agree(t, place(userId), `${name} at ${at} of ${length} in user_id, body at offset ${offset}`)) userIds++;
        }
      }
  // 91 places (length 0 to 12, each place in it) at 4 offsets for each special. A raw control byte
  // is JSON that neither path takes; everything else scans.
  t.equal(scanned, 5 * 4 * 91, `${scanned} scanned`);
  t.equal(refused, 2 * 4 * 91, `${refused} left to the general path: the raw control bytes`);
  t.equal(userIds, 2 * 4 * 91, `${userIds} user_ids scanned: those with a non-ASCII letter or nothing special`);
});

t.test('timestamps are read as the date-time format and Date.parse read them', async (t) => {
  let seed = 9;
  const rnd = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)];
  const digits = (n: number, max: number) => String(Math.floor(rnd() * (max + 1))).padStart(n, '0');
  let scanned = 0;
  for (let i = 0; i < 3000; i++) {
    const date = `${pick(['0001', '1969', '1970', '2000', '2024', '2026', '2100', '9999', '0000', '19x0'])}-${digits(2, 13)}-${digits(2, 31)}`;
    const time = `${digits(2, 24)}:${digits(2, 60)}:${digits(2, 60)}`;
    const fraction = pick(['', '', '.1', '.12', '.123', '.1239', '.123456789', '.1234567890', '.']);
    const zone = pick(['Z', 'z', '+00:00', '-15:59', '+16:00', '+05:30', '-03:60', '+0530', '', ' Z']);
    const ts = `${date}${pick(['T', 't', ' ', 'x'])}${time}${fraction}${zone}`;
    const valid = isDateTime(ts);
    const [e] = scanUsage(Buffer.from(one(`{"event_name":"a","customer_id":"x","timestamp":"${ts}"}`))) ?? [];
    if (e === undefined) t.notOk(valid, `${ts} is left to the general path only when the format refuses it`);
    else {
      scanned++;
      t.ok(valid, `${ts} scans only when the format takes it`);
      t.equal(e.timestamp, Date.parse(ts), `${ts} read as Date.parse reads it`);
    }
  }
  t.ok(scanned > 300, `many scanned (${scanned})`);
});

t.test('no prefix of a body scans (every cut is invalid JSON)', async (t) => {
  const body = withProps('{"s":"a\\nb","n":-1.5,"m":[-1.5e3],"o":{"x":[true,false,null]},"t":"é"}');
  let scanned = 0;
  for (let i = 0; i < body.length - 1; i++) if (scanUsage(Buffer.from(body.slice(0, i))) !== undefined) scanned++;
  t.equal(scanned, 0);
  t.ok(scanUsage(Buffer.from(body)));
});

t.test("the benchmark's bodies are all scanned, as the general path stores them", async (t) => {
  const w = new Workload(
    [
      {
        tenantId: stamp.tenantId,
        key: 'k',
        customers: [[CUSTOMER, 'ext-1']],
        products: [['0190a000-0000-7000-8000-00000000000f', 'core']],
      },
    ],
    { bodiesPerTenant: 20, eventsPerBody: 100, seed: 7, customerIdShare: 0.2, now: Date.now() },
  );
  let scanned = 0;
  const bodies = w.bodies();
  for (const b of bodies) if (agree(t, b.json, 'bench body')) scanned++;
  t.equal(scanned, bodies.length);
});

/** A random JSON value, as text, with random whitespace and number spellings. */
function randomJson(rnd: () => number, depth: number): string {
  const ws = () => (rnd() < 0.1 ? ' ' : '');
  const r = rnd();
  if (depth > 3 || r < 0.3) {
    const s = rnd();
    if (s < 0.3) return JSON.stringify(randomText(rnd));
    if (s < 0.5) return String(Math.floor(rnd() * 2000) - 1000);
    if (s < 0.6) return ['1.0', '2e3', '-0', '0.25', '1E-2', '12345678901234567890'][Math.floor(rnd() * 6)];
    return ['true', 'false', 'null'][Math.floor(rnd() * 3)];
  }
  const n = Math.floor(rnd() * 4);
  if (r < 0.6) return `[${ws()}${Array.from({ length: n }, () => randomJson(rnd, depth + 1)).join(`${ws()},${ws()}`)}]`;
  return randomObject(rnd, depth, n);
}

const KEYS = ['a', 'b', 'a', '1', 'é', '__proto__', 'note'];

function randomObject(rnd: () => number, depth: number, n: number): string {
  const ws = () => (rnd() < 0.1 ? ' ' : '');
  const member = () =>
    `${ws()}${JSON.stringify(KEYS[Math.floor(rnd() * KEYS.length)])}${ws()}:${ws()}${randomJson(rnd, depth + 1)}`;
  return `{${Array.from({ length: n }, member).join(',')}}`;
}

function randomText(rnd: () => number): string {
  const alphabet = ['a', 'Z', ' ', '"', '\\', '\n', '\t', 'é', '✓', '😀', '/', '\u0001', '\u2028'];
  let s = '';
  for (let n = Math.floor(rnd() * 8); n > 0; n--) s += alphabet[Math.floor(rnd() * alphabet.length)];
  return s;
}

t.test('random documents: whatever scans is stored as the general path stores it', async (t) => {
  let seed = 42;
  const rnd = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  let scanned = 0;
  let mutatedScanned = 0;
  for (let i = 0; i < 3000; i++) {
    const body = withProps(randomObject(rnd, 0, Math.floor(rnd() * 5)));
    if (agree(t, body, `random ${i}`)) scanned++;
    // One byte changed: whatever still scans must still agree.
    const bytes = Buffer.from(body);
    bytes[Math.floor(rnd() * bytes.length)] = Math.floor(rnd() * 128);
    if (agree(t, bytes, `mutated ${i}`)) mutatedScanned++;
  }
  t.ok(scanned > 1000, `most random documents scan (${scanned} of 3000)`);
  t.ok(mutatedScanned > 0, `some mutated ones too (${mutatedScanned})`);
});

const batchB = compile(UsageBatchB);
const b = (event: string) => `{"events":[${event}]}`;

t.test('surface B: its bodies are scanned as its schema takes them, and stored alike', async (t) => {
  const ok: Record<string, string> = {
    'as the benchmark sends them': `{"events":[${Array.from({ length: 1000 }, (_, i) => JSON.stringify({ customer_id: CUSTOMER, event_name: 'page_view', external_id: `b-${i}`, user_external_id: `u-${i % 50}`, properties: { i, plan: 'pro' } })).join(',')}]}`,
    'every field': b(
      `{"customer_id":"${CUSTOMER}","event_name":"${'a'.repeat(64)}","user_email":"a.b@example.com","user_external_id":"u","timestamp":"2026-11-20T10:00:00Z","properties":{"x":[1]},"external_id":"${'e'.repeat(128)}"}`,
    ),
    'a customer id that is no UUID (a per-event error later)': b('{"customer_id":"nope","event_name":"a"}'),
  };
  for (const [what, body] of Object.entries(ok))
    t.ok(agree(t, body, what, scanEvents, batchB.check), `${what}: scanned`);
  const left: Record<string, string> = {
    'an event name past 64': b(`{"customer_id":"x","event_name":"${'a'.repeat(65)}"}`),
    'an external id past 128': b(`{"customer_id":"x","event_name":"a","external_id":"${'e'.repeat(129)}"}`),
    'an empty external id': b('{"customer_id":"x","event_name":"a","external_id":""}'),
    'not an e-mail address': b('{"customer_id":"x","event_name":"a","user_email":"nobody"}'),
    'no customer id': b('{"event_name":"a"}'),
    'an empty customer id': b('{"customer_id":"","event_name":"a"}'),
    "surface A's field": b('{"customer_id":"x","event_name":"a","user_id":"u"}'),
    '1001 events': `{"events":[${Array(1001).fill('{"customer_id":"x","event_name":"a"}').join(',')}]}`,
  };
  for (const [what, body] of Object.entries(left)) t.equal(scanEvents(Buffer.from(body)), undefined, what);
});

t.test("the scanner's rules are its schema's: a keyword it cannot check stops it at start-up", async (t) => {
  const batch = (field: object) => ({
    type: 'object',
    properties: {
      events: { type: 'array', minItems: 1, maxItems: 10, items: { type: 'object', properties: { f: field } } },
    },
  });
  t.ok(
    new BatchScanner(batch({ type: 'string', minLength: 1, maxLength: 9, description: 'x' })),
    'lengths and annotations',
  );
  t.throws(() => new BatchScanner(batch({ type: 'string', pattern: '^[A-Z]+$' })), /cannot check f: pattern/);
  t.throws(() => new BatchScanner(batch({ type: 'string', enum: ['a'] })), /cannot check f: enum/);
  t.throws(() => new BatchScanner(batch({ type: 'integer' })), /cannot check f: type integer/);
  t.throws(
    () => new BatchScanner(batch({ type: 'object', properties: { x: { type: 'string' } } })),
    /free-form object/,
  );
  // A minimum above one is counted in code points, as the schema counts it.
  const two = new BatchScanner(batch({ type: 'string', minLength: 2 }));
  t.equal(two.scan(Buffer.from('{"events":[{"f":"é"}]}')), undefined, 'one code point in two bytes is too short');
  t.ok(two.scan(Buffer.from('{"events":[{"f":"éé"}]}')), 'two code points');
});
