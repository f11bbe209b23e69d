import { connect, DiscardPolicy, StorageType } from 'nats';
import t from '#tap';
import { randomUUID } from 'node:crypto';
import { uuidv7 } from '../../lib/ids.js';
import { createLogger } from '../../lib/logger.js';
import { connectPg } from '../../lib/pg.js';
import { SharedRateLimiter } from '../../lib/rate-limit.js';
import { columnsOf, decodeRows, ROW_BINARY_V2 } from '../../lib/row-binary.js';
import { Publisher } from '../../ingest/publisher.js';
import { DailyQuota, parseQuotas } from '../../ingest/quota.js';
import type { PreparedB } from '../../ingest/surface-b/events.js';
import { SurfaceBStore, type StoreRequest, type StoreResult } from '../../ingest/surface-b/store.js';
import { preparedRows, sampleEventRow } from '../helpers/rows.js';
import { bootstrap, closeDb, privateNats, urls, waitFor } from '../helpers/stack.js';

// Surface B's deduplication reservations (ingest/surface-b/dedup.ts), against the test stack's
// PostgreSQL and a JetStream of the test's own: requests that share keys with a request still
// publishing wait for its outcome (not for its transaction), take over the keys of one that
// failed or died, and store every event exactly once.
const { url } = await privateNats(t, { jetstream: true });
const nc = await connect({ servers: url });
t.teardown(() => nc.close());
await (await nc.jetstreamManager()).streams.add({
  name: 'RES',
  subjects: ['res.>'],
  storage: StorageType.File,
  discard: DiscardPolicy.New,
});
t.teardown(closeDb);
const sql = connectPg(urls.DATABASE_URL, 8);
t.teardown(() => sql.end({ timeout: 5 }));

const columns = columnsOf(ROW_BINARY_V2, 'events');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The real publisher, with a delay before chosen publishes; records what each stored message holds. */
class SlowPublisher extends Publisher {
  readonly delays = new Map<string, number>();
  readonly stored = new Map<string, string[]>();
  override async publish(subject: string, payload: Uint8Array, msgId: string, meta: Record<string, string>) {
    await sleep(this.delays.get(msgId) ?? 0);
    // Read before the publish: once acknowledged, the payload's buffer serves the next request.
    const ids = decodeRows(payload, columns).map((r) => String(r.external_id));
    await super.publish(subject, payload, msgId, meta);
    this.stored.set(msgId, ids);
  }
}

const publisher = new SlowPublisher(nc, 200, 400);
const quota = new DailyQuota(sql, new SharedRateLimiter(sql), parseQuotas('enterprise=unlimited'));
const newStore = (reservationMs: number) =>
  new SurfaceBStore(
    sql,
    publisher,
    quota,
    { maxPayloadBytes: 1 << 20, idempotencyWaitMs: 2000, reservationMs, dedupAt: 'request' },
    createLogger('test', 'silent'),
  );
const store = newStore(30_000);
await store.listen();

// A real workspace: Idempotency-Key records reference it.
const tenantId = (await bootstrap()).tenant_id;
const customer = randomUUID();

/** A request of one event per external id, all of one customer; `subject` outside the stream makes its publish fail. */
function request(externalIds: string[], subject = `res.${tenantId}`): StoreRequest {
  const batchId = uuidv7();
  const rows = externalIds.map((x, i) =>
    sampleEventRow(i, {
      tenant_id: tenantId,
      customer_id: customer,
      event_id: uuidv7(),
      batch_id: batchId,
      surface: 'b',
      external_id: x,
    }),
  );
  const prepared: PreparedB = {
    accepted: rows.length,
    errors: [],
    ...preparedRows(rows),
    rowKey: Int32Array.from(rows.keys()),
    keyCustomers: externalIds.map(() => customer),
    keyExternal: externalIds,
    inBatchDuplicates: 0,
  };
  return {
    tenantId,
    plan: 'enterprise',
    subject,
    msgId: batchId,
    prepared,
    answer: { status: 200, body: Buffer.from('{}'), headers: [] },
  };
}

const ids = (prefix: string, from: number, to: number) =>
  Array.from({ length: to - from }, (_, i) => `${prefix}-${from + i}`);
const owners = (externalIds: string[]) =>
  sql<{ external_id: string; batch_id: string | null }[]>`
    SELECT external_id, batch_id::text FROM event_dedup
    WHERE tenant_id = ${tenantId} AND customer_id = ${customer} AND external_id = ANY(${externalIds})`;
const reservations = async (batchIds: string[]) =>
  (await sql`SELECT 1 FROM event_dedup_pending WHERE batch_id = ANY(${batchIds}::uuid[])`).length;
/** Resolves once a request holds its keys (its reservation is there), so the next one finds them taken. */
const reserved = (batchId: string) =>
  waitFor('the reservation', async () => (await reservations([batchId])) === 1, 10_000, 5);
const timed = async (p: Promise<StoreResult>) => {
  const t0 = Date.now();
  const r = await p;
  return { ...r, at: Date.now(), took: Date.now() - t0 };
};

t.test(
  'a request sharing keys with one still publishing stores only its own, after that one is acknowledged',
  async (t) => {
    const first = request(ids('a', 0, 10));
    const second = request(ids('a', 5, 15));
    publisher.delays.set(first.msgId, 400);
    const p1 = timed(store.store(first));
    await reserved(first.msgId);
    const p2 = timed(store.store(second));
    const [r1, r2] = await Promise.all([p1, p2]);
    t.equal(r1.stored, 10);
    t.equal(r2.stored, 5, 'the five shared events are the first request’s');
    t.ok(r2.at >= r1.at, 'the second answers once the first is stored');
    t.same(publisher.stored.get(second.msgId), ids('a', 10, 15));
    t.equal(await reservations([first.msgId, second.msgId]), 0, 'both confirmed');
    const again = await timed(store.store(request(ids('a', 0, 15))));
    t.equal(again.stored, 0, 'every key is stored now');
    t.ok(again.took < 1000, `and nothing waits (${again.took} ms)`);
  },
);

t.test('keys another request holds while it publishes do not hold up requests that share none', async (t) => {
  const slow = request(ids('b', 0, 10));
  publisher.delays.set(slow.msgId, 600);
  const p1 = timed(store.store(slow));
  await reserved(slow.msgId);
  const other = await timed(store.store(request(ids('b', 10, 20))));
  t.equal(other.stored, 10);
  t.ok(other.took < 400, `answered in ${other.took} ms while the other publish still waits`);
  t.equal((await p1).stored, 10);
});

t.test('when the request holding shared keys fails to publish, the waiting one stores those events', async (t) => {
  const failing = request(ids('c', 0, 10), 'nowhere.res');
  const second = request(ids('c', 5, 15));
  publisher.delays.set(failing.msgId, 200);
  const p1 = store.store(failing).then(
    () => 'stored',
    (err: Error) => err.constructor.name,
  );
  await reserved(failing.msgId);
  const r2 = await store.store(second);
  t.equal(await p1, 'EventStoreUnavailable');
  t.equal(r2.stored, 10, 'the shared five and its own five');
  const rows = await owners(ids('c', 0, 15));
  t.same(rows.map((r) => r.external_id).sort(), ids('c', 5, 15).sort(), 'the failed request left no key behind');
  t.ok(
    rows.every((r) => r.batch_id === second.msgId),
    'the keys are the second request’s',
  );
  t.equal(await reservations([failing.msgId, second.msgId]), 0);
});

t.test('the keys of a request that died before confirming are taken over once its reservation expires', async (t) => {
  // A process killed between recording its keys and its PubAck leaves this behind.
  const dead = uuidv7();
  await sql`INSERT INTO event_dedup_pending (batch_id, tenant_id, expires_at) VALUES (${dead}, ${tenantId}, now() + interval '1 second')`;
  await sql`INSERT INTO event_dedup (tenant_id, customer_id, external_id, batch_id)
    SELECT ${tenantId}, ${customer}, x, ${dead} FROM unnest(${ids('d', 0, 3)}::text[]) AS x`;
  const r = await timed(store.store(request(ids('d', 0, 5))));
  t.equal(r.stored, 5, 'the dead request’s three and two new ones');
  t.ok(r.took >= 700, `it waited for the reservation to expire (${r.took} ms)`);
  t.ok((await owners(ids('d', 0, 5))).every((o) => o.batch_id !== dead));
  // Two requests racing for the same expired keys: one stores them, the other finds them stored.
  const gone = uuidv7();
  await sql`INSERT INTO event_dedup_pending (batch_id, tenant_id, expires_at) VALUES (${gone}, ${tenantId}, now() - interval '1 second')`;
  await sql`INSERT INTO event_dedup (tenant_id, customer_id, external_id, batch_id)
    SELECT ${tenantId}, ${customer}, x, ${gone} FROM unnest(${ids('e', 0, 20)}::text[]) AS x`;
  const [x, y] = await Promise.all([store.store(request(ids('e', 0, 20))), store.store(request(ids('e', 0, 20)))]);
  t.equal(x.stored + y.stored, 20, `each event once (${x.stored} + ${y.stored})`);
});

t.test('the sweep releases the keys of requests that died, and only theirs', async (t) => {
  const dead = uuidv7();
  const live = uuidv7();
  await sql`INSERT INTO event_dedup_pending (batch_id, tenant_id, expires_at) VALUES
    (${dead}, ${tenantId}, now() - interval '5 seconds'), (${live}, ${tenantId}, now() + interval '30 seconds')`;
  await sql`INSERT INTO event_dedup (tenant_id, customer_id, external_id, batch_id)
    SELECT ${tenantId}::uuid, ${customer}::uuid, x, ${dead}::uuid FROM unnest(${ids('s', 0, 4)}::text[]) AS x
    UNION ALL SELECT ${tenantId}::uuid, ${customer}::uuid, x, ${live}::uuid FROM unnest(${ids('s', 4, 8)}::text[]) AS x`;
  // A grace of one second: the dead reservation expired five seconds ago, the live one not at all.
  const sweeper = newStore(1000);
  t.ok((await sweeper.sweepExpired()) >= 1, 'the expired reservation is swept');
  t.equal(await reservations([dead]), 0, 'its reservation is gone');
  t.equal(await reservations([live]), 1, 'a live reservation stays');
  t.same(
    (await owners(ids('s', 0, 8))).map((o) => o.external_id).sort(),
    ids('s', 4, 8).sort(),
    'the dead request’s keys are gone, the live one’s stay',
  );
  const r = await store.store(request(ids('s', 0, 4)));
  t.equal(r.stored, 4, 'a retry of the dead request’s events stores them, without waiting for anything');
  await sql`DELETE FROM event_dedup_pending WHERE batch_id = ${live}`;
});

t.test('a request with an Idempotency-Key waits for the keys it shares, inside its transaction', async (t) => {
  const slow = request(ids('f', 0, 10));
  publisher.delays.set(slow.msgId, 300);
  const p1 = timed(store.store(slow));
  await reserved(slow.msgId);
  const keyed = { ...request(ids('f', 5, 15)) };
  keyed.idempotency = { scope: 'events', key: `k-${randomUUID()}`, hash: Buffer.alloc(32, 1) };
  const r2 = await timed(store.store(keyed));
  const r1 = await p1;
  t.equal(r1.stored + r2.stored, 15);
  t.equal(r2.stored, 5);
  t.ok(r2.at >= r1.at);
});

t.test(
  'a request that waited long renews its own reservation, so its keys are not taken over while it publishes',
  async (t) => {
    // Reservations of 1.5 s: the second request waits 1.2 s for the first, then publishes for 0.8 s.
    const short = newStore(1500);
    await short.listen();
    const first = request(ids('g', 0, 10));
    const second = request(ids('g', 5, 15));
    publisher.delays.set(first.msgId, 1200);
    publisher.delays.set(second.msgId, 800);
    const p1 = short.store(first);
    await reserved(first.msgId);
    const p2 = short.store(second);
    await sleep(1650);
    // Past the second's first expiry, while it still publishes: its keys must still be in flight.
    const third = await short.store(request(ids('g', 10, 15)));
    t.equal((await p1).stored, 10);
    t.equal((await p2).stored, 5);
    t.equal(third.stored, 0, 'the third waited for the second and found its events stored');
  },
);

t.test(
  'keys another transaction is inserting are waited for: stored once it commits, ours once it rolls back',
  async (t) => {
    // A request with an Idempotency-Key holds its keys as uncommitted rows until its PubAck.
    const holding = (externalIds: string[], outcome: 'commit' | 'rollback') =>
      sql
        .begin(async (tx) => {
          await tx`INSERT INTO event_dedup (tenant_id, customer_id, external_id, batch_id)
          SELECT ${tenantId}, ${customer}, x, ${uuidv7()} FROM unnest(${externalIds}::text[]) AS x`;
          await sleep(300);
          if (outcome === 'rollback') throw new Error('publish failed');
        })
        .catch(() => {});
    const committed = holding(ids('h', 0, 5), 'commit');
    await sleep(50);
    const r1 = await timed(store.store(request(ids('h', 0, 10))));
    await committed;
    t.equal(r1.stored, 5, 'the committed five are duplicates');
    t.ok(r1.took >= 200, `it waited for the transaction (${r1.took} ms)`);
    const rolledBack = holding(ids('i', 0, 5), 'rollback');
    await sleep(50);
    const r2 = await store.store(request(ids('i', 0, 10)));
    await rolledBack;
    t.equal(r2.stored, 10, 'nothing of the rolled-back transaction counts');
  },
);
