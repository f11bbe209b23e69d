import t, { type Test } from '#tap';
import { closeDb, waitFor } from '../helpers/stack.js';
import { BILLING, USAGE, batch, customerIds, ingest, sendFresh, traceOf, workspace, type Answer } from './support.js';

// One budget of requests per minute per organization, shared by both endpoints and by every
// ingest process. The limit is lowered to 20 so the test stays quick; the rule is the same at 300.
t.teardown(closeDb);
const LIMIT = 20;
const [ws, quiet] = await Promise.all([workspace(1), workspace(1)]);
const customer = (await customerIds(ws.tenant_id)).get('cust-000001')!;
const quietCustomer = (await customerIds(quiet.tenant_id)).get('cust-000001')!;
const env = { INGEST_RATE_LIMIT_PER_MIN: String(LIMIT) };
// Two processes behind one port, and a third process on another port: all share the budget.
const pair = await ingest(t, { ...env, INGEST_PROCESSES: '2' });
const single = await ingest(t, env);

const usage = () => batch(1);
const billing = (id: string) => ({ events: [{ event_type: 'payment_succeeded', customer_id: id, amount: 1 }] });

function expect429(t: Test, res: Answer) {
  t.equal(res.status, 429, `429 (${res.text.slice(0, 200)})`);
  traceOf(t, res);
  const d = res.body?.detail;
  t.same(
    Object.keys(d ?? {}).sort(),
    ['detail', 'retry_after', 'status', 'title', 'type'],
    'detail has type, title, status, detail, retry_after',
  );
  t.equal(d?.status, 429);
  t.equal(typeof d?.type, 'string');
  t.equal(typeof d?.title, 'string');
  t.equal(typeof d?.detail, 'string');
  t.ok(
    Number.isInteger(d?.retry_after) && d.retry_after >= 1 && d.retry_after <= 60,
    `retry_after ${d?.retry_after} is whole seconds within the minute`,
  );
  t.equal(res.headers.get('retry-after'), String(d?.retry_after), 'Retry-After header equals retry_after');
}

t.test(
  `the ${LIMIT}-per-minute budget is shared by both endpoints and all processes; the next request gets 429`,
  async (t) => {
    // The budget is a fixed calendar minute: start early in one so the whole sequence fits in it.
    await waitFor('the start of a minute', () => new Date().getUTCSeconds() < 40, 45_000, 250);
    const answered: number[] = [];
    for (let i = 0; i < LIMIT; i++) {
      const tier = i % 3 === 2 ? single : pair;
      const res =
        i % 2 === 0
          ? await sendFresh(tier.url, USAGE, usage(), ws.ingestion_key)
          : await sendFresh(tier.url, BILLING, billing(customer), ws.ingestion_key);
      traceOf(t, res);
      answered.push(res.status);
    }
    t.same(answered, Array(LIMIT).fill(202), `all ${LIMIT} requests within the budget are accepted`);

    expect429(t, await sendFresh(pair.url, USAGE, usage(), ws.ingestion_key));
    expect429(t, await sendFresh(single.url, BILLING, billing(customer), ws.ingestion_key));
    expect429(t, await sendFresh(pair.url, BILLING, billing(customer), ws.ingestion_key));

    // Another workspace has its own budget.
    for (const tier of [pair, single]) {
      t.equal((await sendFresh(tier.url, USAGE, usage(), quiet.ingestion_key)).status, 202, 'other workspace, usage');
      t.equal(
        (await sendFresh(tier.url, BILLING, billing(quietCustomer), quiet.ingestion_key)).status,
        202,
        'other workspace, billing',
      );
    }
  },
);
