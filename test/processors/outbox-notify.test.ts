import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import postgres, { type TransactionSql } from 'postgres';
import t from '#tap';
import { createLogger } from '../../lib/logger.js';
import { connectPg } from '../../lib/pg.js';
import { OutboxMetrics } from '../../processors/metrics.js';
import type { Sql } from '../../lib/pg.js';
import { OutboxRelay, type RelaySource } from '../../processors/outbox/relay.js';
import { closeDb, db, urls, waitFor } from '../helpers/stack.js';

// A drained outbox relay waits for PostgreSQL's notification that rows were written (migration
// 0089), not for its next poll, and polls when its LISTEN takes effect again after a loss. On a
// table of this file's own with the migration's trigger: the stack's outboxes are shared by every
// processors tier running beside this file, whose relays would take the rows first.
t.teardown(closeDb);
const table = `outbox_notify_${randomUUID().replaceAll('-', '')}`;
await db().unsafe(`
  CREATE TABLE ${table} (id uuid PRIMARY KEY, occurred_at timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz, unpublishable text);
  CREATE TRIGGER ${table}_notify AFTER INSERT ON ${table}
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();`);
t.teardown(() => db().unsafe(`DROP TABLE ${table}`));
const sql = connectPg(urls.DATABASE_URL, 2);
t.teardown(() => sql.end());

/** A source over the table of this file; counts its polls and what it published. */
function source() {
  const s = {
    table: table as RelaySource<{ id: string }>['table'],
    polls: 0,
    relayed: [] as string[],
    lock(tx: TransactionSql, batch: number, tenants: readonly string[]) {
      if (tenants.length) throw new Error('no workspace filter on this table');
      s.polls++;
      return tx<Array<{ id: string }>>`
        SELECT id::text FROM ${tx(table)} WHERE published_at IS NULL ORDER BY occurred_at LIMIT ${batch}
        FOR UPDATE SKIP LOCKED`;
    },
    async publish(r: { id: string }) {
      s.relayed.push(r.id);
    },
  };
  return s;
}

function relay(src: ReturnType<typeof source>, pollMs: number, on: Sql = sql) {
  const r = new OutboxRelay(on, src, createLogger('test', 'silent'), new OutboxMetrics(new Registry()), {
    pollMs,
    batch: 500,
    keepMs: 3_600_000,
    tenants: [],
  });
  r.start();
  t.teardown(() => r.stop());
  return r;
}

const insert = (id: string) => db().unsafe(`INSERT INTO ${table} (id) VALUES ($1)`, [id]);

t.test('rows written are relayed at once, not at the next poll', async (t) => {
  const src = source();
  const r = relay(src, 3_600_000);
  await waitFor('the first poll', () => src.polls === 1);
  const id = randomUUID();
  const t0 = Date.now();
  await insert(id);
  await waitFor('the row relayed', () => src.relayed.includes(id), 30_000, 20);
  t.ok(Date.now() - t0 < 30_000, `relayed ${Date.now() - t0} ms after its commit; the next poll was due in an hour`);
  t.equal(src.polls, 2, 'one poll, woken by the notification');

  // A statement that inserts nothing notifies nobody (the webhook triggers run such statements).
  await db().unsafe(`INSERT INTO ${table} (id) SELECT $1::uuid WHERE false`, [randomUUID()]);
  // Another table's notification wakes only its own relay.
  await db()`SELECT pg_notify('outbox', 'another_outbox')`;
  await new Promise((resolve) => setTimeout(resolve, 1000));
  t.equal(src.polls, 2, 'no poll for an insert of no rows, nor for another table');

  const stopped = Date.now();
  await r.stop();
  t.ok(Date.now() - stopped < 5000, 'stop() ends the wait at once');
});

t.test('a row notified while the LISTEN was lost is relayed once it is back, not at the next poll', async (t) => {
  // A pool of its own, named, so that only its LISTEN connection is ended (postgres.js listens on a
  // connection of its own per pool, with the pool's settings).
  const app = `outbox-notify-${randomUUID()}`;
  const own = postgres(urls.DATABASE_URL, { max: 2, connection: { application_name: app }, onnotice: () => {} });
  const src = source();
  const r = relay(src, 3_600_000, own);
  t.teardown(async () => {
    await r.stop();
    await own.end();
  });
  await waitFor('the first poll', () => src.polls === 1);
  const id = randomUUID();
  // PostgreSQL ends the relay's LISTEN connection in the transaction that writes the row: at commit
  // nobody listens (postgres.js subscribes again some milliseconds later), the notification is lost.
  await db().begin(async (tx) => {
    await tx.unsafe(`INSERT INTO ${table} (id) VALUES ($1)`, [id]);
    const [{ ended }] = await tx<Array<{ ended: number }>>`
      SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS ended FROM pg_stat_activity
      WHERE application_name = ${app} AND query ILIKE 'listen%'`;
    t.equal(ended, 1, "the relay's LISTEN connection ended");
  });
  const t0 = Date.now();
  await waitFor('the row relayed', () => src.relayed.includes(id), 30_000, 20);
  const ms = Date.now() - t0;
  t.ok(ms < 30_000, `relayed ${ms} ms after its commit, when it listened again; the next poll was due in an hour`);
});

t.test('a row written without a notification is relayed by the next poll', async (t) => {
  const src = source();
  relay(src, 500);
  await waitFor('the first poll', () => src.polls >= 1);
  const id = randomUUID();
  // Triggers off for this transaction: as if the notification was lost.
  await db().begin(async (tx) => {
    await tx`SET LOCAL session_replication_role = replica`;
    await tx.unsafe(`INSERT INTO ${table} (id) VALUES ($1)`, [id]);
  });
  const published = async () =>
    (await db().unsafe(`SELECT published_at FROM ${table} WHERE id = $1`, [id]))[0].published_at ?? undefined;
  await waitFor('the row relayed and marked published', published, 30_000, 50);
  t.ok(src.relayed.includes(id), 'relayed');
});

t.test("the stack's outboxes notify", async (t) => {
  const rows = await db()<Array<{ table: string; trigger: string }>>`
    SELECT tgrelid::regclass::text AS table, tgname AS trigger FROM pg_trigger
    WHERE tgname IN ('event_outbox_notify', 'webhook_outbox_notify') ORDER BY 1`;
  t.same(rows, [
    { table: 'event_outbox', trigger: 'event_outbox_notify' },
    { table: 'webhook_outbox', trigger: 'webhook_outbox_notify' },
  ]);
});
