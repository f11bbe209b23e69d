import fc from 'fast-check';
import t from '#tap';
import { compile, formatCheck } from '../../schemas/ajv.js';
import { UsageEventB } from '../../schemas/events.js';
import { UsageEventA } from '../../schemas/ingest.js';
import { FORMATS } from '../../sdk/src/formats.js';
import { SURFACES } from '../../sdk/src/schemas.generated.js';
import { compileEvent, unstorablePath } from '../../sdk/src/validate.js';

/**
 * The client refuses exactly what the service's Ajv refuses: a stricter client loses good events,
 * a looser one lets a surface-A request fail whole (422) for one bad event.
 */

const RUNS = 3000;

const dateTimes = fc.oneof(
  fc
    .date({ min: new Date('0001-01-01'), max: new Date('9999-12-31'), noInvalidDate: true })
    .map((d) => d.toISOString()),
  fc
    .tuple(
      fc.integer({ min: 0, max: 9999 }),
      fc.integer({ min: 0, max: 13 }),
      fc.integer({ min: 0, max: 32 }),
      fc.integer({ min: 0, max: 25 }),
      fc.integer({ min: 0, max: 61 }),
      fc.integer({ min: 0, max: 61 }),
      fc.constantFrom('Z', 'z', '+00:00', '-15:59', '+16:00', '+0100', '', '.123Z', '.1234567891Z', '+05:60'),
      fc.constantFrom('T', 't', ' ', '_'),
    )
    .map(
      ([y, mo, d, h, mi, s, z, sep]) =>
        `${String(y).padStart(4, '0')}-${String(mo).padStart(2, '0')}-${String(d).padStart(2, '0')}${sep}${String(h).padStart(2, '0')}:${String(mi).padStart(2, '0')}:${String(s).padStart(2, '0')}${z}`,
    ),
  fc.constantFrom(
    '2026-11-27T18:36:00Z',
    '2026-11-27T18:36:00.Z',
    '2026-11-27T18:36:00.123456789Z',
    '2026-11-27T18:36:00.1234567890Z',
    '2026-11-27T18:36:00.123+01:00',
    '2026-11-27T18:36:00+01:00x',
    '2026-11-27T18:36:00Zx',
    '2026-11-27T18:36:00+1:00',
    '2026-11-27T18:36:00+01:0',
    '2026-11-27T18:36:00+01-00',
    '2026-11-27T18:36:00',
    '2026-11-27T18:36:00 Z',
    '2026-11-27T18:36:00.123456789+15:59',
    '2026-11-27T18:36:00.123456789012345678+01:00',
    '2026-02-29T00:00:00Z',
    '2024-02-29T00:00:00Z',
    '2000-02-29T00:00:00Z',
    '1900-02-29T00:00:00Z',
    '0000-01-01T00:00:00Z',
    '٢٠٢٦-11-27T18:36:00Z',
    '2026/11/27T18:36:00Z',
    '2026-11-27T18-36-00Z',
    '+2026-11-27T18:36:00Z',
    ' 2026-11-27T18:36:00Z',
    '2026-11-27T18:36:00Z\n',
  ),
  fc
    .tuple(fc.date({ min: new Date('0001-01-01'), max: new Date('9999-12-31'), noInvalidDate: true }), fc.string())
    .map(([d, tail]) => d.toISOString().slice(0, 19) + tail),
  fc.string(),
);
const uuids = fc.oneof(
  fc.uuid(),
  fc.uuid().map((u) => u.toUpperCase()),
  fc.uuid().map((u) => `urn:uuid:${u}`),
  fc.uuid().map((u) => u.replace(/-/g, '')),
  fc.stringMatching(/^[0-9a-gA-G-]{30,40}$/),
);
const emails = fc.oneof(
  fc.emailAddress(),
  fc.stringMatching(/^[a-z.@-]{1,20}$/),
  fc.constantFrom('a@b', 'a@b.c', 'a..b@c.d', '.a@b.c', 'a@-b.c', 'a@b-.c', 'A@B.CO', 'a b@c.d', 'é@x.io'),
);

for (const [name, values] of [
  ['date-time', dateTimes],
  ['uuid', uuids],
  ['email', emails],
] as const) {
  t.test(`format ${name}: the client's check is the service's`, async (t) => {
    const service = formatCheck(name);
    const client = FORMATS[name];
    fc.assert(
      fc.property(values as fc.Arbitrary<string>, (v) => client(v) === service(v)),
      { numRuns: RUNS },
    );
    t.pass();
  });
}

const names = fc.oneof(
  fc.constantFrom('page_view', 'a', 'a1_b2', 'A', '_a', 'a__b', 'a_', '1a', 'ünï', 'x'.repeat(64), 'x'.repeat(65)),
  fc.stringMatching(/^[a-z0-9_]{1,70}$/),
  fc.string({ maxLength: 300 }),
);
const strings = fc.oneof(
  fc.string({ maxLength: 300 }),
  fc.constantFrom('', 'x'.repeat(255), 'x'.repeat(256), '😀'.repeat(255), '😀'.repeat(256), `${'x'.repeat(254)}😀`),
);
const anyValue = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.integer(),
  fc.boolean(),
  fc.constant([]),
  fc.constant({}),
);
const properties = fc.oneof(
  fc.constant(undefined),
  fc.dictionary(fc.string(), fc.jsonValue(), { maxKeys: 4 }),
  anyValue,
);
const maybe = <T>(a: fc.Arbitrary<T>) => fc.oneof(fc.constant(undefined), a, anyValue);

const eventsA = fc.record(
  {
    event_name: maybe(names),
    customer_id: maybe(fc.oneof(fc.uuid(), strings)),
    external_customer_id: maybe(strings),
    external_source: maybe(fc.oneof(strings, fc.constant('x'.repeat(64)), fc.constant('x'.repeat(65)))),
    user_id: maybe(strings),
    product_id: maybe(uuids),
    product_code: maybe(strings),
    properties,
    timestamp: maybe(dateTimes),
    extra: maybe(strings),
  },
  { requiredKeys: [] },
);
const eventsB = fc.record(
  {
    customer_id: maybe(fc.oneof(fc.uuid(), strings)),
    event_name: maybe(names),
    user_email: maybe(emails),
    user_external_id: maybe(strings),
    timestamp: maybe(dateTimes),
    properties,
    external_id: maybe(fc.oneof(strings, fc.constant('x'.repeat(128)), fc.constant('x'.repeat(129)))),
  },
  { requiredKeys: [] },
);

/** The event as the service receives it: what JSON.stringify keeps. */
const wire = (e: unknown) => JSON.parse(JSON.stringify(e)) as unknown;

for (const [surface, schema, events] of [
  ['a', UsageEventA, eventsA],
  ['b', UsageEventB, eventsB],
] as const) {
  t.test(
    `surface ${surface}: an event passes the client's check exactly when it passes the service's schema`,
    async (t) => {
      const service = compile(schema).check;
      const client = compileEvent(SURFACES[surface].event);
      fc.assert(
        fc.property(
          events as fc.Arbitrary<Record<string, unknown>>,
          (e) => (client(e) === undefined) === service(wire(e)),
        ),
        { numRuns: RUNS },
      );
      for (const e of [null, 1, 'x', [], [{ event_name: 'a' }]]) t.equal(client(e)?.code, 'invalid_event');
    },
  );
}

t.test('a refused event is named by the field that broke the rule, in the service codes', async (t) => {
  const b = compileEvent(SURFACES.b.event);
  const customer_id = '0190c8a4-2b4e-7d6a-9b1c-3f2e1d0c9b8a';
  t.equal(b({ event_name: 'x' })?.code, 'invalid_customer_id');
  t.equal(b({ customer_id, event_name: 'Bad Name' })?.code, 'invalid_event_name');
  t.equal(b({ customer_id, event_name: 'ok', timestamp: '2026-01-01' })?.code, 'invalid_timestamp');
  t.equal(b({ customer_id, event_name: 'ok', user_email: 'nope' })?.code, 'invalid_user_email');
  t.equal(b({ customer_id, event_name: 'ok', external_id: 'x'.repeat(129) })?.code, 'invalid_external_id');
  t.equal(b({ customer_id, event_name: 'ok', properties: [] })?.code, 'invalid_properties');
  t.equal(b({ customer_id, event_name: 'ok', timestamp: new Date() }), undefined, 'a Date is sent as its ISO string');
  t.equal(b({ customer_id, event_name: 'ok', timestamp: new Date(Number.NaN) })?.code, 'invalid_timestamp');
});

t.test('text PostgreSQL cannot store is found wherever it is, keys included', async (t) => {
  t.equal(unstorablePath({ a: 'ok', b: { c: ['x', 'y\u0000'] } }), 'b.c[1]');
  t.equal(unstorablePath({ properties: { '\ud800': 1 } }), 'properties.\ud800');
  t.equal(
    unstorablePath({ a: '\ud83d\ude00', b: '\\u0000' }),
    undefined,
    'a surrogate pair and an escaped backslash are fine',
  );
});
