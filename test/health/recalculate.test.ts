import t from 'tap';
import { subjects } from '../../lib/nats.js';
import { client, startApi } from '../core-api/_helpers.js';
import { bootstrap, ch, closeDb, db, seed, waitFor } from '../helpers/stack.js';
import { customerIds } from '../ingest/support.js';
import { daysAgo, ingestTier, natsClient, processorsTier, recalculate, sendUsage, stored } from './support.js';

// On-demand recalculation: the core NATS request the core API sends on
// POST /v1/customers/{id}/health/recalculate, answered by the scorer after the score is stored.
t.teardown(closeDb);
const ws = await bootstrap();
const other = await bootstrap();
await seed(ws.tenant_id, 3);
await seed(other.tenant_id, 1);
const ids = await customerIds(ws.tenant_id);
const [c1, c2, c3] = ['cust-000001', 'cust-000002', 'cust-000003'].map((e) => ids.get(e)!);
const foreign = (await customerIds(other.tenant_id)).get('cust-000001')!;
const ingest = await ingestTier(t);
const processors = await processorsTier(t, []);
const nc = await natsClient(t);

t.test('a request recalculates the customer from the events queryable now and answers ok', async (t) => {
  t.equal(await stored(c1), undefined, 'never scored');
  t.same(await recalculate(nc, ws.tenant_id, c1), { ok: true });
  const first = (await stored(c1))!;
  t.same([first.score, first.status], [29, 'at_risk']);
  await sendUsage(
    ingest,
    ws,
    Array.from({ length: 7 }, (_, d) => ({
      event_name: `feature_${d}`,
      external_customer_id: 'cust-000001',
      user_id: 'u1',
      timestamp: daysAgo(d),
    })),
  );
  t.same(await recalculate(nc, ws.tenant_id, c1), { ok: true });
  const second = (await stored(c1))!;
  t.same(
    second.dimensions.map((d) => [d.key, d.score, d.value]),
    [
      ['usage_frequency', 35, 1.75],
      ['breadth', 70, 7],
      ['active_users', 58, 0.2333],
      ['key_events', null, null],
      ['payment_health', 100, 0],
    ],
  );
  t.ok(second.calculated_at > first.calculated_at, 'a later calculation, even within the same second');
  t.equal(await stored(c2), undefined, 'only the requested customer is scored');
  const point = await waitFor(
    "today's history point at the new score",
    async () => {
      const [p] = await ch<{ score: number; at: string }>(
        `SELECT score, toString(calculated_at) AS at FROM health_history
         WHERE tenant_id = '${ws.tenant_id}' AND customer_id = '${c1}' AND day = today()
         ORDER BY calculated_at DESC LIMIT 1`,
      );
      return p?.score === second.score ? p : undefined;
    },
    20_000,
    200,
  );
  t.equal(Date.parse(`${point.at.replace(' ', 'T')}Z`), second.calculated_at.getTime(), 'at the calculation time');
});

t.test('unknown, deleted and foreign customers answer unknown_customer and store nothing', async (t) => {
  await db()`UPDATE customers SET deleted_at = now() WHERE id = ${c3}`;
  for (const [tenant, customer, what] of [
    [ws.tenant_id, '0192f0c4-8a55-7b3e-9d1c-000000000000', 'unknown'],
    [ws.tenant_id, c3, 'deleted'],
    [ws.tenant_id, foreign, "another workspace's"],
  ]) {
    t.same(await recalculate(nc, tenant, customer), { ok: false, error: 'unknown_customer' }, what);
    t.equal(await stored(customer), undefined, `${what}: nothing stored`);
  }
});

t.test('malformed requests are refused and do not stop the scorer', async (t) => {
  for (const payload of [
    'not json',
    '[]',
    'null',
    '{"tenant_id":"x","customer_id":"y"}',
    `{"tenant_id":"${ws.tenant_id}"}`,
  ]) {
    const m = await nc.request(subjects.healthRecalculate, payload, { timeout: 10_000 });
    t.same(JSON.parse(m.string()), { ok: false, error: 'invalid_request' }, payload);
  }
  t.equal(processors.proc.exitCode, null, 'still running');
  t.same(await recalculate(nc, ws.tenant_id, c2), { ok: true }, 'and still answering');
});

t.test('POST /v1/customers/{id}/health/recalculate through the core API answers with the new score', async (t) => {
  const api = await startApi(t);
  const res = await client(api.url, ws.api_key).post(`/v1/customers/${c1}/health/recalculate`, {});
  t.equal(res.status, 200, res.text);
  const row = (await stored(c1))!;
  t.equal(res.body.score, row.score);
  t.equal(res.body.status, row.status);
  t.equal(Date.parse(res.body.calculated_at), row.calculated_at.getTime());
});
