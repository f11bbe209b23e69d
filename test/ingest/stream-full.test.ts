import { connect } from 'nats';
import t from '#tap';
import { applyStreams } from '../../infra/streams.js';
import { STREAM_EVENTS } from '../../lib/nats.js';
import { closeDb, privateNats } from '../helpers/stack.js';
import { USAGE, batch, ingest, send, traceOf, workspace } from './support.js';

// The event stream refuses new messages once it holds its byte cap (discard new), so that nothing
// accepted is ever pushed out unconsumed. The client then gets 503 with Retry-After, and the
// request stores nothing. A JetStream of the test's own, with the stream capped at 64 KB.
t.teardown(closeDb);
const ws = await workspace(1);
const { url } = await privateNats(t, { jetstream: true });
const nc = await connect({ servers: url });
t.teardown(() => nc.close());
const jsm = await nc.jetstreamManager();
await applyStreams(jsm, { maxBytes: 64 * 1024, replicas: 1 });
const tier = await ingest(t, { NATS_URL: url });

t.test('a full event stream answers 503 with Retry-After and stores nothing of the request', async (t) => {
  let accepted = 0;
  let full: Awaited<ReturnType<typeof send>> | undefined;
  for (let i = 0; i < 100 && !full; i++) {
    const res = await send(tier.url, USAGE, batch(20, { properties: { pad: 'x'.repeat(400) } }), {
      key: ws.ingestion_key,
    });
    if (res.status === 202) accepted++;
    else full = res;
  }
  t.ok(accepted > 0, `${accepted} requests stored before the cap`);
  t.ok(full, 'the stream filled up');
  t.equal(full!.status, 503, full!.text);
  t.match(full!.headers.get('retry-after'), /^\d+$/, 'Retry-After in seconds');
  t.match(full!.body, { status: 503, title: String, detail: String });
  traceOf(t, full!);
  const info = await jsm.streams.info(STREAM_EVENTS);
  t.equal(info.state.messages, accepted, 'the stream holds exactly the acknowledged requests');
});
