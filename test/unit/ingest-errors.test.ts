import t from '#tap';
import type { ErrorObject } from 'ajv';
import { fromAjv, summarize } from '../../ingest/surface-a/errors.js';
import { compile } from '../../schemas/ajv.js';
import { BillingBatch, UsageBatchA } from '../../schemas/ingest.js';

// Surface A's 422 `detail[]`: what a client reads to find the field it got wrong (SPEC.md's shape).

const usage = compile(UsageBatchA);
const billing = compile(BillingBatch);
const CUSTOMER = '0190a000-0000-7000-8000-000000000001';

function details(v: typeof usage | typeof billing, body: unknown) {
  if (v.check(body)) throw new Error(`expected ${JSON.stringify(body).slice(0, 80)} to be invalid`);
  v.explain(body);
  return fromAjv(v.explain.errors ?? [], body);
}
const short = (ds: ReturnType<typeof fromAjv>) => ds.map((d) => [d.type, d.loc, d.msg]);

t.test('a missing field is named with its full location', async (t) => {
  t.same(short(details(usage, {})), [['missing', ['body', 'events'], 'Field required']]);
  t.same(short(details(usage, { events: [{ event_name: 'login' }, {}] })), [
    ['missing', ['body', 'events', 1, 'event_name'], 'Field required'],
  ]);
});

t.test('each kind of failure has its own type and message, located to the event and field', async (t) => {
  const events = [
    { event_name: 'login' },
    { event_name: 'Bad-Name' },
    { event_name: 'x', product_id: 'not-a-uuid' },
    { event_name: 'x', timestamp: '2026-05-01 12:00' },
    { event_name: 'x', user_id: 7 },
    { event_name: '' },
  ];
  t.same(short(details(usage, { events })), [
    [
      'string_pattern_mismatch',
      ['body', 'events', 1, 'event_name'],
      'event_name must be snake_case: lowercase letters and digits in words joined by single underscores, starting with a letter',
    ],
    ['uuid_parsing', ['body', 'events', 2, 'product_id'], 'Input should be a valid UUID'],
    [
      'datetime_parsing',
      ['body', 'events', 3, 'timestamp'],
      'Input should be an ISO 8601 date-time with a time zone, e.g. 2026-05-01T12:00:00Z',
    ],
    ['string_type', ['body', 'events', 4, 'user_id'], 'Input should be a valid string'],
    ['string_too_short', ['body', 'events', 5, 'event_name'], 'String should have at least 1 character'],
    [
      'string_pattern_mismatch',
      ['body', 'events', 5, 'event_name'],
      'event_name must be snake_case: lowercase letters and digits in words joined by single underscores, starting with a letter',
    ],
  ]);
});

t.test('batch size limits say how many items were sent', async (t) => {
  t.same(short(details(usage, { events: [] })), [
    ['too_short', ['body', 'events'], 'List should have at least 1 item after validation, not 0'],
  ]);
  const many = Array.from({ length: 101 }, () => ({ event_name: 'login' }));
  t.same(short(details(usage, { events: many })), [
    ['too_long', ['body', 'events'], 'List should have at most 100 items after validation, not 101'],
  ]);
  t.same(short(details(usage, { events: 'login' })), [
    ['array_type', ['body', 'events'], 'Input should be a valid array'],
  ]);
});

t.test('enums list their values when few, describe them when many', async (t) => {
  const ds = details(billing, { events: [{ event_type: 'refund', customer_id: CUSTOMER, currency: 'usd' }] });
  t.same(short(ds), [
    [
      'enum',
      ['body', 'events', 0, 'event_type'],
      "Input should be 'payment_failed', 'payment_succeeded', 'invoice_disputed', 'dunning_attempt', 'refund_issued'",
    ],
    ['enum', ['body', 'events', 0, 'currency'], 'Input should be a 3-letter ISO 4217 code in upper case'],
  ]);
  t.equal(ds[1].input, 'usd', 'the offending value is echoed');
  t.same(short(details(billing, { events: [{ event_type: 'refund_issued', customer_id: CUSTOMER, amount: -1 }] })), [
    ['greater_than_equal', ['body', 'events', 0, 'amount'], 'Input should be greater than or equal to 0'],
  ]);
});

t.test('large inputs are described, not echoed', async (t) => {
  const long = 'a'.repeat(300);
  const [d] = details(usage, { events: [{ event_name: long }] });
  t.equal(d.type, 'string_too_long');
  t.equal(d.input, `${'a'.repeat(256)}…`);
  t.equal(summarize(Array.from({ length: 500 }, (_, i) => i)), '<array of 500 items>');
  t.match(summarize({ blob: 'x'.repeat(600) }), /^<object of \d+ bytes>$/);
  t.equal(summarize(undefined), null);
  let deep: unknown = 1;
  for (let i = 0; i < 20_000; i++) deep = [deep];
  t.equal(summarize(deep), '<array of 1 items>', 'nesting deeper than the stack still answers');
});

t.test('JSON pointer escapes are undone and repeated errors reported once', async (t) => {
  const err = (instancePath: string): ErrorObject => ({
    keyword: 'type',
    instancePath,
    schemaPath: '#/type',
    params: { type: 'string' },
  });
  const body = { events: [{ properties: { 'a/b': 1, 'c~d': 2 } }] };
  t.same(
    fromAjv(
      [err('/events/0/properties/a~1b'), err('/events/0/properties/a~1b'), err('/events/0/properties/c~0d')],
      body,
    ).map((d) => [d.loc, d.input]),
    [
      [['body', 'events', 0, 'properties', 'a/b'], 1],
      [['body', 'events', 0, 'properties', 'c~d'], 2],
    ],
  );
});
