import t from '#tap';
import { connect } from 'nats';
import { uuidv7 } from '../../lib/ids.js';
import { client, startApi } from '../core-api/_helpers.js';
import { metric } from '../helpers/observe.js';
import {
  bootstrap,
  ch,
  closeDb,
  db,
  post,
  privateJetStream,
  seed,
  startTier,
  urls,
  waitFor,
} from '../helpers/stack.js';

/**
 * A customer removed for good loses every row in every store, in the background: counted over every
 * ClickHouse table with a customer_id column and every PostgreSQL table with one, so a table added
 * later is checked without touching this file. Another customer of the workspace keeps all of its.
 * Runs on a JetStream of its own: its processors are killed mid-erasure.
 */
t.teardown(closeDb);

const BIG = Number(process.env.ERASURE_TEST_EVENTS ?? 1_000_000);

async function chExec(query: string): Promise<void> {
  const res = await fetch(`${urls.CLICKHOUSE_URL.split(',')[0]}/?database=csp`, { method: 'POST', body: query });
  if (!res.ok) throw new Error(`ClickHouse: ${await res.text()}`);
}

/** Rows of one customer in every table of both stores that has a customer_id column. */
async function rowsEverywhere(tenantId: string, customerId: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  const tables = await ch<{ table: string }>(
    `SELECT c.table AS table FROM system.columns AS c
     ANY INNER JOIN (SELECT name AS table FROM system.tables WHERE database = 'csp' AND engine LIKE '%MergeTree') AS t
     USING table WHERE c.database = 'csp' AND c.name = 'customer_id'`,
  );
  for (const { table } of tables) {
    const [r] = await ch<{ n: string }>(
      `SELECT count() AS n FROM csp.\`${table}\` WHERE tenant_id = toUUID('${tenantId}') AND customer_id = toUUID('${customerId}')`,
    );
    out[`clickhouse.${table}`] = Number(r.n);
  }
  const sql = db();
  const pgTables = await sql<Array<{ table: string }>>`
    SELECT c.table_name AS table FROM information_schema.columns c
    JOIN information_schema.tables tb ON tb.table_schema = c.table_schema AND tb.table_name = c.table_name
      AND tb.table_type = 'BASE TABLE'
    WHERE c.table_schema = current_schema() AND c.column_name = 'customer_id' AND c.table_name <> 'erasures'`;
  for (const { table } of pgTables) {
    const [r] = await sql<
      [{ n: number }]
    >`SELECT count(*)::int AS n FROM ${sql(table)} WHERE customer_id = ${customerId}`;
    out[`postgres.${table}`] = r.n;
  }
  const [c] = await sql<[{ n: number }]>`SELECT count(*)::int AS n FROM customers WHERE id = ${customerId}`;
  out['postgres.customers'] = c.n;
  const [k] = await sql<
    [{ n: number }]
  >`SELECT count(*)::int AS n FROM idempotency_keys WHERE body->>'id' = ${customerId}`;
  out['postgres.idempotency_keys'] = k.n;
  return out;
}

const total = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);

/** A customer's data in every store: `events` straight into ClickHouse (the views fill the rollups), and the rest. */
async function fill(tenantId: string, customerId: string, external: string, events: number): Promise<void> {
  const T = `toUUID('${tenantId}')`;
  const C = `toUUID('${customerId}')`;
  await chExec(
    `INSERT INTO csp.events (tenant_id, customer_id, event_name, ts, ts_ms, event_id, batch_id, received_at,
       external_customer_id, surface, user_id)
     SELECT ${T}, ${C}, concat('feature_', toString(number % 20)), toDateTime(now() - number % 5184000), 0,
       generateUUIDv4(), toUUID('${uuidv7()}'), now(), '${external}', 'api', concat('user-', toString(number % 200))
     FROM numbers(${events})`,
  );
  await chExec(
    `INSERT INTO csp.billing_events (tenant_id, customer_id, event_type, amount, currency, status, ts, ts_ms, event_id,
       batch_id, received_at)
     SELECT ${T}, ${C}, 'payment_succeeded', 100, 'EUR', 'succeeded', toDateTime(now() - number * 86400), 0,
       generateUUIDv4(), toUUID('${uuidv7()}'), now() FROM numbers(100)`,
  );
  await chExec(
    `INSERT INTO csp.health_history (tenant_id, customer_id, day, score, status, calculated_at)
     SELECT ${T}, ${C}, today() - number, 70, 'healthy', now() FROM numbers(60)`,
  );
  await chExec(
    `INSERT INTO csp.metric_values (tenant_id, metric_id, customer_id, period_start, period_end, value, computed_at)
     SELECT ${T}, toUUID('${uuidv7()}'), ${C}, toDateTime(toStartOfDay(now()) - number * 86400),
       toDateTime(toStartOfDay(now()) - number * 86400 + 86400), number, now() FROM numbers(30)`,
  );
  const sql = db();
  await sql`INSERT INTO contacts (tenant_id, customer_id, name, email) VALUES (${tenantId}, ${customerId}, 'Jane Roe', ${`jane@${external}.example`})`;
  await sql`INSERT INTO tasks (tenant_id, customer_id, title) VALUES (${tenantId}, ${customerId}, 'Call Jane')`;
  await sql`INSERT INTO alerts (tenant_id, type, severity, customer_id, summary) VALUES (${tenantId}, 'usage_drop', 'medium', ${customerId}, 'Drop')`;
  await sql`INSERT INTO customer_health (customer_id, tenant_id, score, status, dimensions, calculated_at) VALUES (${customerId}, ${tenantId}, 70, 'healthy', '{}', now())`;
  await sql`INSERT INTO event_dedup (tenant_id, customer_id, external_id) VALUES (${tenantId}, ${customerId}, ${`ext-${external}`})`;
  await sql`INSERT INTO event_outbox (id, tenant_id, customer_id, event_name, published_at) VALUES (${uuidv7()}, ${tenantId}, ${customerId}, 'health_changed', now())`;
  await sql`INSERT INTO idempotency_keys (tenant_id, scope, key, request_hash, status, body)
    VALUES (${tenantId}, 'customers.create', ${`key-${external}`}, '\\x00', 201, ${sql.json({ id: customerId, name: external })})`;
}

async function customerIds(tenantId: string): Promise<string[]> {
  const rows = await db()<Array<{ id: string }>>`
    SELECT id::text FROM customers WHERE tenant_id = ${tenantId} ORDER BY external_id`;
  return rows.map((r) => r.id);
}

async function erasure(tenantId: string, customerId: string) {
  const [r] = await db()<
    Array<{ status: string; pending: Record<string, number>; requested_at: Date; completed_at: Date | null }>
  >`SELECT status, clickhouse_pending AS pending, requested_at, completed_at FROM erasures
    WHERE tenant_id = ${tenantId} AND customer_id = ${customerId}`;
  return r;
}

t.test(`a permanent delete erases ${BIG} events and everything else of the customer, and only of it`, async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 2);
  const [target, other] = await customerIds(ws.tenant_id);
  const nats = await privateJetStream(t);
  const api = await startApi(t, nats.env);
  const ingest = await startTier(t, 'ingest', { INGEST_PROCESSES: '1', ...nats.env });
  const c = client(api.url, ws.api_key);
  const t0 = performance.now();
  await Promise.all([fill(ws.tenant_id, target, 'cust-000001', BIG), fill(ws.tenant_id, other, 'cust-000002', BIG)]);
  t.comment(`filled 2 x ${BIG} events in ${Math.round(performance.now() - t0)} ms`);
  // Events still in the stream when the customer goes: the writer drops the customer's, lands the other's.
  for (const ext of ['cust-000001', 'cust-000002']) {
    const r = await post(
      `${ingest.url}/v1/ingest/events`,
      { events: Array.from({ length: 10 }, (_, i) => ({ event_name: `late_${i}`, external_customer_id: ext })) },
      { 'x-api-key': ws.ingestion_key },
    );
    t.equal(r.status, 202, `events of ${ext} accepted`);
  }
  const before = await rowsEverywhere(ws.tenant_id, target);
  const otherBefore = await rowsEverywhere(ws.tenant_id, other);
  t.ok(before['clickhouse.events'] >= BIG, 'the customer has its events');
  t.ok(before['clickhouse.usage_daily'] > 0 && before['postgres.contacts'] === 1, 'and rollups and contacts');

  const del = await c.del(`/v1/customers/${target}?hard=true`);
  t.equal(del.status, 204, 'the delete answers 204 at once');
  t.equal((await c.get(`/v1/customers/${target}`)).status, 404, 'the customer is gone from the API');
  const queued = await c.get(`/v1/erasures/${target}`);
  t.equal(queued.status, 200);
  t.equal(queued.body.status, 'queued', 'its erasure is queued');
  t.equal(queued.body.rows_removed.postgres.tables.contacts, 1, 'the rows that went with the customer row are counted');

  const started = performance.now();
  const processors = await startTier(t, 'processors', {
    ERASURE_TENANTS: ws.tenant_id,
    ERASURE_POLL_MS: '100',
    ...nats.env,
  });
  await waitFor(
    'the erasure completed',
    async () => (await erasure(ws.tenant_id, target)).status === 'completed',
    300_000,
    100,
  );
  const ms = Math.round(performance.now() - started);
  const rec = await erasure(ws.tenant_id, target);
  t.comment(
    `erasure of ${BIG + 10} events (and the rest): ${ms} ms from processors start; ` +
      `${rec.completed_at!.getTime() - rec.requested_at.getTime()} ms from request to completion`,
  );

  // The events published before the delete reach the writer after it: only the other customer's land.
  const nc = await connect({ servers: nats.url });
  t.teardown(() => nc.close());
  const jsm = await nc.jetstreamManager();
  await waitFor(
    'the stream drained',
    async () => {
      const i = await jsm.consumers.info('EVENTS', 'clickhouse-writer-usage');
      return i.num_pending === 0 && i.num_ack_pending === 0;
    },
    60_000,
    100,
  );
  await waitFor(
    'no row of the customer left anywhere',
    async () => total(await rowsEverywhere(ws.tenant_id, target)) === 0,
    120_000,
    250,
  );
  const after = await rowsEverywhere(ws.tenant_id, target);
  t.same(
    Object.entries(after).filter(([, n]) => n > 0),
    [],
    'every table of both stores is empty of the customer',
  );
  const otherAfter = await rowsEverywhere(ws.tenant_id, other);
  otherBefore['clickhouse.events'] += 10;
  t.same(
    otherAfter,
    { ...otherBefore, ...pick(otherAfter, /usage_daily|batch/) },
    'the other customer keeps every row',
  );
  t.equal(otherAfter['clickhouse.events'], BIG + 10, 'its events included the late ones');

  const dropped = () => metric(processors.url, 'writer_erased_rows_dropped_total', { table: 'events' });
  // The writer counts the rows it dropped once the batch is acknowledged, just after the other
  // rows are queryable: the count is awaited, then must be exact.
  const droppedReach = (n: number) => waitFor(`${n} rows dropped`, async () => (await dropped()) >= n, 10_000, 100);
  await droppedReach(10);
  t.equal(await dropped(), 10, "the customer's ten events still in the stream were dropped by the writer");
  const counted = (await c.get(`/v1/erasures/${target}`)).body.rows_removed.clickhouse.tables.events;
  t.equal(counted, BIG, 'the erasure counted every event stored, none twice');

  // A message of the erased customer and the other one reaching the writer after the erasure (a
  // redelivery, a late publish): the other's row lands, the erased customer's never does.
  const js = nc.jetstream();
  const row = (customer_id: string) => ({
    tenant_id: ws.tenant_id,
    customer_id,
    event_name: 'resurrected',
    ts: Math.floor(Date.now() / 1000),
    ts_ms: 0,
    event_id: uuidv7(),
    received_at: Math.floor(Date.now() / 1000),
    surface: 'api',
  });
  const id = uuidv7();
  const h = (await import('nats')).headers();
  h.set('Cs-Rows', '2');
  const rows = [target, other].map((customer) => JSON.stringify({ ...row(customer), batch_id: id }));
  await js.publish(`ev.usage.${ws.tenant_id}`, new TextEncoder().encode(rows.join(',')), { msgID: id, headers: h });
  await waitFor(
    "the other customer's row landed",
    async () => (await rowsEverywhere(ws.tenant_id, other))['clickhouse.events'] === BIG + 11,
    60_000,
    200,
  );
  await droppedReach(11);
  t.equal(await dropped(), 11, "the erased customer's row dropped");
  t.equal(total(await rowsEverywhere(ws.tenant_id, target)), 0, 'no row of the customer is left');

  const done = await c.get(`/v1/erasures/${target}`);
  t.equal(done.body.status, 'completed');
  t.equal(done.body.rows_removed.clickhouse.tables.events, counted, 'the record unchanged');
  t.ok(done.body.rows_removed.clickhouse.tables.usage_daily > 0, 'rollup rows removed');
  for (const table of [
    'contacts',
    'tasks',
    'alerts',
    'customer_health',
    'event_dedup',
    'event_outbox',
    'idempotency_keys',
  ])
    t.ok(done.body.rows_removed.postgres.tables[table] >= 1, `postgres ${table} counted`);
  const text = JSON.stringify(done.body);
  for (const personal of ['cust-000001', 'Customer', 'Jane', 'example'])
    t.notOk(text.includes(personal), `the record holds no "${personal}"`);
  const list = await c.get('/v1/erasures?status=completed');
  t.equal(list.status, 200);
  t.same(
    list.body.data.map((e: { customer_id: string }) => e.customer_id),
    [target],
    'the list shows it',
  );
});

const pick = (r: Record<string, number>, re: RegExp) =>
  Object.fromEntries(Object.entries(r).filter(([k]) => re.test(k)));

t.test('an erasure survives a SIGKILL of the processors and resumes where it was', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 2);
  const [target, other] = await customerIds(ws.tenant_id);
  const N = 200_000;
  await Promise.all([fill(ws.tenant_id, target, 'cust-000001', N), fill(ws.tenant_id, other, 'cust-000002', N)]);
  const nats = await privateJetStream(t);
  const api = await startApi(t, nats.env);
  const c = client(api.url, ws.api_key);
  t.equal((await c.del(`/v1/customers/${target}?hard=true`)).status, 204);
  const env = { ERASURE_TENANTS: ws.tenant_id, ERASURE_POLL_MS: '50', ERASURE_LEASE_TTL_MS: '2000', ...nats.env };
  const first = await startTier(t, 'processors', env);
  await waitFor(
    'mutations issued',
    async () => Object.keys((await erasure(ws.tenant_id, target)).pending ?? {}).length > 0,
    60_000,
    20,
  );
  await first.stop('SIGKILL');
  t.equal((await erasure(ws.tenant_id, target)).status, 'running', 'killed while running');
  await startTier(t, 'processors', env);
  await waitFor(
    'the erasure completed',
    async () => (await erasure(ws.tenant_id, target)).status === 'completed',
    120_000,
    100,
  );
  t.equal(total(await rowsEverywhere(ws.tenant_id, target)), 0, 'no row of the customer is left');
  const done = await c.get(`/v1/erasures/${target}`);
  t.equal(done.body.rows_removed.clickhouse.tables.events, N, 'every event counted once');
  t.equal(done.body.rows_removed.clickhouse.tables.billing_events, 100);
  t.equal((await rowsEverywhere(ws.tenant_id, other))['clickhouse.events'], N, 'the other customer keeps its events');
  t.equal((await c.get(`/v1/erasures/${other}`)).status, 404, 'a customer never removed has no erasure');
  const intruder = await bootstrap();
  t.equal(
    (await client(api.url, intruder.api_key).get(`/v1/erasures/${target}`)).status,
    404,
    "another workspace's id: 404",
  );
});
