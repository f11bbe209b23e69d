import t from '#tap';
import { subjects } from '../../lib/nats.js';
import { client, startApi } from '../core-api/_helpers.js';
import { bootstrap, ch, closeDb, db, seed, waitFor } from '../helpers/stack.js';
import { customerIds } from '../ingest/support.js';
import {
  daysAgo,
  ingestTier,
  natsClient,
  processorsTier,
  recalculate,
  sendUsage,
  setModel,
  stored,
  type StoredHealth,
} from './support.js';

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
// On demand only; relays the health_changed events of both workspaces.
const processors = await processorsTier(t, [], { OUTBOX_TENANTS: `${ws.tenant_id},${other.tenant_id}` });
const nc = await natsClient(t);
const asReply = (h: StoredHealth) => ({
  score: h.score,
  status: h.status,
  calculated_at: h.calculated_at.toISOString(),
  dimensions: h.dimensions,
});

t.test('a request recalculates the customer from the events queryable now and answers ok', async (t) => {
  t.equal(await stored(c1), undefined, 'never scored');
  const r1 = await recalculate(nc, ws.tenant_id, c1);
  const first = (await stored(c1))!;
  t.same(r1, { ok: true, health: asReply(first) }, 'the reply carries the health as stored');
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
  const r2 = await recalculate(nc, ws.tenant_id, c1);
  const second = (await stored(c1))!;
  t.same(r2, { ok: true, health: asReply(second) }, 'the reply carries the new health');
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
  t.match(await recalculate(nc, ws.tenant_id, c2), { ok: true }, 'and still answering');
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

t.test(
  'concurrent recalculations of many customers of one workspace each answer with their own fresh score',
  async (t) => {
    const many = await bootstrap();
    const N = 24;
    await seed(many.tenant_id, N);
    const byExternal = await customerIds(many.tenant_id);
    const external = (k: number) => `cust-${String(k).padStart(6, '0')}`;
    const id = (k: number) => byExternal.get(external(k))!;
    const api = await startApi(t);
    const http = client(api.url, many.api_key);
    const recalcAll = (ks: number[]) =>
      Promise.all(ks.map((k) => http.post(`/v1/customers/${id(k)}/health/recalculate`, {})));
    const ks = Array.from({ length: N }, (_, i) => i + 1);

    const before = await recalcAll(ks);
    t.same(new Set(before.map((r) => `${r.status} ${r.body.score}`)), new Set(['200 29']), 'no events yet: 29 each');

    // Customer k used k distinct features today: breadth k (100 from 10 on), so the scores differ.
    await sendUsage(
      ingest,
      many,
      ks.flatMap((k) =>
        Array.from({ length: k }, (_, n) => ({
          event_name: `feature_${n}`,
          external_customer_id: external(k),
          user_id: 'u1',
        })),
      ),
    );
    // Every customer twice, all at once: requests of one batch share a calculation.
    const order = [...ks, ...ks].sort(() => Math.random() - 0.5);
    const answers = await recalcAll(order);
    for (const k of ks) {
      const own = answers.filter((_, i) => order[i] === k);
      t.same(
        own.map((r) => r.status),
        [200, 200],
        `${external(k)}: answered`,
      );
      const row = (await stored(id(k)))!;
      const breadth = own.map((r) => r.body.dimensions.find((d: { key: string }) => d.key === 'breadth').value);
      t.same(
        own.map((r) => [r.body.customer_id, r.body.score, r.body.status]),
        [
          [id(k), row.score, row.status],
          [id(k), row.score, row.status],
        ],
        `${external(k)}: its own score`,
      );
      t.same(breadth, [k, k], `${external(k)}: from the events sent`);
      const latest = Math.max(...own.map((r) => Date.parse(r.body.calculated_at)));
      t.equal(latest, row.calculated_at.getTime(), `${external(k)}: the later answer is the stored calculation`);
    }
    const score = (k: number) => answers[order.indexOf(k)].body.score;
    for (let k = 2; k <= 10; k++) t.ok(score(k) > score(k - 1), `${external(k)} scores above ${external(k - 1)}`);

    // One health_changed per customer whose status moved, whatever the batching.
    const moved = ks.filter((k) => answers[order.indexOf(k)].body.status !== 'at_risk').length;
    t.ok(moved > 0, `${moved} customers moved`);
    const [outbox] = await db()<Array<{ n: number; customers: number }>>`
    SELECT count(*)::int AS n, count(DISTINCT customer_id)::int AS customers
    FROM event_outbox WHERE tenant_id = ${many.tenant_id} AND event_name = 'health_changed'`;
    t.same(outbox, { n: moved, customers: moved });
  },
);

t.test('a generated health_changed enters the workspace event catalog once', async (t) => {
  const catalog = () => db()<Array<{ event_name: string }>>`
    SELECT event_name FROM event_catalog WHERE tenant_id = ${other.tenant_id} AND event_name = 'health_changed'`;
  t.match(await recalculate(nc, other.tenant_id, foreign), { ok: true });
  t.same(await catalog(), [], 'a first score generates no event');
  // 29 is healthy under this model, then at_risk again under the default one: two changes.
  await setModel(other.tenant_id, { thresholds: { healthy: 20, at_risk: 10 } });
  t.match(await recalculate(nc, other.tenant_id, foreign), { ok: true });
  await waitFor('health_changed in the catalog', async () => (await catalog()).length === 1, 30_000, 100);
  await setModel(other.tenant_id, {});
  t.match(await recalculate(nc, other.tenant_id, foreign), { ok: true });
  await waitFor(
    'both changes published',
    async () => {
      const [r] = await db()<Array<{ n: number }>>`
        SELECT count(*)::int AS n FROM event_outbox
        WHERE tenant_id = ${other.tenant_id} AND event_name = 'health_changed' AND published_at IS NOT NULL`;
      return r.n === 2;
    },
    30_000,
    100,
  );
  t.same(await catalog(), [{ event_name: 'health_changed' }], 'listed once');
});
