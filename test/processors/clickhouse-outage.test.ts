import fs from 'node:fs';
import path from 'node:path';
import t from '#tap';
import { alive } from '../../infra/proc.js';
import { consumers } from '../../lib/nats.js';
import { runLoad } from '../helpers/load.js';
import { jetstream, metric, writersIdle } from '../helpers/observe.js';
import { bootstrap, ch, profile, seed, stackUp, startTier, waitFor } from '../helpers/stack.js';

const chPid = () => Number(fs.readFileSync(path.join(profile.dataDir, 'clickhouse.pid'), 'utf8'));
t.test(
  'while ClickHouse is down, ingestion goes on; when it is back the backlog drains with nothing lost or doubled',
  async (t) => {
    const ws = await bootstrap();
    await seed(ws.tenant_id, 100);
    const ingest = await startTier(t, 'ingest', { INGEST_PROCESSES: '1', INGEST_RATE_LIMIT_PER_MIN: '1000000' });
    const proc = await startTier(t, 'processors', { WRITER_BATCH_MS: '50', CLICKHOUSE_TIMEOUT_MS: '5000' });
    t.teardown(() => stackUp());
    const jsm = await jetstream(t);
    const count = async () =>
      Number((await ch<{ c: string }>(`SELECT count() AS c FROM events WHERE tenant_id = '${ws.tenant_id}'`))[0].c);

    const before = await runLoad({
      url: ingest.url,
      key: ws.ingestion_key,
      customers: 100,
      requests: 50,
      concurrency: 4,
    });
    await waitFor('first events stored', async () => (await count()) === before.accepted, 30_000);

    const pid = chPid();
    process.kill(pid, 'SIGKILL');
    await waitFor('ClickHouse gone', () => !alive(pid), 10_000);
    const during = await runLoad({
      url: ingest.url,
      key: ws.ingestion_key,
      customers: 100,
      requests: 200,
      concurrency: 4,
    });
    t.equal(during.failures, 0, 'ingest keeps acknowledging while ClickHouse is down');
    const retries = await waitFor(
      'the writer to fail and retry a few times',
      async () => {
        const n = await metric(proc.url, 'writer_insert_retries_total', { table: 'events' });
        return n >= 3 && n;
      },
      30_000,
      200,
    );
    t.ok(retries >= 3, `${retries} insert attempts retried`);
    const ready = await fetch(`${proc.url}/readyz`);
    t.equal(ready.status, 200, 'the processor stays up through the outage');

    t.equal(await stackUp(), 0, 'ClickHouse restarted');
    const total = before.accepted + during.accepted;
    await waitFor('backlog drained', async () => (await count()) >= total, 90_000, 250);
    await writersIdle(jsm, consumers.usageWriter, 'events');
    const [s] = await ch<{ c: string; u: string }>(
      `SELECT count() AS c, uniqExact(event_id) AS u FROM events WHERE tenant_id = '${ws.tenant_id}'`,
    );
    t.equal(Number(s.c), total, 'every accepted event stored');
    t.equal(Number(s.u), total, 'none stored twice');
  },
);
