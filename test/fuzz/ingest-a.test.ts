import fc from 'fast-check';
import t from '#tap';
import { subjects } from '../../lib/nats.js';
import { closeDb } from '../helpers/stack.js';
import { BILLING, USAGE, customerIds, productIds, workspace } from '../ingest/support.js';
import {
  build,
  dateTimeAround,
  envelope,
  fromJs,
  jsonDoc,
  nastyString,
  oddDateTime,
  oddNumber,
  oddUuid,
  oddValue,
  otherMethod,
  SHRINK,
  shaped,
  sized,
  sizedList,
  type J,
} from './arbitraries.js';
import type { Answered } from './http.js';
import { exactly, INGEST_A_STATUSES, Ledger } from './properties.js';
import { fuzz, ingestTier, settings, stillReady, streamCount, type Surface } from './support.js';

// Ingestion surface A (X-API-Key): usage and billing events. Answers in SPEC.md's own shapes.
const o = settings(process.env);
const MAX_BODY = 1024 * 1024;

t.teardown(closeDb);
const [ws, tier] = await Promise.all([workspace(3, ['--products', '2']), ingestTier(t)]);
const customers = [...(await customerIds(ws.tenant_id)).values()];
const products = [...(await productIds(ws.tenant_id)).values()];
const key = ws.ingestion_key;
const stored = await streamCount(t, [subjects.usage(ws.tenant_id), subjects.billing(ws.tenant_id)]);

const auth = fc.oneof(
  SHRINK,
  { weight: 20, arbitrary: fc.constant<Array<[string, string]>>([['X-API-Key', key]]) },
  {
    weight: 2,
    arbitrary: fc.constantFrom<Array<[string, string]>>(
      [],
      [['X-API-Key', '']],
      [['X-API-Key', `sk_live_${'0'.repeat(64)}`]],
      [['X-API-Key', key.toUpperCase()]],
      [['X-API-Key', ` ${key} `]],
      [['x-api-key', key]],
      [
        ['X-API-Key', key],
        ['X-API-Key', 'sk_live_bogus'],
      ],
      [
        ['X-API-Key', 'sk_live_bogus'],
        ['X-API-Key', key],
      ],
      [['X-API-Key', key + 'a'.repeat(10_000)]],
      [['Authorization', `Bearer ${ws.api_key}`]],
    ),
  },
);

const path = (right: string) =>
  fc.oneof(
    SHRINK,
    { weight: 30, arbitrary: fc.constant(right) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(`${right}/`, `${right}?x=%zz`, right.toUpperCase(), `/${right}`, `${right}%00`),
    },
  );

const eventName = sized(['a']).map((s): J => s);
const usageEvent = shaped({
  event_name: {
    valid: fc.constantFrom<J>('feature_used', 'login', 'report_exported', 'a1_b2'),
    odd: fc.oneof(
      SHRINK,
      eventName,
      fc.constantFrom<J>('Feature', 'a__b', '_a', 'a_', 'email_sent', 'task_created', ''),
    ),
    drop: 30,
  },
  customer_id: {
    valid: fc.constantFrom<J>(...customers),
    odd: fc.oneof(SHRINK, oddUuid, fc.uuid()),
  },
  external_customer_id: {
    valid: fc.constantFrom<J>('cust-000001', 'cust-000002', 'cust-000003'),
    odd: sized(),
  },
  external_source: { valid: fc.constant<J>('internal'), odd: sized(), drop: 2 },
  user_id: { valid: fc.string({ maxLength: 20 }), odd: sized() },
  product_id: { valid: fc.constantFrom<J>(...products), odd: fc.oneof(SHRINK, oddUuid, fc.uuid()) },
  product_code: { valid: fc.constantFrom<J>('P0001', 'P0002', 'P9999'), odd: sized() },
  properties: {
    valid: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }).map(fromJs),
    odd: oddValue,
  },
  timestamp: {
    valid: dateTimeAround(-29, 0).map((s): J => s),
    odd: fc.oneof(SHRINK, oddDateTime, dateTimeAround(-40, 2)),
  },
});

const billingEvent = shaped({
  event_type: {
    valid: fc.constantFrom<J>(
      'payment_failed',
      'payment_succeeded',
      'invoice_disputed',
      'dunning_attempt',
      'refund_issued',
    ),
    odd: fc.oneof(SHRINK, nastyString, fc.constantFrom<J>('PAYMENT_FAILED', 'payment')),
    drop: 30,
  },
  customer_id: { valid: fc.constantFrom<J>(...customers), odd: fc.oneof(SHRINK, oddUuid, fc.uuid()), drop: 30 },
  amount: { valid: fc.oneof(SHRINK, fc.constant<J>(0), fc.double({ min: 0, max: 1e6, noNaN: true })), odd: oddNumber },
  currency: {
    valid: fc.constantFrom<J>('USD', 'EUR', 'JPY'),
    odd: fc.constantFrom<J>('usd', 'EURO', 'XXX', '', '€'),
  },
  status: { valid: fc.constantFrom<J>('pending', 'resolved', 'escalated'), odd: nastyString },
});

const batch = (event: fc.Arbitrary<J>, max: number) =>
  shaped({
    events: {
      valid: sizedList(fc.oneof(SHRINK, { weight: 12, arbitrary: event }, { weight: 1, arbitrary: oddValue }), max),
      odd: oddValue,
      drop: 30,
    },
  });

const usageAnswer = exactly('accepted', 'errors', 'message', 'rejected');
const usageOk = (a: Answered) => {
  const bad = usageAnswer(a);
  if (bad) return bad;
  for (const e of (a.json as { errors: Array<Record<string, unknown>> }).errors)
    if (Object.keys(e).sort().join(',') !== 'code,event_name,index,message')
      return `errors[] item ${JSON.stringify(e)}`;
  return undefined;
};

function surface(name: string, route: string, event: fc.Arbitrary<J>, max: number): Surface {
  const cases = fc
    .record({
      method: otherMethod('POST'),
      path: path(route),
      auth,
      env: envelope('application/json'),
      body: jsonDoc(batch(event, max)),
    })
    .map((c) => build({ method: c.method, path: c.path, auth: c.auth }, c.env, c.body, MAX_BODY));
  return {
    name,
    methods: ['POST'],
    cases,
    port: tier.port,
    rules: {
      contract: 'ingest-a',
      statuses: INGEST_A_STATUSES,
      success: route === USAGE ? usageOk : exactly('accepted', 'message', 'skipped'),
    },
    ledger: new Ledger(stored),
    tiers: [tier],
  };
}

t.test('surface A usage events: every answer documented, nothing stored when refused', async (t) => {
  await fuzz(t, surface('surface A POST /v1/ingest/events', USAGE, usageEvent, 100), o);
  await stillReady(t, [tier]);
});

t.test('surface A billing events: every answer documented, nothing stored when refused', async (t) => {
  await fuzz(t, surface('surface A POST /v1/ingest/billing-events', BILLING, billingEvent, 50), o);
  await stillReady(t, [tier]);
});
