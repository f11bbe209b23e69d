import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { configOrExit, loadConfig } from '../lib/config.js';
import { providersFromConfig } from '../lib/integrations/config.js';
import { DataCipher } from '../lib/credentials/data-cipher.js';
import { onShutdown } from '../lib/lifecycle.js';
import { createLogger } from '../lib/logger.js';
import { connectNats } from '../lib/nats.js';
import { connectPg } from '../lib/pg.js';
import { ClickHouse } from './clickhouse.js';
import { ProcessorsConfig } from './config.js';
import {
  alertsJob,
  catalogsJob,
  erasureJob,
  healthJob,
  integrationsJob,
  type Job,
  metricsJob,
  outboxJob,
  playbooksJob,
  type Tier,
  trimmerJob,
  webhooksJob,
  writersJob,
} from './jobs.js';
import { integrationSyncJob } from './integrations/sync/index.js';
import { OutboxMetrics, WriterMetrics } from './metrics.js';
import { signalsJob } from './signals.js';
import type { ClickhouseWriter } from './writer/writer.js';

const log = createLogger('processors', process.env.LOG_LEVEL ?? 'info');
const cfg = configOrExit(log, () => loadConfig(ProcessorsConfig, process.env));

const instance = `${randomBytes(4).toString('hex')}${process.pid}`;
const nc = await connectNats(cfg.NATS_URL, `processors-${instance}`, log);
const tier: Tier = {
  cfg,
  log,
  instance,
  nc,
  js: nc.jetstream(),
  jsm: await nc.jetstreamManager(),
  sql: connectPg(cfg.DATABASE_URL, 4),
  webhookSql: connectPg(cfg.DATABASE_URL, 3),
  ch: new ClickHouse(cfg.CLICKHOUSE_URL, cfg.CLICKHOUSE_DATABASE, cfg.CLICKHOUSE_TIMEOUT_MS, cfg.CLICKHOUSE_CLUSTER),
  metrics: new WriterMetrics(),
};
const dataCipher = DataCipher.fromSettings(cfg.DATA_ENCRYPTION_KEY, cfg.INTEGRATION_TOKEN_KEY);
const outboxMetrics = new OutboxMetrics(tier.metrics.registry);
const erasure = erasureJob(tier);
const playbooks = playbooksJob(tier);
const writers = writersJob(tier, erasure);
// Started in this order; stopped in the stages of Job (processors/jobs.ts).
const jobs: Job[] = [
  writers,
  catalogsJob(tier),
  outboxJob(tier, outboxMetrics),
  webhooksJob(tier, outboxMetrics, dataCipher),
  integrationsJob(tier, providersFromConfig(cfg), dataCipher),
  integrationSyncJob(tier, providersFromConfig(cfg), dataCipher),
  alertsJob(tier),
  metricsJob(tier, playbooks.afterRuns),
  playbooks,
  trimmerJob(tier),
  erasure,
  healthJob(tier, playbooks.afterRuns),
  signalsJob(tier, providersFromConfig(cfg)),
];
tier.metrics.watchStalled(() => writers.writers);
for (const job of jobs) await job.start();
let ready = true;

const server = statusServer(tier, writers.writers, () => ready);
server.listen(cfg.PROCESSORS_PORT, cfg.PROCESSORS_HOST);
log.info({ port: cfg.PROCESSORS_PORT, instance }, 'processors running');

onShutdown(
  log,
  async () => {
    ready = false;
    await Promise.all(jobs.map((j) => j.stop?.()));
    await Promise.all(jobs.map((j) => j.drain?.()));
    await nc.drain();
    await Promise.all([
      ...jobs.map((j) => j.close?.()),
      tier.sql.end({ timeout: 5 }),
      tier.webhookSql.end({ timeout: 5 }),
      tier.ch.close(),
    ]);
    server.close();
    log.info('processors stopped');
  },
  60_000,
);

/** /healthz, /readyz (not ready while a writer is stalled or NATS is closed) and /metrics. */
function statusServer(t: Tier, writers: ClickhouseWriter[], running: () => boolean): http.Server {
  const { metrics } = t;
  return http.createServer((req, res) => {
    if (req.url === '/healthz')
      return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    if (req.url === '/readyz') {
      const stalled = writers.filter((w) => w.stalled).length;
      const ok = running() && !t.nc.isClosed() && stalled === 0;
      return void res
        .writeHead(ok ? 200 : 503, { 'content-type': 'application/json' })
        .end(JSON.stringify({ status: ok ? 'ready' : 'not ready', held: writers.map((w) => w.heldMessages), stalled }));
    }
    if (req.url === '/metrics') {
      metrics.registry
        .metrics()
        .then((text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text));
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"detail":"Not Found"}');
  });
}
