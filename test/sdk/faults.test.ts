import { randomUUID } from 'node:crypto';
import t from '#tap';
import { IngestClient } from '../../sdk/src/client.js';
import type { IngestClientError } from '../../sdk/src/errors.js';
import { bootstrap, ch, closeDb, db, freePort, privateJetStream, seed, startTier, waitFor } from '../helpers/stack.js';

/**
 * The client's promise under faults: a million events tracked while the ingest tier is restarted
 * twice and nats-server is SIGKILLed once; each event is stored exactly once or was reported
 * (rejected, failed, dropped), and the counts match ClickHouse. The nats-server killed is the
 * file's own (privateJetStream), so it runs beside other files.
 */

const EVENTS = Number(process.env.SDK_FAULT_EVENTS ?? 1_000_000);
/** Events the service refuses one by one (unknown customer) and the client refuses before sending. */
const SERVER_REJECT_EVERY = 50_000;
const LOCAL_REJECT_EVERY = 100_000;

t.teardown(closeDb);

t.test(
  'a million events through the client across two ingest restarts and a nats-server kill: each stored once or reported',
  async (t) => {
    const ws = await bootstrap();
    await seed(ws.tenant_id, 200);
    const ids = (
      await db()<
        { id: string }[]
      >`SELECT id::text FROM customers WHERE tenant_id = ${ws.tenant_id} ORDER BY external_id`
    ).map((r) => r.id);
    const port = await freePort();
    const nats = await privateJetStream(t);
    const env = {
      INGEST_PORT: String(port),
      INGEST_PROCESSES: '1',
      INGEST_RATE_LIMIT_PER_MIN: '100000000',
      ...nats.env,
    };
    let ingest = await startTier(t, 'ingest', env);
    await startTier(t, 'processors', { WRITER_BATCH_MS: '50', ...nats.env });

    const client = new IngestClient({
      url: ingest.url,
      surface: 'a',
      apiKey: ws.ingestion_key,
      concurrency: 8,
      maxRetries: 20,
      retryCapMs: 2000,
    });
    const rejected = new Map<string, string>();
    const failed: Array<{ ids: string[]; err: IngestClientError }> = [];
    client.on('rejected', (e, p) => rejected.set(String((e as { user_id?: string }).user_id), p.code));
    client.on('failed', (events, err) =>
      failed.push({ ids: events.map((e) => String((e as { user_id?: string }).user_id)), err }),
    );
    const retryReasons: Record<string, number> = {};
    client.on('retry', (_a, _d, reason) => {
      retryReasons[reason] = (retryReasons[reason] ?? 0) + 1;
    });

    const resolved = () => {
      const s = client.stats();
      return s.accepted + s.rejected + s.failed;
    };
    const faults: string[] = [];
    const injector = (async () => {
      const at = (share: number) =>
        waitFor(`${share * 100} % of the events resolved`, () => resolved() >= EVENTS * share, 300_000, 20);
      await at(0.15);
      await ingest.stop('SIGTERM');
      ingest = await startTier(t, 'ingest', env);
      faults.push(`ingest restarted at ${resolved()}`);
      await at(0.4);
      await nats.kill();
      // Down long enough for publishes to go unacknowledged and requests to be refused.
      await new Promise((r) => setTimeout(r, 1000));
      await nats.restart();
      t.pass('nats-server started again');
      faults.push(`nats-server killed at ${resolved()}`);
      await at(0.7);
      await ingest.stop('SIGTERM');
      ingest = await startTier(t, 'ingest', env);
      faults.push(`ingest restarted at ${resolved()}`);
    })();

    const t0 = Date.now();
    let tracked = 0;
    for (let i = 0; i < EVENTS; i++) {
      if (!client.hasCapacity()) await client.waitForCapacity();
      const customer = i % SERVER_REJECT_EVERY === 1 ? randomUUID() : ids[i % ids.length];
      const name = i % LOCAL_REJECT_EVERY === 2 ? 'Not Snake Case' : 'sdk_fault';
      client.track({ event_name: name, customer_id: customer, user_id: String(i), properties: { i, plan: 'growth' } });
      tracked++;
    }
    await client.close();
    const sentS = (Date.now() - t0) / 1000;
    await injector;
    const s = client.stats();
    t.comment(`${EVENTS} events through the client in ${sentS.toFixed(1)} s; ${faults.join('; ')}`);
    t.comment(`stats ${JSON.stringify(s)}; retries by reason ${JSON.stringify(retryReasons)}`);
    t.equal(faults.length, 3, 'every fault injected while the events were flowing');
    t.equal(s.accepted + s.rejected + s.failed + s.dropped, tracked, 'every event resolved one way');
    t.equal(s.dropped, 0, 'waiting for capacity, nothing is dropped');
    t.equal(s.queued + s.inFlight, 0);
    t.ok(s.retries > 0, 'the faults were seen and retried');
    t.equal(
      rejected.size,
      EVENTS / SERVER_REJECT_EVERY + EVENTS / LOCAL_REJECT_EVERY,
      'each planted bad event reported',
    );
    for (const f of failed) t.comment(`failed: ${f.ids.length} events, ${f.err.code} ${f.err.message}`);

    await waitFor(
      'every accepted event in ClickHouse',
      async () => {
        const [r] = await ch<{ c: string }>(`SELECT count() AS c FROM events WHERE tenant_id = '${ws.tenant_id}'`);
        return Number(r.c) >= s.accepted;
      },
      180_000,
      500,
    );
    const [r] = await ch<{ c: string; u: string }>(
      `SELECT count() AS c, uniqExact(user_id) AS u FROM events WHERE tenant_id = '${ws.tenant_id}'`,
    );
    t.equal(Number(r.c), s.accepted, 'ClickHouse holds as many events as were accepted');
    t.equal(Number(r.u), Number(r.c), 'no event stored twice');
    const reported = [...rejected.keys(), ...failed.filter((f) => !f.err.outcomeUnknown).flatMap((f) => f.ids)];
    const [leak] = await ch<{ c: string }>(
      `SELECT count() AS c FROM events WHERE tenant_id = '${ws.tenant_id}' AND user_id IN (${reported.map((x) => `'${x}'`).join(',') || "''"})`,
    );
    t.equal(Number(leak.c), 0, 'no rejected or failed event was stored');
    t.comment(`stored and checked ${((Date.now() - t0) / 1000).toFixed(1)} s after the first event`);
  },
);
