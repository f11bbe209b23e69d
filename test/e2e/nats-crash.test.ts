import t from '#tap';
import { runLoad } from '../helpers/load.js';
import { bootstrap, ch, privateJetStream, seed, startTier, waitFor } from '../helpers/stack.js';

const KILLS = 5;

// The nats-server killed is the file's own (privateJetStream): ClickHouse and PostgreSQL stay shared,
// and the files beside it keep their bus.

t.test(
  'nats-server SIGKILLed under load, again and again: every acknowledged request is stored exactly once',
  async (t) => {
    const ws = await bootstrap();
    await seed(ws.tenant_id, 200);
    const nats = await privateJetStream(t);
    const ingest = await startTier(t, 'ingest', {
      INGEST_PROCESSES: '1',
      INGEST_RATE_LIMIT_PER_MIN: '1000000',
      ...nats.env,
    });
    const proc = await startTier(t, 'processors', { WRITER_BATCH_MS: '50', ...nats.env });

    let loading = true;
    let kills = 0;
    let acknowledged = 0;
    const killer = (async () => {
      while (loading && kills < KILLS) {
        // Each kill lands on a stack that has been taking the load again since the last restart.
        const mark = acknowledged;
        await waitFor('requests acknowledged since the restart', () => acknowledged >= mark + 100, 60_000, 20);
        await nats.kill();
        kills++;
        // Down long enough for publishes to time out and be sent again.
        await new Promise((r) => setTimeout(r, 1000));
        await nats.restart();
        t.pass(`nats-server restarted (${kills})`);
      }
      loading = false;
    })();
    let lastRestart = 0;
    const load = await runLoad({
      url: ingest.url,
      key: ws.ingestion_key,
      customers: 200,
      requests: 100_000,
      concurrency: 8,
      eventsPerRequest: 20,
      pauseMs: 5,
      onProgress: (_done, acked) => {
        acknowledged = acked;
      },
      // The load goes on until a few seconds after the last restart.
      until: () => {
        if (loading) return false;
        lastRestart ||= Date.now();
        return Date.now() - lastRestart > 4000;
      },
    });
    await killer;
    t.equal(kills, KILLS, `nats-server killed ${KILLS} times during the load`);
    t.ok(load.acknowledged.size > 100, `${load.acknowledged.size} requests acknowledged`);
    t.comment(`answers: ${JSON.stringify(load.statuses)}`);
    for (const line of ingest
      .output()
      .split('\n')
      .filter((l) => l.includes('"level":50'))
      .slice(0, 5))
      t.comment(line.slice(0, 400));

    const perBatch = async () =>
      new Map(
        (
          await ch<{ b: string; c: string }>(
            `SELECT lower(toString(batch_id)) AS b, count() AS c FROM events WHERE tenant_id = '${ws.tenant_id}' GROUP BY b`,
          )
        ).map((r) => [r.b, Number(r.c)]),
      );
    await waitFor(
      'every acknowledged request in ClickHouse',
      async () => {
        const stored = await perBatch();
        return [...load.acknowledged].every(([b, n]) => (stored.get(b) ?? 0) >= n);
      },
      120_000,
      500,
    );
    // The processors must have caught up by themselves and say so.
    await waitFor('processors ready', async () => (await fetch(`${proc.url}/readyz`)).ok, 30_000);
    const stored = await perBatch();
    const doubled = [...load.acknowledged].filter(([b, n]) => (stored.get(b) ?? 0) > n);
    t.same(doubled, [], 'no acknowledged request stored twice');
    const [s] = await ch<{ c: string; u: string }>(
      `SELECT count() AS c, uniqExact(event_id) AS u FROM events WHERE tenant_id = '${ws.tenant_id}'`,
    );
    t.equal(Number(s.u), Number(s.c), 'no event_id twice');
  },
);
