import { execFileSync } from 'node:child_process';
import t from '#tap';
import { runLoad } from '../helpers/load.js';
import { bootstrap, ch, freePort, seed, startTier, waitFor, type Tier } from '../helpers/stack.js';

t.test('restarting the ingest tier under load loses no acknowledged event', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 200);
  const port = await freePort();
  const env = { INGEST_PROCESSES: '2', INGEST_RATE_LIMIT_PER_MIN: '1000000', INGEST_PORT: String(port) };
  let ingest: Tier = await startTier(t, 'ingest', env);
  await startTier(t, 'processors', { WRITER_BATCH_MS: '50' });

  let loading = true;
  let restarts = 0;
  let answered = 0;
  const restarter = (async () => {
    while (loading) {
      // Deliberate pacing: a restart once 300 more requests of the load have completed since the
      // previous one, so each lands on a tier that has been serving, however slow the machine.
      const mark = answered;
      await waitFor('the load to go on', () => !loading || answered >= mark + 300, 120_000, 50);
      if (!loading) break;
      if (restarts % 2 === 0) {
        // Graceful: SIGTERM to the tier; in-flight requests get their answer, then it stops.
        await ingest.stop('SIGTERM');
        ingest = await startTier(t, 'ingest', env);
      } else {
        // Crash: SIGKILL one serving process; its supervisor starts another.
        const child = execFileSync('pgrep', ['-P', String(ingest.proc.pid)], { encoding: 'utf8' })
          .trim()
          .split('\n')[0];
        process.kill(Number(child), 'SIGKILL');
      }
      restarts++;
    }
  })();
  const load = await runLoad({
    url: `http://127.0.0.1:${port}`,
    key: ws.ingestion_key,
    customers: 200,
    requests: 2500,
    concurrency: 8,
    pauseMs: 10,
    onProgress: (done) => {
      answered = done;
    },
  });
  loading = false;
  await restarter;
  t.ok(restarts >= 3, `ingest restarted ${restarts} times under load`);
  t.ok(load.acknowledged.size > 1000, `${load.acknowledged.size} requests acknowledged`);
  t.notOk(
    Object.keys(load.statuses).some((s) => s.startsWith('5')),
    `no 5xx answers; failures are refused or reset connections only (${JSON.stringify(load.statuses)})`,
  );

  await waitFor(
    'acknowledged events stored',
    async () => {
      const [r] = await ch<{ c: string }>(`SELECT count() AS c FROM events WHERE tenant_id = '${ws.tenant_id}'`);
      return Number(r.c) >= load.accepted;
    },
    60_000,
    250,
  );
  const rows = await ch<{ b: string; c: string }>(
    `SELECT toString(batch_id) AS b, count() AS c FROM events WHERE tenant_id = '${ws.tenant_id}' GROUP BY b`,
  );
  const stored = new Map(rows.map((r) => [r.b, Number(r.c)]));
  const missing = [...load.acknowledged].filter(([id, n]) => stored.get(id) !== n);
  t.same(missing, [], 'every acknowledged request is stored with all its events');
  const [u] = await ch<{ c: string; u: string }>(
    `SELECT count() AS c, uniqExact(event_id) AS u FROM events WHERE tenant_id = '${ws.tenant_id}'`,
  );
  t.equal(u.c, u.u, 'no event stored twice');
});
