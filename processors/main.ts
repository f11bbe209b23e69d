import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import Type from 'typebox';
import { Piscina } from 'piscina';
import { commaList, configOrExit, loadConfig } from '../lib/config.js';
import { providersFromEnv } from '../lib/integrations/providers.js';
import { DataCipher, isCiphertext } from '../lib/credentials/data-cipher.js';
import { onShutdown } from '../lib/lifecycle.js';
import { createLogger } from '../lib/logger.js';
import { STREAM_EVENTS, STREAM_WEBHOOKS, connectNats, consumers } from '../lib/nats.js';
import { connectPg } from '../lib/pg.js';
import { evaluateUsageDrops, KeySpikes } from './alerts/alerts.js';
import { backfillJobHooks } from './backfill-jobs.js';
import { EventCatalog } from './catalog/catalog.js';
import { Eraser } from './erasure/eraser.js';
import { ClickHouse } from './clickhouse.js';
import { RecalculateResponder } from './health/responder.js';
import { HistoryRetention } from './health/retention.js';
import { StreamTrimmer } from './stream-trimmer.js';
import { HealthScheduler } from './health/scheduler.js';
import type { ScoreTask } from './health/score-worker.js';
import type { Scored } from './health/score.js';
import { HealthScorer } from './health/scorer.js';
import { HistoryBuffer } from './health/store.js';
import { LeasedSchedule } from './lease.js';
import { HealthMetrics, OutboxMetrics, WriterMetrics } from './metrics.js';
import { AccessTokens } from './integrations/access-tokens.js';
import { Notifier, TokenRefresher } from './integrations/notifier.js';
import { Materializer } from './metrics/materializer.js';
import { materializeNowResponder } from './metrics/responder.js';
import { OutboxRelay, SystemEvents } from './outbox/relay.js';
import { Evaluator } from './playbooks/evaluate.js';
import { EventLoop, EventMarks } from './playbooks/event-marks.js';
import { playbookRunResponder } from './playbooks/responder.js';
import { AfterRuns, PlaybookRunner } from './playbooks/runner.js';
import { WebhookDispatcher } from './webhooks/dispatcher.js';
import { WebhookFanout } from './webhooks/fanout.js';
import { WebhookEvents } from './webhooks/outbox.js';
import { Sender } from './webhooks/send.js';
import type { RowsMessage } from './writer/held.js';
import { ClickhouseWriter } from './writer/writer.js';

export const ProcessorsConfig = Type.Object({
  PROCESSORS_HOST: Type.String({
    default: '127.0.0.1',
    description: 'Address of the processors health/metrics endpoint.',
  }),
  PROCESSORS_PORT: Type.Integer({ default: 3300, description: 'Port of /healthz, /readyz, /metrics.' }),
  NATS_URL: Type.String({
    default: 'nats://127.0.0.1:14222',
    description: 'NATS servers, comma-separated (every server of a cluster; the client fails over between them).',
  }),
  CLICKHOUSE_URL: Type.String({
    default: 'http://127.0.0.1:18123',
    description: 'ClickHouse HTTP endpoints, comma-separated, tried in order (the servers of a cluster).',
  }),
  CLICKHOUSE_DATABASE: Type.String({ default: 'csp' }),
  CLICKHOUSE_CLUSTER: Type.String({
    default: '',
    description:
      'Name of the ClickHouse cluster whose Distributed tables CLICKHOUSE_DATABASE holds (storage in <database>_local); empty: one server.',
  }),
  DATABASE_URL: Type.String({ default: 'postgres://postgres@127.0.0.1:15432/csp' }),
  WRITER_BATCH_ROWS: Type.Integer({
    minimum: 1,
    default: 100_000,
    description: 'Rows per ClickHouse insert (upper bound).',
  }),
  WRITER_BATCH_BYTES: Type.Integer({
    minimum: 1024,
    default: 16 * 1024 * 1024,
    description: 'Bytes per ClickHouse insert (upper bound).',
  }),
  WRITER_BATCH_MS: Type.Integer({
    minimum: 1,
    default: 200,
    description: 'Longest time a row waits for its insert to start.',
  }),
  WRITER_INSERT_STREAMS: Type.Integer({ minimum: 1, default: 2, description: 'Concurrent inserts per table.' }),
  WRITER_BACKFILL_INSERT_STREAMS: Type.Integer({
    minimum: 1,
    default: 1,
    description: 'Concurrent inserts of the backfill writer (kept below live events).',
  }),
  WRITER_PULL_BYTES: Type.Integer({
    minimum: 65536,
    default: 4 * 1024 * 1024,
    description: 'Bytes requested from JetStream per pull.',
  }),
  CLICKHOUSE_TIMEOUT_MS: Type.Integer({ minimum: 1000, default: 60_000, description: 'ClickHouse request timeout.' }),
  PROCESSORS_THREADS: Type.Integer({ minimum: 1, default: 1, description: 'piscina worker threads for CPU work.' }),
  HEALTH_ENABLED: Type.Boolean({
    default: true,
    description: 'Run the health scorer: scheduled recalculations, on-demand requests, history retention.',
  }),
  HEALTH_RECALC_INTERVAL_MS: Type.Integer({
    minimum: 1000,
    default: 3_600_000,
    description: 'Every workspace is recalculated when its last run is older than this.',
  }),
  HEALTH_POOL_MIN_CUSTOMERS: Type.Integer({
    minimum: 0,
    default: 5000,
    description: 'Workspaces with more customers are scored in worker threads, in chunks; smaller ones inline.',
  }),
  HEALTH_RECALC_LANES: Type.Integer({
    minimum: 1,
    default: 2,
    description:
      'On-demand recalculations of one workspace in flight at once per instance; requests arriving meanwhile start the next batch.',
  }),
  HEALTH_LEASE_TTL_MS: Type.Integer({
    minimum: 1000,
    default: 120_000,
    description:
      "Lifetime of a workspace's scoring lease (renewed during a run); a killed instance's runs resume after it.",
  }),
  HEALTH_TENANTS: Type.String({
    default: '',
    description: 'Comma-separated workspace ids the scheduled runs are limited to (empty: all).',
  }),
  METRICS_MATERIALIZE_INTERVAL_MS: Type.Integer({
    minimum: 1000,
    default: 3_600_000,
    description: "Every workspace's metrics in use are materialized when its last run is older than this.",
  }),
  METRICS_LEASE_TTL_MS: Type.Integer({
    minimum: 1000,
    default: 120_000,
    description: "Lifetime of a workspace's materialization lease (renewed during a run).",
  }),
  METRICS_TENANTS: Type.String({
    default: '',
    description: 'Comma-separated workspace ids the scheduled materialization is limited to (empty: all).',
  }),
  PLAYBOOKS_INTERVAL_MS: Type.Integer({
    minimum: 1000,
    default: 3_600_000,
    description: "Every workspace's enabled playbooks are evaluated when their last scheduled run is older than this.",
  }),
  PLAYBOOKS_LEASE_TTL_MS: Type.Integer({
    minimum: 1000,
    default: 120_000,
    description: "Lifetime of a workspace's scheduled playbook lease (renewed during a run).",
  }),
  PLAYBOOKS_TENANTS: Type.String({
    default: '',
    description:
      'Comma-separated workspace ids the scheduled and event-driven playbook evaluations are limited to (empty: all).',
  }),
  PLAYBOOKS_CONCURRENCY: Type.Integer({
    minimum: 1,
    maximum: 16,
    default: 3,
    description: "How many of a workspace's playbooks one instance evaluates at the same time.",
  }),
  PLAYBOOKS_EVENT_POLL_MS: Type.Integer({
    minimum: 100,
    maximum: 20_000,
    default: 10_000,
    description: 'Pause between evaluations of the event playbooks of workspaces that just received their events.',
  }),
  PLAYBOOKS_EVENT_SETTLE_MS: Type.Integer({
    minimum: 1000,
    default: 60_000,
    description: 'How long after its last matching event a workspace keeps being re-evaluated (late writes).',
  }),
  OUTBOX_POLL_MS: Type.Integer({
    minimum: 10,
    default: 250,
    description: 'Pause between polls of the generated-event outbox when it is empty.',
  }),
  WEBHOOK_CONCURRENCY: Type.Integer({
    minimum: 1,
    maximum: 10_000,
    default: 256,
    description: 'Webhook attempts in flight in one processors instance, at most.',
  }),
  WEBHOOK_ENDPOINT_CONCURRENCY: Type.Integer({
    minimum: 1,
    maximum: 100,
    default: 8,
    description: 'Webhook attempts in flight to one subscription in one processors instance, at most.',
  }),
  WEBHOOK_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    default: 10_000,
    description: 'Deadline of one webhook attempt (connect, send, response head); past it the attempt failed.',
  }),
  WEBHOOK_RETRY_SCHEDULE: Type.String({
    pattern: '^\\s*\\d+\\s*(,\\s*\\d+\\s*)*$',
    default: '5000,300000,1800000,7200000,18000000,36000000,36000000',
    description: 'Delays in ms before each retry of a failed webhook delivery (comma-separated); then it failed.',
  }),
  WEBHOOK_DISABLE_AFTER_MS: Type.Integer({
    minimum: 1000,
    default: 5 * 24 * 3600_000,
    description: 'A subscription whose every attempt failed for this long is disabled (reason `failing`).',
  }),
  WEBHOOK_POLL_MS: Type.Integer({
    minimum: 10,
    default: 250,
    description: 'Pause between claims of due webhook deliveries when none were due.',
  }),
  WEBHOOK_TENANTS: Type.String({
    default: '',
    description: 'Comma-separated workspace ids whose webhooks this instance delivers (empty: all).',
  }),
  WEBHOOK_ALLOW_HTTP: Type.Boolean({
    default: false,
    description: 'Deliver to plain http:// URLs (the dev and test profiles set it).',
  }),
  WEBHOOK_ALLOW_PRIVATE: Type.Boolean({
    default: false,
    description: 'Deliver to loopback, private and link-local addresses (the dev and test profiles set it).',
  }),
  DATA_ENCRYPTION_KEY: Type.String({
    default: '',
    description:
      'Keys of secrets at rest, as core-api (comma-separated, the first encrypts); empty (and no ' +
      'INTEGRATION_TOKEN_KEY): integration notifications and refreshes are skipped, webhooks cannot be signed.',
  }),
  INTEGRATION_TOKEN_KEY: Type.String({
    default: '',
    description: 'The earlier name of a single data key, still read (after DATA_ENCRYPTION_KEY).',
  }),
  INTEGRATION_REFRESH_POLL_MS: Type.Integer({
    minimum: 100,
    default: 60_000,
    description:
      'Pause between looks for integration tokens that expire within 5 minutes (refreshed then; a call to a ' +
      'provider refreshes a due token itself first).',
  }),
  INTEGRATION_TENANTS: Type.String({
    default: '',
    description:
      'Comma-separated workspace ids whose integration notifications and token refreshes this instance ' +
      'handles (empty: all).',
  }),
  NOTIFY_POLL_MS: Type.Integer({
    minimum: 50,
    default: 500,
    description: 'Pause between claims of queued playbook notifications (chat and e-mail integrations).',
  }),
  ALERTS_KEY_SPIKE_FACTOR: Type.Number({
    minimum: 1,
    default: 10,
    description: "api_key_usage_spike: a key's requests in 5 minutes above this many times its 24-hour average…",
  }),
  ALERTS_KEY_SPIKE_FLOOR: Type.Integer({
    minimum: 1,
    default: 500,
    description: '…and above this many requests.',
  }),
  ALERTS_KEY_INTERVAL_MS: Type.Integer({
    minimum: 1000,
    default: 60_000,
    description: 'How often API key usage is checked for spikes.',
  }),
  ALERTS_USAGE_DROP_RATIO: Type.Number({
    exclusiveMinimum: 0,
    maximum: 1,
    default: 0.5,
    description: "usage_drop: a customer's events in the last 7 days below this share of its weekly baseline…",
  }),
  ALERTS_USAGE_DROP_MIN_WEEKLY: Type.Number({
    minimum: 0,
    default: 20,
    description: '…when that baseline (days 8–37 ago, per 7 days) is at least this many events.',
  }),
  ERASURE_POLL_MS: Type.Integer({
    minimum: 50,
    default: 1000,
    description: 'Pause between looks for queued customer erasures (permanent deletes, trash purges).',
  }),
  ERASURE_LEASE_TTL_MS: Type.Integer({
    minimum: 1000,
    default: 120_000,
    description: "Lifetime of an erasure's lease (renewed during a run); a killed instance's erasures resume after it.",
  }),
  ERASURE_TENANTS: Type.String({
    default: '',
    description: 'Comma-separated workspace ids whose erasures this instance carries out (empty: all).',
  }),
  ERASURE_WATCH_MS: Type.Integer({
    minimum: 1000,
    default: 31 * 24 * 3600_000,
    description:
      "How long after an erasure rows of the customer that still land (messages older than it) are removed: the events stream's max age and a day.",
  }),
  ERASURE_SWEEP_MS: Type.Integer({
    minimum: 100,
    default: 10_000,
    description:
      'A workspace under watch that the writer stored rows of is checked for erased customers at most this often.',
  }),
  ERASURE_FULL_SWEEP_MS: Type.Integer({
    minimum: 1000,
    default: 600_000,
    description: 'Every workspace under watch is checked for rows of erased customers this often.',
  }),
  LOG_LEVEL: Type.String({ default: 'info' }),
});

const log = createLogger('processors', process.env.LOG_LEVEL ?? 'info');
const cfg = configOrExit(log, () => loadConfig(ProcessorsConfig, process.env));

const instance = `${randomBytes(4).toString('hex')}${process.pid}`;
const nc = await connectNats(cfg.NATS_URL, `processors-${instance}`, log);
const js = nc.jetstream();
const jsm = await nc.jetstreamManager();
const sql = connectPg(cfg.DATABASE_URL, 4);
const ch = new ClickHouse(
  cfg.CLICKHOUSE_URL,
  cfg.CLICKHOUSE_DATABASE,
  cfg.CLICKHOUSE_TIMEOUT_MS,
  cfg.CLICKHOUSE_CLUSTER,
);
const pool = new Piscina({
  filename: fileURLToPath(new URL('./writer/check-rows.js', import.meta.url)),
  minThreads: 0,
  maxThreads: cfg.PROCESSORS_THREADS,
  idleTimeout: 30_000,
  maxQueue: 64,
});
const metrics = new WriterMetrics();
const healthMetrics = new HealthMetrics(metrics.registry);
const healthPool = new Piscina<ScoreTask, Scored>({
  filename: fileURLToPath(new URL('./health/score-worker.js', import.meta.url)),
  minThreads: 0,
  maxThreads: cfg.PROCESSORS_THREADS,
  idleTimeout: 30_000,
});

const common = {
  batchRows: cfg.WRITER_BATCH_ROWS,
  batchBytes: cfg.WRITER_BATCH_BYTES,
  batchMs: cfg.WRITER_BATCH_MS,
  insertStreams: cfg.WRITER_INSERT_STREAMS,
  pullBytes: cfg.WRITER_PULL_BYTES,
  instance,
};
const deps = { js, nc, ch, pool, log, metrics, running: new Set<string>() };
const eraser = new Eraser(sql, ch, log.child({ module: 'erasure' }), {
  holder: instance,
  pollMs: cfg.ERASURE_POLL_MS,
  leaseTtlMs: cfg.ERASURE_LEASE_TTL_MS,
  tenants: commaList(cfg.ERASURE_TENANTS),
  watchMs: cfg.ERASURE_WATCH_MS,
  sweepMs: cfg.ERASURE_SWEEP_MS,
  fullSweepMs: cfg.ERASURE_FULL_SWEEP_MS,
});
const backfillHooks = backfillJobHooks(sql);
const noticeErased = async (messages: RowsMessage[]) => eraser.stored(messages);
const writers = [
  new ClickhouseWriter({ ...common, consumer: consumers.usageWriter, table: 'events', onStored: noticeErased }, deps),
  new ClickhouseWriter(
    { ...common, consumer: consumers.billingWriter, table: 'billing_events', onStored: noticeErased },
    deps,
  ),
  new ClickhouseWriter({ ...common, consumer: consumers.systemWriter, table: 'events', onStored: noticeErased }, deps),
  new ClickhouseWriter(
    {
      ...common,
      insertStreams: cfg.WRITER_BACKFILL_INSERT_STREAMS,
      consumer: consumers.backfillWriter,
      table: 'events',
      ...backfillHooks,
      onStored: async (messages) => {
        eraser.stored(messages);
        await backfillHooks.onStored(messages);
      },
    },
    deps,
  ),
];
const playbooksLog = log.child({ module: 'playbooks' });
const evaluator = new Evaluator({ sql, ch, log: playbooksLog });
const playbookRunner = new PlaybookRunner(sql, evaluator, playbooksLog, cfg.PLAYBOOKS_CONCURRENCY);
const afterRuns = new AfterRuns(playbookRunner, playbooksLog);
const playbookTenants = commaList(cfg.PLAYBOOKS_TENANTS);
const playbookSchedule = new LeasedSchedule(
  sql,
  { run: (tenantId, stopping) => playbookRunner.runWorkspace(tenantId, 'schedule', undefined, stopping) },
  playbooksLog,
  {
    job: 'playbooks',
    intervalMs: cfg.PLAYBOOKS_INTERVAL_MS,
    leaseTtlMs: cfg.PLAYBOOKS_LEASE_TTL_MS,
    holder: instance,
    tenants: playbookTenants,
  },
);
const eventLoop = new EventLoop(sql, playbookRunner, playbooksLog, {
  pollMs: cfg.PLAYBOOKS_EVENT_POLL_MS,
  settleMs: cfg.PLAYBOOKS_EVENT_SETTLE_MS,
  tenants: playbookTenants,
});
const playbookResponder = playbookRunResponder(nc, evaluator, playbooksLog);
const catalogs = [
  new EventCatalog(js, sql, consumers.catalog, log, new EventMarks(sql, playbooksLog)),
  new EventCatalog(js, sql, consumers.catalogBackfill, log),
];
const outboxMetrics = new OutboxMetrics(metrics.registry);
const relayOptions = { pollMs: cfg.OUTBOX_POLL_MS, batch: 500, keepMs: 7 * 24 * 3600_000 };
const relay = new OutboxRelay(
  sql,
  new SystemEvents(js, 5000),
  log.child({ module: 'outbox' }),
  outboxMetrics,
  relayOptions,
);
// Webhooks on their own connections: a long playbook evaluation never holds up a delivery.
const webhookSql = connectPg(cfg.DATABASE_URL, 3);
const webhooksLog = log.child({ module: 'webhooks' });
const webhookRelay = new OutboxRelay(webhookSql, new WebhookEvents(js, 5000), webhooksLog, outboxMetrics, relayOptions);
const webhookPolicy = { allowHttp: cfg.WEBHOOK_ALLOW_HTTP, allowPrivate: cfg.WEBHOOK_ALLOW_PRIVATE };
const sender = new Sender({
  timeoutMs: cfg.WEBHOOK_TIMEOUT_MS,
  maxSockets: cfg.WEBHOOK_CONCURRENCY,
  policy: webhookPolicy,
  userAgent: 'cs-platform-webhooks/1',
});
const dataCipher = DataCipher.fromSettings(cfg.DATA_ENCRYPTION_KEY, cfg.INTEGRATION_TOKEN_KEY);
/** A webhook secret as stored: a ciphertext, or kept in clear from before secrets were encrypted (until rotated). */
const openSecret = (stored: string) => {
  if (!isCiphertext(stored)) return stored;
  if (!dataCipher) throw new Error('no DATA_ENCRYPTION_KEY is configured');
  return dataCipher.decrypt(stored);
};
const dispatcher = new WebhookDispatcher(webhookSql, sender, webhooksLog, {
  concurrency: cfg.WEBHOOK_CONCURRENCY,
  perEndpoint: cfg.WEBHOOK_ENDPOINT_CONCURRENCY,
  pollMs: cfg.WEBHOOK_POLL_MS,
  timeoutMs: cfg.WEBHOOK_TIMEOUT_MS,
  retryScheduleMs: cfg.WEBHOOK_RETRY_SCHEDULE.split(',').map((x) => Number(x.trim())),
  disableAfterMs: cfg.WEBHOOK_DISABLE_AFTER_MS,
  tenants: commaList(cfg.WEBHOOK_TENANTS),
  openSecret,
});
const integrationsLog = log.child({ module: 'integrations' });
const providers = providersFromEnv(process.env);
const accessTokens = dataCipher && new AccessTokens(webhookSql, providers, dataCipher, integrationsLog);
const integrationTenants = commaList(cfg.INTEGRATION_TENANTS);
const notifier = new Notifier(webhookSql, providers, accessTokens, integrationsLog, {
  pollMs: cfg.NOTIFY_POLL_MS,
  tenants: integrationTenants,
});
const refresher = new TokenRefresher(webhookSql, accessTokens, integrationsLog, {
  pollMs: cfg.INTEGRATION_REFRESH_POLL_MS,
  tenants: integrationTenants,
});
const fanout = new WebhookFanout(js, webhookSql, consumers.webhookFanout, webhooksLog, () => dispatcher.wake());
const alertsLog = log.child({ module: 'alerts' });
const thresholds = {
  keySpikeFactor: cfg.ALERTS_KEY_SPIKE_FACTOR,
  keySpikeFloor: cfg.ALERTS_KEY_SPIKE_FLOOR,
  dropRatio: cfg.ALERTS_USAGE_DROP_RATIO,
  dropMinWeekly: cfg.ALERTS_USAGE_DROP_MIN_WEEKLY,
};
const keySpikes = new KeySpikes(sql, thresholds, alertsLog, cfg.ALERTS_KEY_INTERVAL_MS);
const healthLog = log.child({ module: 'health' });
const scorer = new HealthScorer({
  sql,
  ch,
  pool: healthPool,
  log: healthLog,
  metrics: healthMetrics,
  poolMinCustomers: cfg.HEALTH_POOL_MIN_CUSTOMERS,
  instance,
});
const history = new HistoryBuffer(ch, healthLog, instance);
const scheduler = new HealthScheduler(
  sql,
  scorer,
  healthLog,
  healthMetrics,
  {
    intervalMs: cfg.HEALTH_RECALC_INTERVAL_MS,
    leaseTtlMs: cfg.HEALTH_LEASE_TTL_MS,
    holder: instance,
    tenants: commaList(cfg.HEALTH_TENANTS),
  },
  (tenantId) => {
    afterRuns.request(tenantId, 'health');
    evaluateUsageDrops(sql, ch, tenantId, thresholds).then(
      (r) => (r.raised || r.resolved) && alertsLog.info({ tenantId, ...r }, 'usage drop alerts'),
      (err: unknown) => alertsLog.warn({ tenantId, err: String(err) }, 'usage drop check failed'),
    );
  },
);
const responder = new RecalculateResponder(nc, scorer, history, healthLog, healthMetrics, {
  lanes: cfg.HEALTH_RECALC_LANES,
});
const retention = new HistoryRetention(ch, healthLog);
const metricsLog = log.child({ module: 'metrics' });
const materializer = new Materializer({ sql, ch, log: metricsLog, instance });
const materializeSchedule = new LeasedSchedule(
  sql,
  {
    run: async (tenantId, stopping) => {
      const r = await materializer.materializeWorkspace(tenantId, stopping);
      if (r.metrics) afterRuns.request(tenantId, 'metrics');
      return r;
    },
  },
  metricsLog,
  {
    job: 'metrics',
    intervalMs: cfg.METRICS_MATERIALIZE_INTERVAL_MS,
    leaseTtlMs: cfg.METRICS_LEASE_TTL_MS,
    holder: instance,
    tenants: commaList(cfg.METRICS_TENANTS),
  },
);
const materializeResponder = materializeNowResponder(nc, sql, materializer, metricsLog);
const trimmer = new StreamTrimmer(jsm, [STREAM_EVENTS, STREAM_WEBHOOKS], log.child({ mod: 'stream-trimmer' }));
for (const w of writers) await w.start();
for (const c of catalogs) await c.start();
relay.start();
webhookRelay.start();
await fanout.start();
dispatcher.start();
notifier.start();
refresher.start();
keySpikes.start();
materializeResponder.start();
materializeSchedule.start();
playbookResponder.start();
playbookSchedule.start();
eventLoop.start();
trimmer.start();
eraser.start();
if (cfg.HEALTH_ENABLED) {
  responder.start();
  scheduler.start();
  retention.start();
}
let ready = true;

// Backlog gauges: how far the consumers are behind.
const sampler = setInterval(() => {
  for (const name of [
    consumers.usageWriter,
    consumers.billingWriter,
    consumers.backfillWriter,
    consumers.systemWriter,
    consumers.catalog,
    consumers.catalogBackfill,
  ]) {
    jsm.consumers.info(STREAM_EVENTS, name).then(
      (i) => {
        metrics.pending.set({ consumer: name }, i.num_pending);
        metrics.ackPending.set({ consumer: name }, i.num_ack_pending);
      },
      () => {},
    );
  }
}, 5000);

const server = http.createServer((req, res) => {
  if (req.url === '/healthz')
    return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
  if (req.url === '/readyz') {
    const stalled = writers.filter((w) => w.stalled).length;
    const ok = ready && !nc.isClosed() && stalled === 0;
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
server.listen(cfg.PROCESSORS_PORT, cfg.PROCESSORS_HOST);
log.info({ port: cfg.PROCESSORS_PORT, instance }, 'processors running');

onShutdown(
  log,
  async () => {
    ready = false;
    clearInterval(sampler);
    retention.stop();
    await trimmer.stop();
    // An unfinished health run is abandoned (its lease freed for another instance); requests in
    // progress are answered; the outbox relay finishes its poll.
    await Promise.all([
      scheduler.stop(),
      responder.stop(),
      relay.stop(),
      webhookRelay.stop(),
      dispatcher.stop(),
      notifier.stop(),
      refresher.stop(),
      keySpikes.stop(),
      materializeSchedule.stop(),
      materializeResponder.stop(),
      playbookResponder.stop(),
      playbookSchedule.stop(),
      eventLoop.stop(),
      afterRuns.stop(),
      eraser.stop(),
    ]);
    await history.flush();
    // Stop pulling, write and ack what is held, then drain the connection.
    await Promise.all([...writers.map((w) => w.stop()), ...catalogs.map((c) => c.stop()), fanout.stop()]);
    await nc.drain();
    sender.close();
    await Promise.all([
      sql.end({ timeout: 5 }),
      webhookSql.end({ timeout: 5 }),
      ch.close(),
      pool.destroy(),
      healthPool.destroy(),
    ]);
    server.close();
    log.info('processors stopped');
  },
  60_000,
);
