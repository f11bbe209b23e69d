import { connect, type JetStreamManager } from 'nats';
import t, { type Test } from '#tap';
import { STREAM_EVENTS, subjects } from '../../lib/nats.js';
import { bootstrap, ch, post, privateJetStream, seed, startTier, urls, waitFor } from '../helpers/stack.js';
import { rollupsAndDirect } from './rollups.js';
import { messageRows } from '../ingest/support.js';
import { FORMAT_HEADER } from '../../lib/row-binary.js';

const DAY = 86_400_000;

/**
 * A request's message is in the stream and some of its rows are already in ClickHouse, as an
 * earlier delivery would have left them: an insert cut off between partitions (partly stored),
 * or a complete insert whose acknowledgement a crashed nats-server forgot (fully stored, then
 * delivered again as new). Rows are put there through ClickHouse itself, so the views see them
 * as they would have seen the earlier insert.
 */
async function storedRequest(t: Test, keep: (row: { ts: number }) => boolean) {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 5);
  // A JetStream of its own: no other file's writer takes the message before the rows are put there.
  const nats = await privateJetStream(t);
  const nc = await connect({ servers: nats.url });
  t.teardown(() => nc.close());
  const jsm: JetStreamManager = await nc.jetstreamManager();
  const ingest = await startTier(t, 'ingest', { INGEST_PROCESSES: '1', ...nats.env });
  // Rows on three days (and often two monthly partitions) in one request.
  const now = Date.now();
  const stamps = [now - 25 * DAY, now - 12 * DAY, now - 1000];
  const events = Array.from({ length: 30 }, (_, i) => ({
    event_name: ['login', 'report_exported', 'page_view'][i % 3],
    external_customer_id: `cust-00000${(i % 5) + 1}`,
    user_id: `u${i % 4}`,
    timestamp: new Date(stamps[i % 3]).toISOString(),
    properties: { i },
  }));
  const res = await post(`${ingest.url}/v1/ingest/events`, { events }, { 'x-api-key': ws.ingestion_key });
  t.equal(res.status, 202);
  await ingest.stop();
  const msg = await jsm.streams.getMessage(STREAM_EVENTS, { last_by_subj: subjects.usage(ws.tenant_id) });
  const rows = messageRows(msg.subject, msg.header.get(FORMAT_HEADER), msg.data) as Array<{
    ts: number;
    event_id: string;
  }>;
  const earlier = rows.filter(keep);
  const ins = await fetch(
    `${urls.CLICKHOUSE_URL}/?query=${encodeURIComponent('INSERT INTO csp.events FORMAT JSONEachRow')}`,
    {
      method: 'POST',
      body: earlier.map((r) => JSON.stringify(r)).join('\n'),
    },
  );
  t.ok(ins.ok, `earlier delivery's ${earlier.length} of ${rows.length} rows stored`);
  return { ws, rows, batch: res.headers.get('x-trace-id')!, nats: nats.env };
}

async function expectExactlyOnce(t: Test, tenant: string, batch: string, total: number, nats: { NATS_URL: string }) {
  const proc = await startTier(t, 'processors', { WRITER_BATCH_MS: '20', ...nats });
  const q = `SELECT count() AS c, uniqExact(event_id) AS u FROM events WHERE tenant_id = '${tenant}'`;
  await waitFor(
    'the message handled',
    async () => {
      const info = await fetch(`${proc.url}/readyz`).then((r) => r.json() as Promise<{ held: number[] }>);
      const [s] = await ch<{ c: string }>(q);
      return Number(s.c) >= total && info.held.every((h) => h === 0);
    },
    60_000,
    200,
  );
  const [s] = await ch<{ c: string; u: string }>(q);
  t.equal(Number(s.c), total, 'every row of the request stored');
  t.equal(Number(s.u), total, 'no row stored twice');
  const [ledger] = await ch<{ n: string }>(`SELECT sum(rows) AS n FROM batch_ledger WHERE batch_id = '${batch}'`);
  t.equal(Number(ledger.n), total, 'the batch ledger counts each row once');
  const { rollup, direct } = await rollupsAndDirect(tenant);
  t.same(rollup, direct, 'the daily rollups equal a direct aggregation of the stored events');
}

t.test('a partly stored message is completed with its missing rows only; rollups stay exact', async (t) => {
  const cut = Date.now() - 6 * DAY;
  const { ws, rows, batch, nats } = await storedRequest(t, (r) => r.ts * 1000 < cut);
  t.ok(
    rows.some((r) => r.ts * 1000 >= cut),
    'some rows were missing',
  );
  await expectExactlyOnce(t, ws.tenant_id, batch, rows.length, nats);
});

t.test('a fully stored message delivered again as new is acknowledged without a second insert', async (t) => {
  const { ws, rows, batch, nats } = await storedRequest(t, () => true);
  await expectExactlyOnce(t, ws.tenant_id, batch, rows.length, nats);
});
