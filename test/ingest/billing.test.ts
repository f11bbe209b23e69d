import t, { type Test } from '#tap';
import { randomUUID } from 'node:crypto';
import { closeDb } from '../helpers/stack.js';
import {
  BILLING,
  UUID_RE,
  customerIds,
  expect422,
  ingest,
  natsClient,
  send,
  StreamTap,
  traceOf,
  workspace,
  type Answer,
} from './support.js';

// POST /v1/ingest/billing-events: 1 to 50 events, customer by service UUID only, 202
// {accepted, skipped, message}; any invalid field fails the whole request with 422.
t.teardown(closeDb);
const [ws, other] = await Promise.all([workspace(2), workspace(1)]);
const ids = await customerIds(ws.tenant_id);
const c1 = ids.get('cust-000001')!;
const c2 = ids.get('cust-000002')!;
const foreign = (await customerIds(other.tenant_id)).get('cust-000001')!;
const tier = await ingest(t);
const nc = await natsClient(t);
const tap = await StreamTap.open(t, nc, `ev.billing.${ws.tenant_id}`);
const post = (events: unknown[]) => send(tier.url, BILLING, { events }, { key: ws.ingestion_key });
const billing = (extra: Record<string, unknown> = {}) => ({ event_type: 'payment_failed', customer_id: c1, ...extra });

function expectAccepted(t: Test, res: Answer, accepted: number) {
  t.equal(res.status, 202, `202 (${res.text.slice(0, 300)})`);
  traceOf(t, res);
  t.same(Object.keys(res.body ?? {}).sort(), ['accepted', 'message', 'skipped'], 'body has accepted, skipped, message');
  t.equal(res.body?.accepted, accepted);
  t.equal(res.body?.skipped, 0);
  t.equal(typeof res.body?.message, 'string');
}

async function nothingStored(t: Test) {
  t.equal(await tap.pending(), 0, 'nothing stored');
}

t.test('an accepted billing event is stored with defaults USD and pending, stamped with the trace id', async (t) => {
  const res = await post([billing({ amount: 49.5 })]);
  expectAccepted(t, res, 1);
  const trace = traceOf(t, res);
  const msg = await tap.one(t);
  t.equal(msg.msgId, trace);
  t.equal(msg.headers['Cs-Rows'], '1');
  const [row] = msg.rows;
  t.equal(row.tenant_id, ws.tenant_id);
  t.equal(row.customer_id, c1);
  t.equal(row.event_type, 'payment_failed');
  t.equal(row.amount, 49.5);
  t.equal(row.currency, 'USD', 'currency defaults to USD');
  t.equal(row.status, 'pending', 'status defaults to pending');
  t.match(row.event_id, UUID_RE);
  t.equal(row.batch_id, trace);
});

t.test('every event type, currency and status value is accepted as sent', async (t) => {
  const types = ['payment_failed', 'payment_succeeded', 'invoice_disputed', 'dunning_attempt', 'refund_issued'];
  const statuses = ['pending', 'resolved', 'escalated'];
  const events = types.map((event_type, i) => ({
    event_type,
    customer_id: i % 2 ? c2 : c1,
    amount: i * 10,
    currency: ['EUR', 'JPY', 'GBP', 'USD', 'CHF'][i],
    status: statuses[i % 3],
  }));
  expectAccepted(t, await post(events), 5);
  const { rows } = await tap.one(t);
  t.same(
    rows.map((r) => [r.event_type, r.customer_id, r.amount, r.currency, r.status]),
    events.map((e) => [e.event_type, e.customer_id, e.amount, e.currency, e.status]),
  );
});

t.test('50 billing events are accepted, 51 are refused with 422 at body.events', async (t) => {
  expectAccepted(t, await post(Array.from({ length: 50 }, () => billing())), 50);
  t.equal((await tap.one(t)).rows.length, 50);
  expect422(t, await post(Array.from({ length: 51 }, () => billing())), { type: 'too_long', loc: ['body', 'events'] });
  expect422(t, await post([]), { type: 'too_short', loc: ['body', 'events'] });
  await nothingStored(t);
});

t.test('event_type outside its allowed values fails the whole request with 422', async (t) => {
  for (const event_type of ['payment_refunded', 'PAYMENT_FAILED', '']) {
    expect422(t, await post([billing(), billing({ event_type })]), {
      type: 'enum',
      loc: ['body', 'events', 1, 'event_type'],
    });
  }
  expect422(t, await post([{ customer_id: c1 }]), { type: 'missing', loc: ['body', 'events', 0, 'event_type'] });
  await nothingStored(t);
});

t.test('customer_id is required and must be a UUID; the external identifier is not accepted', async (t) => {
  expect422(t, await post([{ event_type: 'payment_failed', external_customer_id: 'cust-000001' }]), {
    type: 'missing',
    loc: ['body', 'events', 0, 'customer_id'],
  });
  expect422(t, await post([billing({ customer_id: 'cust-000001' })]), {
    type: 'uuid_parsing',
    loc: ['body', 'events', 0, 'customer_id'],
  });
  await nothingStored(t);
});

t.test('a customer_id that is not in the workspace is refused with 422 and nothing is stored', async (t) => {
  const tapOther = await StreamTap.open(t, nc, `ev.billing.${other.tenant_id}`);
  for (const customer_id of [randomUUID(), foreign]) {
    expect422(t, await post([billing(), billing({ customer_id })]), {
      type: 'unknown_customer',
      loc: ['body', 'events', 1, 'customer_id'],
    });
  }
  await nothingStored(t);
  t.equal(await tapOther.pending(), 0, 'nothing reaches the other workspace');
});

t.test('amount must be zero or positive', async (t) => {
  expect422(t, await post([billing({ amount: -0.01 })]), {
    type: 'greater_than_equal',
    loc: ['body', 'events', 0, 'amount'],
  });
  expect422(t, await post([billing({ amount: '10' })]), { type: 'number_type', loc: ['body', 'events', 0, 'amount'] });
  await nothingStored(t);
  expectAccepted(t, await post([billing({ amount: 0 })]), 1);
  t.equal((await tap.one(t)).rows[0].amount, 0);
});

t.test('currency must be an upper-case ISO 4217 code', async (t) => {
  for (const currency of ['usd', 'Eur', 'XYZ', 'US', 'USDT', '']) {
    expect422(t, await post([billing({ currency })]), { type: 'enum', loc: ['body', 'events', 0, 'currency'] });
  }
  await nothingStored(t);
});

t.test('status must be pending, resolved or escalated', async (t) => {
  for (const status of ['done', 'Resolved', 'failed']) {
    expect422(t, await post([billing({ status })]), { type: 'enum', loc: ['body', 'events', 0, 'status'] });
  }
  await nothingStored(t);
});

t.test('a retried batch is recorded again (no deduplication)', async (t) => {
  const events = [billing({ event_type: 'refund_issued', amount: 5 })];
  const first = await post(events);
  const second = await post(events);
  expectAccepted(t, first, 1);
  expectAccepted(t, second, 1);
  const msgs = await tap.drain();
  t.equal(msgs.length, 2, 'both requests stored');
  t.same(
    msgs.map((m) => m.rows[0].batch_id),
    [traceOf(t, first), traceOf(t, second)],
  );
  t.not(msgs[0].rows[0].event_id, msgs[1].rows[0].event_id, 'each copy is its own event');
});
