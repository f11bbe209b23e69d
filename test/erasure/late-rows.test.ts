import t from '#tap';
import { connect, headers, type JetStreamClient, type NatsConnection } from 'nats';
import { uuidv7 } from '../../lib/ids.js';
import { subjects } from '../../lib/nats.js';
import { EVENT_ROW_COLUMNS, FORMAT_HEADER, ROW_FORMAT, RowBinaryWriter } from '../../lib/row-binary.js';
import { client, startApi } from '../core-api/_helpers.js';
import { metric } from '../helpers/observe.js';
import { sampleEventRow } from '../helpers/rows.js';
import { bootstrap, ch, closeDb, db, privateJetStream, seed, startTier, waitFor } from '../helpers/stack.js';

/**
 * Rows of an erased customer that reach the writer after its erasure (a message still in the
 * stream, a redelivery, an ingest tier whose cache still knew the customer) are dropped before the
 * insert: they are never readable, and the erasure record stays completed. A row the writer stored
 * before its processors knew of the erasure (here: a purge, which core-api does not announce, with
 * the list's refresh pushed out of the test's reach) is removed by the sweep once the list learns
 * of it, and counted. Runs on a JetStream of its own: the rows go through its processors' writer.
 */
t.teardown(closeDb);

const SWEEP_MS = 1000;
/** A sweep, then a run: settle, count, mutate, settle, count (a mutation rewrites the table). */
const ERASED_WITHIN_MS = 60_000;

const ws = await bootstrap();
await seed(ws.tenant_id, 5);
const [gone, alsoGone, purged, kept, trashed] = (
  await db()<Array<{ id: string }>>`
    SELECT id::text FROM customers WHERE tenant_id = ${ws.tenant_id} ORDER BY external_id`
).map((r) => r.id);
const nats = await privateJetStream(t);
const api = await startApi(t, nats.env);
const c = client(api.url, ws.api_key);
const processors = await startTier(t, 'processors', {
  ERASURE_TENANTS: ws.tenant_id,
  ERASURE_POLL_MS: '50',
  ERASURE_SWEEP_MS: String(SWEEP_MS),
  ERASURE_FULL_SWEEP_MS: '600000',
  // Only the load at start and core-api's announcements refresh the list of erased customers.
  ERASURE_FILTER_REFRESH_MS: '600000',
  WRITER_BATCH_MS: '50',
  ...nats.env,
});
const nc: NatsConnection = await connect({ servers: nats.url });
t.teardown(() => nc.close());
const js = nc.jetstream();

async function rowsOf(customerId: string): Promise<number> {
  const [r] = await ch<{ n: string }>(
    `SELECT count() AS n FROM csp.events
     WHERE tenant_id = toUUID('${ws.tenant_id}') AND customer_id = toUUID('${customerId}')`,
  );
  return Number(r.n);
}

/** One message of usage rows as the ingest tier publishes it (RowBinary): one row per customer named. */
async function publish(js: JetStreamClient, customerIds: string[]): Promise<void> {
  const batch = uuidv7();
  const w = new RowBinaryWriter(1024);
  for (const customer_id of customerIds)
    w.row(
      EVENT_ROW_COLUMNS,
      sampleEventRow(0, {
        tenant_id: ws.tenant_id,
        customer_id,
        event_name: 'late',
        ts: Math.floor(Date.now() / 1000),
        event_id: uuidv7(),
        batch_id: batch,
      }),
    );
  const h = headers();
  h.set('Cs-Rows', String(customerIds.length));
  h.set(FORMAT_HEADER, ROW_FORMAT);
  await js.publish(subjects.usage(ws.tenant_id), w.take(), { msgID: batch, headers: h });
}

const record = async (id: string) => {
  const r = await c.get(`/v1/erasures/${id}`);
  return { status: r.body.status as string, events: Number(r.body.rows_removed?.clickhouse?.tables?.events ?? 0) };
};
const completed = (id: string) =>
  waitFor('the erasure completed', async () => (await record(id)).status === 'completed', 60_000, 100);

t.test('rows of erased customers published after the erasure are never readable', async (t) => {
  for (const id of [gone, alsoGone]) t.equal((await c.del(`/v1/customers/${id}?hard=true`)).status, 204);
  for (const id of [gone, alsoGone]) await completed(id);
  const before = { gone: await record(gone), alsoGone: await record(alsoGone) };

  // Messages mixing erased and kept customers, one after the other, ClickHouse read while each is
  // written; then one with only erased customers' rows.
  const seen = { rows: 0, looks: 0, notCompleted: 0 };
  for (let i = 1; i <= 5; i++) {
    await publish(js, [gone, kept, alsoGone]);
    await waitFor(
      `the kept customer's row ${i} readable`,
      async () => {
        seen.looks++;
        seen.rows += (await rowsOf(gone)) + (await rowsOf(alsoGone));
        for (const id of [gone, alsoGone]) if ((await record(id)).status !== 'completed') seen.notCompleted++;
        return (await rowsOf(kept)) === i;
      },
      30_000,
      10,
    );
  }
  t.equal(seen.rows, 0, `no row of an erased customer was ever readable (${seen.looks} looks while they were written)`);
  t.equal(seen.notCompleted, 0, 'the erasure records stayed completed throughout');
  await publish(js, [alsoGone, gone]);
  await waitFor(
    'the message of erased customers only dropped whole',
    async () => (await metric(processors.url, 'writer_erased_rows_dropped_total', { table: 'events' })) === 12,
    30_000,
  );
  t.equal((await rowsOf(gone)) + (await rowsOf(alsoGone)), 0, 'none of its rows readable');
  t.same({ gone: await record(gone), alsoGone: await record(alsoGone) }, before, 'the records unchanged');
});

t.test('a row stored before the processors knew of the erasure is removed by the sweep, and counted', async (t) => {
  // The 30-day purge removes customers in one statement and announces nothing.
  await db()`SELECT remove_customers(ARRAY[${purged}]::uuid[], 'trash_purge')`;
  await completed(purged);
  const before = (await record(purged)).events;
  await publish(js, [purged]);
  await waitFor('the row stored: the writer did not know yet', async () => (await rowsOf(purged)) === 1, 30_000);

  // Another customer moved to the trash is announced: the list is read again and learns of the
  // purge, and the workspace is swept.
  t.equal((await c.del(`/v1/customers/${trashed}`)).status, 204);
  const t0 = performance.now();
  await waitFor(
    'the late row removed',
    async () => {
      const r = await record(purged);
      return r.status === 'completed' && r.events === before + 1 && (await rowsOf(purged)) === 0;
    },
    ERASED_WITHIN_MS,
    100,
  );
  t.pass(`removed and counted once, ${Math.round(performance.now() - t0)} ms after the list learned of it`);

  // From now on the writer drops its rows.
  const dropped = await metric(processors.url, 'writer_erased_rows_dropped_total', { table: 'events' });
  await publish(js, [purged, kept]);
  await waitFor('the next message written', async () => (await rowsOf(kept)) === 6, 30_000, 20);
  t.equal(await rowsOf(purged), 0, 'a later row of the customer is dropped');
  // Counted once the message is acknowledged, a moment after its kept row is readable.
  const counted = await waitFor(
    'the dropped row counted',
    async () => {
      const n = await metric(processors.url, 'writer_erased_rows_dropped_total', { table: 'events' });
      return n > dropped && n;
    },
    10_000,
    20,
  );
  t.equal(counted, dropped + 1, 'the dropped row counted once');
  t.same(await record(purged), { status: 'completed', events: before + 1 });
});
