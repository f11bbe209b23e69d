import t from '#tap';
import { usageBatch } from '../helpers/load.js';
import { bootstrap, post, seed, startTier } from '../helpers/stack.js';
import { natsClient, StreamTap } from './support.js';

t.test(
  'past its in-flight body budget a process answers 503 with Retry-After and stores nothing of those requests',
  async (t) => {
    const ws = await bootstrap();
    await seed(ws.tenant_id, 20);
    // A budget smaller than one body: only one request at a time is worked on.
    const ingest = await startTier(t, 'ingest', {
      INGEST_PROCESSES: '1',
      INGEST_MAX_INFLIGHT_BYTES: '1024',
      INGEST_RATE_LIMIT_PER_MIN: '100000',
    });
    // What the requests store in EVENTS, read back from the stream (no processor runs here).
    const tap = await StreamTap.open(t, await natsClient(t), `ev.usage.${ws.tenant_id}`);
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        post(`${ingest.url}/v1/ingest/events`, usageBatch(20, 20, i), { 'x-api-key': ws.ingestion_key }),
      ),
    );
    const busy = results.filter((r) => r.status === 503);
    const ok = results.filter((r) => r.status === 202);
    t.equal(ok.length + busy.length, 30, 'every answer is 202 or 503');
    t.ok(ok.length >= 1, `${ok.length} accepted`);
    t.ok(busy.length >= 1, `${busy.length} turned away`);
    for (const r of busy) {
      t.equal(r.headers.get('retry-after'), '1');
      t.match(r.body, { type: 'service_unavailable', status: 503 });
      t.ok(r.headers.get('x-trace-id'));
    }
    const trace = (r: { headers: Headers }) => r.headers.get('x-trace-id') ?? '';
    const batches = (await tap.drain()).map((m) => m.msgId);
    t.same(batches.sort(), ok.map(trace).sort(), 'one message per accepted request, none for the turned-away ones');
    t.notOk(
      busy.some((r) => batches.includes(trace(r))),
      'nothing of a turned-away request is in the stream',
    );
    // Once the burst is over, the same requests go through.
    const again = await post(`${ingest.url}/v1/ingest/events`, usageBatch(20, 20, 99), {
      'x-api-key': ws.ingestion_key,
    });
    t.equal(again.status, 202);
    t.same(
      (await tap.drain()).map((m) => m.rows.length),
      [20],
      'and is stored',
    );
  },
);
