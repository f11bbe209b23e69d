import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { runLoad } from '../helpers/load.js';
import { bootstrap, ch, dist, profile, seed, startTier, waitFor } from '../helpers/stack.js';

const stackUp = () =>
  spawnSync(process.execPath, [dist('infra/cli.js'), 'up', '--profile', 'test'], { stdio: 'inherit' }).status;

// Small batches and one insert slot: messages wait their turn far longer than the 10 s ack wait.
const WRITER = { WRITER_INSERT_STREAMS: '1', WRITER_BATCH_ROWS: '500', WRITER_BATCH_MS: '20' };

t.test(
  'two processors sharing the consumers through a long ClickHouse outage store every event exactly once',
  async (t) => {
    const ws = await bootstrap();
    await seed(ws.tenant_id, 50);
    const ingest = await startTier(t, 'ingest', { INGEST_PROCESSES: '1', INGEST_RATE_LIMIT_PER_MIN: '1000000' });
    t.teardown(() => stackUp());
    await startTier(t, 'processors', WRITER);
    await startTier(t, 'processors', WRITER);

    const pid = Number(fs.readFileSync(path.join(profile.dataDir, 'clickhouse.pid'), 'utf8'));
    process.kill(pid, 'SIGKILL');
    const load = await runLoad({
      url: ingest.url,
      key: ws.ingestion_key,
      customers: 50,
      requests: 300,
      concurrency: 6,
    });
    t.equal(load.failures, 0);
    // Longer than the ack wait: anything a writer fetched but did not keep alive would be redelivered.
    await new Promise((r) => setTimeout(r, 14_000));
    t.equal(stackUp(), 0, 'ClickHouse back');

    const count = async () =>
      Number((await ch<{ c: string }>(`SELECT count() AS c FROM events WHERE tenant_id = '${ws.tenant_id}'`))[0].c);
    await waitFor('backlog drained', async () => (await count()) >= load.accepted, 90_000, 250);
    await new Promise((r) => setTimeout(r, 2000));
    const [s] = await ch<{ c: string; u: string }>(
      `SELECT count() AS c, uniqExact(event_id) AS u FROM events WHERE tenant_id = '${ws.tenant_id}'`,
    );
    t.equal(Number(s.c), load.accepted, 'row count equals the accepted count');
    t.equal(Number(s.u), load.accepted, 'no event stored twice');
  },
);
