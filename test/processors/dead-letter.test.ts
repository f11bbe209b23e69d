import t from '#tap';
import { connect, headers } from 'nats';
import { uuidv7 } from '../../lib/ids.js';
import { bootstrap, ch, post, privateJetStream, seed, startTier, waitFor } from '../helpers/stack.js';

t.test(
  'a message ClickHouse can never take goes to the dead-letter subject with its reason; the rest of its batch lands',
  async (t) => {
    const ws = await bootstrap();
    await seed(ws.tenant_id, 10);
    // A JetStream of its own: no other file's writer takes the messages before this one starts.
    const nats = await privateJetStream(t);
    const ingest = await startTier(t, 'ingest', { INGEST_PROCESSES: '1', ...nats.env });
    const nc = await connect({ servers: nats.url });
    t.teardown(() => nc.close());
    const js = nc.jetstream();

    // Hold the writer back so the poison message and good ones share one insert.
    const good1 = await post(
      `${ingest.url}/v1/ingest/events`,
      { events: [{ event_name: 'login', external_customer_id: 'cust-000001' }] },
      { 'x-api-key': ws.ingestion_key },
    );
    t.equal(good1.status, 202);
    const poisonId = uuidv7();
    const h = headers();
    h.set('Cs-Rows', '1');
    await js.publish(
      `ev.usage.${ws.tenant_id}`,
      new TextEncoder().encode('{"tenant_id":"not-a-uuid","bogus_column":1}'),
      { msgID: poisonId, headers: h },
    );
    const good2 = await post(
      `${ingest.url}/v1/ingest/events`,
      { events: [{ event_name: 'logout', external_customer_id: 'cust-000002' }] },
      { 'x-api-key': ws.ingestion_key },
    );
    t.equal(good2.status, 202);

    const dlq = await (await nc.jetstreamManager()).streams.info('DLQ');
    const before = dlq.state.messages;
    await startTier(t, 'processors', { WRITER_BATCH_MS: '300', ...nats.env });

    await waitFor(
      'good events stored',
      async () =>
        Number(
          (await ch<{ c: string }>(`SELECT count() AS c FROM events WHERE tenant_id = '${ws.tenant_id}'`))[0].c,
        ) === 2,
      30_000,
    );
    const names = (
      await ch<{ event_name: string }>(
        `SELECT event_name FROM events WHERE tenant_id = '${ws.tenant_id}' ORDER BY event_name`,
      )
    ).map((r) => r.event_name);
    t.same(names, ['login', 'logout'], 'both good requests stored, the poison row not');

    const jsm = await nc.jetstreamManager();
    const msg = await waitFor(
      'dead letter',
      async () => {
        const info = await jsm.streams.info('DLQ');
        if (info.state.messages <= before) return undefined;
        return jsm.streams
          .getMessage('DLQ', { last_by_subj: `dlq.clickhouse-writer-usage.ev.usage.${ws.tenant_id}` })
          .catch(() => undefined);
      },
      30_000,
    );
    t.equal(msg.header.get('Cs-Original-Msg-Id'), poisonId, 'the original message id is kept');
    t.match(
      msg.header.get('Cs-Dlq-Reason'),
      /unknown column "bogus_column"|tenant_id not a UUID/,
      'the reason names what is wrong',
    );
    t.equal(msg.header.get('Cs-Original-Subject'), `ev.usage.${ws.tenant_id}`);
    t.equal(
      new TextDecoder().decode(msg.data),
      '{"tenant_id":"not-a-uuid","bogus_column":1}',
      'the payload is kept as it was',
    );

    // The poison message is not redelivered forever: the consumer has nothing left for this tenant.
    await waitFor(
      'consumer caught up',
      async () => (await jsm.consumers.info('EVENTS', 'clickhouse-writer-usage')).num_ack_pending === 0,
      20_000,
    );
  },
);
