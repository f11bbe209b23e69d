import t from '#tap';
import {
  bootstrap,
  ch,
  closeDb,
  db,
  privateJetStream,
  seed,
  waitFor,
  PROPERTY_COLUMNS,
  propertiesText,
  type StoredPropertyColumns,
} from '../helpers/stack.js';
import { consumers } from '../../lib/nats.js';
import { consumerInfo, jetstream } from '../helpers/observe.js';
import { processorsTier, setModel } from './support.js';

// health_changed exactly once per status change, also when the scorer is SIGKILLed in the middle
// of a run (some chunks of customer_health committed, others not) and started again.
t.teardown(closeDb);
const CUSTOMERS = 15_000;

t.test('a run killed midway and started again stores one health_changed per customer that moved', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, CUSTOMERS);
  // A JetStream of its own: what the killed writer held is this file's alone.
  const nats = await privateJetStream(t);
  const tenant = ws.tenant_id;
  const counts = async () =>
    (
      await db()<Array<{ scored: number; healthy: number }>>`
        SELECT count(*)::int AS scored, (count(*) FILTER (WHERE status = 'healthy'))::int AS healthy
        FROM customer_health WHERE tenant_id = ${tenant}`
    )[0];

  // First scores (no events: 29, at_risk), by a scheduled run split over the worker pool.
  const first = await processorsTier(t, [tenant], { HEALTH_POOL_MIN_CUSTOMERS: '1000', ...nats.env });
  await waitFor('every customer scored once', async () => (await counts()).scored === CUSTOMERS, 120_000, 250);
  await first.stop('SIGTERM');
  t.equal((await counts()).healthy, 0);

  // A model under which 29 is healthy: the next run moves every customer.
  await setModel(tenant, { thresholds: { healthy: 20, at_risk: 10 } });
  const env = { HEALTH_RECALC_INTERVAL_MS: '1000', HEALTH_POOL_MIN_CUSTOMERS: '1000', ...nats.env };
  const doomed = await processorsTier(t, [tenant], env);
  const partial = await waitFor(
    'part of the run committed',
    async () => {
      const c = await counts();
      return c.healthy > 0 && c.healthy < CUSTOMERS ? c : undefined;
    },
    120_000,
    10,
  );
  await doomed.stop('SIGKILL');
  const afterKill = await counts();
  t.ok(
    afterKill.healthy < CUSTOMERS,
    `killed with ${afterKill.healthy} of ${CUSTOMERS} moved (${partial.healthy} seen)`,
  );

  const last = await processorsTier(t, [tenant], env);
  await waitFor('every customer moved', async () => (await counts()).healthy === CUSTOMERS, 180_000, 500);
  const outbox = await waitFor(
    'every outbox row published',
    async () => {
      const [r] = await db()<Array<{ n: number; unpublished: number; customers: number }>>`
        SELECT count(*)::int AS n, (count(*) FILTER (WHERE published_at IS NULL))::int AS unpublished,
               count(DISTINCT customer_id)::int AS customers
        FROM event_outbox WHERE tenant_id = ${tenant}`;
      return r.unpublished === 0 ? r : undefined;
    },
    180_000,
    500,
  );
  t.same(outbox, { n: CUSTOMERS, unpublished: 0, customers: CUSTOMERS }, 'one outbox row per customer that moved');

  let seen = '0';
  const stored = await waitFor(
    'every health_changed in csp.events',
    async () => {
      const [r] = await ch<{ n: string; ids: string; customers: string }>(
        `SELECT count() AS n, uniqExact(event_id) AS ids, uniqExact(customer_id) AS customers
         FROM events WHERE tenant_id = '${tenant}' AND event_name = 'health_changed'`,
      );
      seen = r.n;
      return Number(r.n) >= CUSTOMERS ? r : undefined;
    },
    180_000,
    500,
  ).catch(async (err: Error) => {
    // What the system writer of this file's JetStream held, for the diagnostic.
    const c = await consumerInfo(await jetstream(t, nats.url), consumers.systemWriter);
    const state = {
      stored: seen,
      pending: c.num_pending,
      ack_pending: c.num_ack_pending,
      redelivered: c.num_redelivered,
    };
    const logs = (tier: { output: () => string }) => tier.output().trim().split('\n').slice(-15).join('\n');
    throw new Error(
      `${err.message}; ${JSON.stringify(state)}\nkilled tier's log:\n${logs(doomed)}\nlast tier's log:\n${logs(last)}`,
    );
  });
  t.same(
    [Number(stored.n), Number(stored.ids), Number(stored.customers)],
    [CUSTOMERS, CUSTOMERS, CUSTOMERS],
    'stored exactly once each',
  );
  const kinds = await ch<{ surface: string; n: string } & StoredPropertyColumns>(
    `SELECT surface, ${PROPERTY_COLUMNS}, count() AS n FROM events
     WHERE tenant_id = '${tenant}' AND event_name = 'health_changed' GROUP BY surface, ${PROPERTY_COLUMNS}`,
  );
  t.same(
    kinds.map((k) => [k.surface, JSON.parse(propertiesText(k)), Number(k.n)]),
    [['system', { from_status: 'at_risk', to_status: 'healthy', score: 29, previous_score: 29 }, CUSTOMERS]],
  );
});
