import t from '#tap';
import { consumers } from '../../lib/nats.js';
import { jetstream, writersIdle } from '../helpers/observe.js';
import { ch, closeDb, db, privateJetStream, startTier, waitFor } from '../helpers/stack.js';
import { ev, expect200, ingest, postEvents, REQUEST_PATH, workspace, xid } from './support.js';

// Deduplication by (customer_id, external_id): forever, across requests and ingest processes, and
// inside one batch (the first copy wins). A silently ignored event counts as accepted.
t.teardown(closeDb);
const { ws, ids } = await workspace(2);
// A JetStream of its own: "everything published so far" is then this file's events only.
const nats = await privateJetStream(t);
// The request path's records in PostgreSQL (after the stream: events/stream-dedup).
const [a, b] = await Promise.all([
  ingest(t, { ...nats.env, ...REQUEST_PATH }),
  ingest(t, { ...nats.env, ...REQUEST_PATH }),
]);
await startTier(t, 'processors', nats.env);
const jsm = await jetstream(t, nats.url);
/** Everything published so far is in ClickHouse: a copy that got through would be there too. */
const allWritten = () => writersIdle(jsm, consumers.usageWriter, 'events');
const stored = async (externalIds: string[]) => {
  const list = externalIds.map((x) => `'${x}'`).join(',');
  return ch<{ customer_id: string; external_id: string; event_name: string }>(
    `SELECT toString(customer_id) AS customer_id, external_id, event_name FROM csp.events WHERE tenant_id = toUUID('${ws.tenant_id}') AND external_id IN (${list}) ORDER BY event_name`,
  );
};

t.test('copies inside one batch: the first is stored, the others ignored and counted as accepted', async (t) => {
  const x = xid();
  const res = await postEvents(a.url, ws.api_key, [
    ev(ids[0], { event_name: 'first', external_id: x }),
    ev(ids[0], { event_name: 'second', external_id: x }),
    ev(ids[1], { event_name: 'other_customer', external_id: x }),
  ]);
  expect200(t, res, 3);
  const rows = await waitFor('rows', async () => {
    const r = await stored([x]);
    return r.length >= 2 ? r : undefined;
  });
  await allWritten();
  t.same(
    (await stored([x])).map((r) => [r.customer_id, r.event_name]).sort(),
    [
      [ids[0], 'first'],
      [ids[1], 'other_customer'],
    ].sort(),
    'same external_id for another customer is another event',
  );
  t.equal(rows.length, 2);
});

t.test('a later request with a recorded external_id is ignored, however much later', async (t) => {
  const x = xid();
  expect200(t, await postEvents(a.url, ws.api_key, [ev(ids[0], { event_name: 'original', external_id: x })]), 1);
  // Far outside any time window: the key is in PostgreSQL for good.
  await db()`UPDATE event_dedup SET external_id = external_id WHERE tenant_id = ${ws.tenant_id} AND external_id = ${x}`;
  const again = await postEvents(b.url, ws.api_key, [
    ev(ids[0], { event_name: 'replayed', external_id: x }),
    ev(ids[0], { event_name: 'new_one', external_id: xid() }),
  ]);
  expect200(t, again, 2);
  const [{ n }] = await db()<
    { n: number }[]
  >`SELECT count(*)::int AS n FROM event_dedup WHERE tenant_id = ${ws.tenant_id} AND external_id = ${x}`;
  t.equal(n, 1);
  await waitFor(
    'both requests written',
    async () =>
      (await ch(`SELECT 1 FROM csp.events WHERE tenant_id = toUUID('${ws.tenant_id}') AND event_name = 'new_one'`))
        .length === 1,
  );
  t.same(
    (await stored([x])).map((r) => r.event_name),
    ['original'],
  );
});

t.test('events without external_id are never deduplicated', async (t) => {
  const res = await postEvents(a.url, ws.api_key, [
    ev(ids[0], { event_name: 'plain_twice' }),
    ev(ids[0], { event_name: 'plain_twice' }),
  ]);
  expect200(t, res, 2);
  await waitFor(
    'two rows',
    async () =>
      (await ch(`SELECT 1 FROM csp.events WHERE tenant_id = toUUID('${ws.tenant_id}') AND event_name = 'plain_twice'`))
        .length === 2,
  );
});

t.test('the same batch sent at once to two ingest processes is stored once', async (t) => {
  const xs = Array.from({ length: 300 }, xid);
  const batch = xs.map((x, i) => ev(ids[i % 2], { event_name: 'race', external_id: x }));
  const rounds = await Promise.all(
    Array.from({ length: 6 }, (_, i) =>
      postEvents(i % 2 ? a.url : b.url, ws.api_key, i % 3 ? batch : [...batch].reverse()),
    ),
  );
  for (const r of rounds) expect200(t, r, 300);
  await waitFor('300 rows', async () => (await stored(xs)).length >= 300);
  await allWritten();
  const rows = await stored(xs);
  t.equal(rows.length, 300, 'each external_id once');
  t.equal(new Set(rows.map((r) => r.external_id)).size, 300);
});
