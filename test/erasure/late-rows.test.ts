import t from '#tap';
import { connect, headers, type JetStreamClient } from 'nats';
import { uuidv7 } from '../../lib/ids.js';
import { client, startApi } from '../core-api/_helpers.js';
import { bootstrap, ch, closeDb, db, privateJetStream, seed, startTier, waitFor } from '../helpers/stack.js';

/**
 * Rows of an erased customer that land after its erasure (a message still in the stream, a
 * redelivery) go again within about ERASURE_SWEEP_MS of landing, at whatever moment they land:
 * right after a sweep of the workspace, or while another processors instance still holds the
 * erasure (past its last count, before its completion). The full sweep is left at its default
 * (10 minutes), far beyond every wait here: only the writer's report can bring a row back to the
 * eraser in time. Runs on a JetStream of its own: the rows go through its processors' writer.
 */
t.teardown(closeDb);

const SWEEP_MS = 1000;
/** A sweep after the throttle, then a run: settle, count, mutate, settle, count (a mutation rewrites the table). */
const ERASED_WITHIN_MS = 60_000;

async function customerIds(tenantId: string): Promise<string[]> {
  const rows = await db()<Array<{ id: string }>>`
    SELECT id::text FROM customers WHERE tenant_id = ${tenantId} ORDER BY external_id`;
  return rows.map((r) => r.id);
}

async function rowsOf(tenantId: string, customerId: string): Promise<number> {
  const [r] = await ch<{ n: string }>(
    `SELECT count() AS n FROM csp.events WHERE tenant_id = toUUID('${tenantId}') AND customer_id = toUUID('${customerId}')`,
  );
  return Number(r.n);
}

/** One message of usage rows, as the ingest tier publishes it: one row per customer named. */
async function land(js: JetStreamClient, tenantId: string, customerIds: string[]): Promise<void> {
  const now = Math.floor(Date.now() / 1000);
  const id = uuidv7();
  const rows = customerIds.map((customer_id) =>
    JSON.stringify({
      tenant_id: tenantId,
      customer_id,
      event_name: 'resurrected',
      ts: now,
      ts_ms: 0,
      event_id: uuidv7(),
      received_at: now,
      surface: 'api',
      batch_id: id,
    }),
  );
  const h = headers();
  h.set('Cs-Rows', String(rows.length));
  await js.publish(`ev.usage.${tenantId}`, new TextEncoder().encode(rows.join(',')), { msgID: id, headers: h });
}

t.test('late rows of erased customers go again, counted, whenever they land', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 2);
  const [held, free] = await customerIds(ws.tenant_id);
  const nats = await privateJetStream(t);
  const api = await startApi(t, nats.env);
  const c = client(api.url, ws.api_key);
  await startTier(t, 'processors', {
    ERASURE_TENANTS: ws.tenant_id,
    ERASURE_POLL_MS: '50',
    ERASURE_SWEEP_MS: String(SWEEP_MS),
    ERASURE_FULL_SWEEP_MS: '600000',
    WRITER_BATCH_MS: '50',
    ...nats.env,
  });
  const nc = await connect({ servers: nats.url });
  t.teardown(() => nc.close());
  const js = nc.jetstream();

  const record = async (id: string) => {
    const r = await c.get(`/v1/erasures/${id}`);
    return { status: r.body.status as string, events: Number(r.body.rows_removed?.clickhouse?.tables?.events ?? 0) };
  };
  /** Waits for the erasure to have removed `events` events in all and no row of the customer to be left. */
  const erasedAgain = async (id: string, events: number, what: string) => {
    const t0 = performance.now();
    await waitFor(
      what,
      async () => {
        const r = await record(id);
        return r.status === 'completed' && r.events >= events && (await rowsOf(ws.tenant_id, id)) === 0;
      },
      ERASED_WITHIN_MS,
      100,
    );
    return Math.round(performance.now() - t0);
  };

  for (const id of [held, free]) t.equal((await c.del(`/v1/customers/${id}?hard=true`)).status, 204);
  for (const id of [held, free])
    await waitFor('the erasure completed', async () => (await record(id)).status === 'completed', 60_000, 100);

  // Each row lands the moment the previous one went: right after the sweep that found it, when the
  // workspace may not be counted again for ERASURE_SWEEP_MS. The report must outlive that wait.
  for (let i = 1; i <= 3; i++) {
    const before = (await record(free)).events;
    await land(js, ws.tenant_id, [free]);
    const ms = await erasedAgain(free, before + 1, `late row ${i} landed and went again`);
    t.equal((await record(free)).events, before + 1, `late row ${i} counted once (${ms} ms after it was published)`);
  }

  // Another instance holds the erasure of `held`, past its last count: it completes without seeing a
  // row that lands now. A sweep of the workspace comes and goes meanwhile (it erases `free`'s row of
  // the same message); the report of `held`'s row must survive it.
  const [{ n }] = await db()<[{ n: number }]>`
    UPDATE erasures SET status = 'running', holder = 'another-instance',
      lease_expires_at = now() + interval '1 hour'
    WHERE tenant_id = ${ws.tenant_id} AND customer_id = ${held} AND status = 'completed'
    RETURNING 1 AS n`;
  t.equal(n, 1, 'the erasure is held by another instance');
  const heldBefore = (await record(held)).events;
  const freeBefore = (await record(free)).events;
  await land(js, ws.tenant_id, [held, free]);
  await erasedAgain(free, freeBefore + 1, 'the workspace was swept after the message landed');
  t.equal(await rowsOf(ws.tenant_id, held), 1, 'the row of the held erasure is left to it');
  t.equal((await record(held)).status, 'running');
  await db()`
    UPDATE erasures SET status = 'completed', completed_at = now(), holder = NULL, lease_expires_at = '-infinity'
    WHERE tenant_id = ${ws.tenant_id} AND customer_id = ${held} AND holder = 'another-instance'`;
  const ms = await erasedAgain(held, heldBefore + 1, 'the row that landed before the other instance completed went');
  t.equal((await record(held)).events, heldBefore + 1, `counted once (${ms} ms after the other instance completed)`);
});
