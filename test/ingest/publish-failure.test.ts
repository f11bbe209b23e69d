import t, { type Test } from '#tap';
import { connect } from 'nats';
import { closeDb, privateNats } from '../helpers/stack.js';
import {
  BILLING,
  USAGE,
  batch,
  customerIds,
  expect202,
  ingest,
  natsClient,
  send,
  StreamTap,
  traceOf,
  workspace,
  type Answer,
} from './support.js';

// When JetStream does not acknowledge a batch the client gets 500 {type, title, status, detail}
// and no event of the request is stored. The fault: a NATS server without JetStream, so no
// stream ever answers the publish.
t.teardown(closeDb);
const ws = await workspace(1);
const customer = (await customerIds(ws.tenant_id)).get('cust-000001')!;

const { url: privateNatsUrl } = await privateNats(t);

const broken = await ingest(t, { NATS_URL: privateNatsUrl, INGEST_PUBLISH_TIMEOUT_MS: '200' });
const nc = await natsClient(t);

function expect500(t: Test, res: Answer) {
  t.equal(res.status, 500, `500 (${res.text.slice(0, 200)})`);
  traceOf(t, res);
  t.same(
    Object.keys(res.body ?? {}).sort(),
    ['detail', 'status', 'title', 'type'],
    'body has exactly type, title, status, detail',
  );
  t.equal(res.body?.status, 500);
  t.equal(typeof res.body?.type, 'string');
  t.equal(typeof res.body?.title, 'string');
  t.equal(typeof res.body?.detail, 'string');
  t.notMatch(res.text, /JetStream|nats|stack|Error:/i, 'no internals leak to the client');
}

t.test('unacknowledged usage and billing batches answer 500 and store nothing', async (t) => {
  const usageTap = await StreamTap.open(t, nc, `ev.usage.${ws.tenant_id}`);
  const billingTap = await StreamTap.open(t, nc, `ev.billing.${ws.tenant_id}`);
  expect500(t, await send(broken.url, USAGE, batch(3), { key: ws.ingestion_key }));
  expect500(
    t,
    await send(
      broken.url,
      BILLING,
      { events: [{ event_type: 'payment_failed', customer_id: customer }] },
      { key: ws.ingestion_key },
    ),
  );
  t.equal(await usageTap.pending(), 0, 'no usage event stored');
  t.equal(await billingTap.pending(), 0, 'no billing event stored');
});

t.test('a publish that times out is retried under the same message id, then answers 500', async (t) => {
  // A plain subscriber takes the messages but never acknowledges them, like a stalled stream.
  const fake = await connect({ servers: privateNatsUrl, name: 'silent-stream' });
  t.teardown(() => fake.close());
  const seen: string[] = [];
  fake.subscribe(`ev.usage.${ws.tenant_id}`, { callback: (_e, m) => seen.push(m.headers?.get('Nats-Msg-Id') ?? '') });
  await fake.flush();
  const res = await send(broken.url, USAGE, batch(2), { key: ws.ingestion_key });
  expect500(t, res);
  const trace = traceOf(t, res);
  t.ok(seen.length >= 2, `the batch was offered more than once (${seen.length})`);
  // The stream's duplicate window drops a repeat of an id it already stored: at most one copy.
  t.same([...new Set(seen)], [trace], 'every attempt carries the trace id as Nats-Msg-Id');
});

t.test('the process keeps serving after the failures', async (t) => {
  // Requests that need no publish are still answered by the rules.
  const noneAccepted = await send(
    broken.url,
    USAGE,
    { events: [{ event_name: 'x', external_customer_id: 'cust-999999' }] },
    { key: ws.ingestion_key },
  );
  expect202(t, noneAccepted, 0, 1);
  const unauth = await send(broken.url, USAGE, batch(1), { key: null });
  t.equal(unauth.status, 401);
  traceOf(t, unauth);
  expect500(t, await send(broken.url, USAGE, batch(1), { key: ws.ingestion_key }));
});
