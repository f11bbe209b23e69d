import fc from 'fast-check';
import t from '#tap';
import { subjects } from '../../lib/nats.js';
import { closeDb, db } from '../helpers/stack.js';
import { BACKFILL, EVENTS, workspace } from '../events/support.js';
import {
  build,
  dateTimeAround,
  envelope,
  fromJs,
  jsonDoc,
  nastyString,
  oddDateTime,
  oddUuid,
  oddValue,
  otherMethod,
  params,
  SHRINK,
  shaped,
  sized,
  sizedList,
  type J,
} from './arbitraries.js';
import { EVENTS_B_STATUSES, exactly, Ledger, type Rules } from './properties.js';
import { fuzz, ingestTier, settings, stillReady, streamCount, type Surface } from './support.js';

// Ingestion surface B (bearer credentials, problem+json): POST /v1/events, the backfill, and the
// query strings of GET /v1/events.
const o = settings(process.env);
const MAX_BODY = 3 * 1024 * 1024;

t.teardown(closeDb);
const [{ ws, ids }, tier] = await Promise.all([workspace(3), ingestTier(t)]);
const stream = await streamCount(t, [subjects.usage(ws.tenant_id), subjects.backfill(ws.tenant_id)]);
const ledger = new Ledger(async () => {
  const [row] = await db()<{ jobs: number; keys: number; dedup: number }[]>`
    SELECT (SELECT count(*)::int FROM jobs WHERE tenant_id = ${ws.tenant_id}) AS jobs,
           (SELECT count(*)::int FROM idempotency_keys WHERE tenant_id = ${ws.tenant_id}) AS keys,
           (SELECT count(*)::int FROM event_dedup WHERE tenant_id = ${ws.tenant_id}) AS dedup`;
  return { ...row, messages: await stream() };
});

// A syntactically valid JWT nobody signed, and one without `exp`.
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const claims = { sub: 'x', tid: ws.tenant_id, scope: 'events:write' };
const unsigned = `${b64({ alg: 'EdDSA', typ: 'JWT' })}.${b64(claims)}.AAAA`;

const auth = fc.oneof(
  SHRINK,
  { weight: 20, arbitrary: fc.constant<Array<[string, string]>>([['Authorization', `Bearer ${ws.api_key}`]]) },
  {
    weight: 2,
    arbitrary: fc.constantFrom<Array<[string, string]>>(
      [],
      [['Authorization', '']],
      [['Authorization', 'Bearer ']],
      [['Authorization', `bearer ${ws.api_key}`]],
      [['Authorization', `Bearer  ${ws.api_key}`]],
      [['Authorization', `Bearer ${ws.api_key}x`]],
      [['Authorization', `Basic ${ws.api_key}`]],
      [['Authorization', `Bearer svc_sk_test_${'A'.repeat(43)}`]],
      [['Authorization', `Bearer ${unsigned}`]],
      [['Authorization', 'Bearer a.b.c']],
      [['Authorization', `Bearer ${'x'.repeat(10_000)}`]],
      [
        ['Authorization', `Bearer ${ws.api_key}`],
        ['Authorization', 'Bearer bogus'],
      ],
      [['X-API-Key', ws.ingestion_key]],
    ),
  },
);

const idempotency = fc.oneof(
  SHRINK,
  { weight: 12, arbitrary: fc.constant<Array<[string, string]>>([]) },
  {
    weight: 2,
    arbitrary: fc
      .oneof(
        fc.constantFrom('k-1', 'k-2', 'k-3'),
        fc.constantFrom('', ' ', 'a b', 'clé', 'x'.repeat(255), 'x'.repeat(256), '\t'),
        fc.uuid(),
      )
      .map((k): Array<[string, string]> => [['Idempotency-Key', k]]),
  },
);

const event = (oldestDays: number) =>
  shaped({
    customer_id: { valid: fc.constantFrom<J>(...ids), odd: fc.oneof(oddUuid, fc.uuid()), drop: 30 },
    event_name: {
      valid: fc.constantFrom<J>('feature_used', 'login', 'report_exported'),
      odd: fc.oneof(sized(['a']), fc.constantFrom<J>('Login', 'a__b', 'health_changed', '')),
      drop: 30,
    },
    user_email: { valid: fc.constantFrom<J>('ann@acme.com', 'b@x.io'), odd: fc.oneof(sized(), nastyString) },
    user_external_id: { valid: fc.string({ minLength: 1, maxLength: 12 }), odd: sized() },
    timestamp: {
      valid: dateTimeAround(oldestDays, 0).map((s): J => s),
      odd: fc.oneof(oddDateTime, dateTimeAround(-800, 3)),
    },
    properties: {
      valid: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }).map(fromJs),
      odd: oddValue,
    },
    external_id: {
      valid: fc.oneof(fc.constantFrom<J>('x-1', 'x-2'), fc.uuid()),
      odd: sized(),
    },
  });

const batch = (oldestDays: number) =>
  shaped({
    events: {
      valid: sizedList(
        fc.oneof(SHRINK, { weight: 12, arbitrary: event(oldestDays) }, { weight: 1, arbitrary: oddValue }),
        1000,
      ),
      odd: oddValue,
      drop: 30,
    },
  });

const path = (right: string) =>
  fc.oneof(
    SHRINK,
    { weight: 30, arbitrary: fc.constant(right) },
    { weight: 1, arbitrary: fc.constantFrom(`${right}/`, `${right}?x=%zz`, `${right}?a=%00`, `/${right}`) },
  );

function post(name: string, route: string, oldestDays: number, success: Rules['success']): Surface {
  return {
    name,
    methods: ['POST'],
    cases: fc
      .record({
        method: otherMethod('POST'),
        path: path(route),
        auth,
        key: idempotency,
        env: envelope('application/json'),
        body: jsonDoc(batch(oldestDays)),
      })
      .map((c) => build({ method: c.method, path: c.path, auth: c.auth, headers: c.key }, c.env, c.body, MAX_BODY)),
    port: tier.port,
    rules: { contract: 'problem', statuses: EVENTS_B_STATUSES, success },
    ledger,
    tiers: [tier],
  };
}

t.test('POST /v1/events: every answer documented, nothing stored when refused', async (t) => {
  await fuzz(t, post('surface B POST /v1/events', EVENTS, -29, exactly('accepted', 'errors', 'rejected')), o);
  await stillReady(t, [tier]);
});

t.test('POST /v1/events/backfill: every answer documented, nothing stored when refused', async (t) => {
  const answer = exactly('accepted', 'errors', 'job_id', 'rejected', 'status', 'status_url');
  await fuzz(t, post('surface B POST /v1/events/backfill', BACKFILL, -700, answer), o);
  await stillReady(t, [tier]);
});

const cursor = fc.oneof(
  fc
    .tuple(
      fc.oneof(fc.integer(), fc.constantFrom(4294967295, 4294967296, -1, 1e20, 0.5)),
      fc.integer({ min: -1, max: 1000 }),
      fc.oneof(fc.uuid(), oddUuid),
    )
    .map((v) => Buffer.from(JSON.stringify(v)).toString('base64url')),
  fc.jsonValue({ maxDepth: 2 }).map((v) => Buffer.from(JSON.stringify(v) ?? '').toString('base64url')),
  fc.base64String({ maxLength: 40 }),
  sized(['A']),
  nastyString,
);

const query = params({
  customer_id: fc.oneof(SHRINK, fc.constantFrom(...ids), oddUuid, fc.uuid()),
  event_name: fc.oneof(SHRINK, fc.constantFrom('feature_used', 'login'), sized(['a']), nastyString),
  from: fc.oneof(SHRINK, dateTimeAround(-10, 0), oddDateTime, nastyString),
  to: fc.oneof(SHRINK, dateTimeAround(-1, 1), oddDateTime),
  limit: fc.oneof(
    SHRINK,
    fc.constantFrom('100', '1', '1000', '0', '1001', '-1', '1.5', '1e3', '', 'abc', ' 5', '0x10', '-0', 'NaN'),
    fc.integer().map(String),
  ),
  cursor,
});

t.test('GET /v1/events query strings: every answer documented', async (t) => {
  const s: Surface = {
    name: 'surface B GET /v1/events',
    methods: ['GET'],
    cases: fc
      .record({ method: otherMethod('GET'), auth, qs: query, env: envelope('application/json') })
      .map((c) => build({ method: c.method, path: `${EVENTS}?${c.qs}`, auth: c.auth }, c.env, undefined, MAX_BODY)),
    port: tier.port,
    rules: { contract: 'problem', statuses: EVENTS_B_STATUSES, success: exactly('data', 'has_more', 'next_cursor') },
    ledger,
    tiers: [tier],
  };
  await fuzz(t, s, o);
  await stillReady(t, [tier]);
});
