import { fileURLToPath } from 'node:url';
import type { JetStreamClient, JetStreamManager, NatsConnection } from 'nats';
import { Piscina } from 'piscina';
import { commaList } from '../lib/comma-list.js';
import { type DataCipher, isCiphertext } from '../lib/credentials/data-cipher.js';
import type { Providers } from '../lib/integrations/providers.js';
import type { Logger } from '../lib/logger.js';
import { KEYED_PARTITIONS, keyedWriter, STREAM_EVENTS, STREAM_WEBHOOKS, consumers } from '../lib/nats.js';
import type { Sql } from '../lib/pg.js';
import { evaluateUsageDrops, KeySpikes } from './alerts/alerts.js';
import { backfillJobHooks } from './backfill-jobs.js';
import { KeysStore } from './dedup/keys-store.js';
import { KeyedOwnership } from './dedup/ownership.js';
import { EventCatalog } from './catalog/catalog.js';
import type { ClickHouse } from './clickhouse.js';
import type { ProcessorsSettings } from './config.js';
import { ErasedCustomers } from './erasure/erased-customers.js';
import { Eraser } from './erasure/eraser.js';
import { recalculateResponder } from './health/responder.js';
import { HistoryRetention } from './health/retention.js';
import { HealthScheduler } from './health/scheduler.js';
import type { ScoreTask } from './health/score-worker.js';
import type { Scored } from './health/score.js';
import { HealthScorer } from './health/scorer.js';
import { HistoryBuffer } from './health/store.js';
import { AccessTokens, REFRESH_MARGIN_MS } from './integrations/access-tokens.js';
import { Notifier, TokenRefresher } from './integrations/notifier.js';
import { IntegrationRequests } from './integrations/requests.js';
import { ZendeskBackfill } from './integrations/zendesk-backfill.js';
import { LeasedSchedule } from './lease.js';
import {
  HealthMetrics,
  IntegrationMetrics,
  type OutboxMetrics,
  WebhookMetrics,
  type WriterMetrics,
} from './metrics.js';
import { Materializer } from './metrics/materializer.js';
import { materializeNowResponder } from './metrics/responder.js';
import { OutboxRelay, SystemEvents } from './outbox/relay.js';
import { Evaluator } from './playbooks/evaluate.js';
import { EventLoop, EventMarks } from './playbooks/event-marks.js';
import { playbookRunResponder } from './playbooks/responder.js';
import { AfterRuns, PlaybookRunner } from './playbooks/runner.js';
import { StreamTrimmer } from './stream-trimmer.js';
import { WebhookDispatcher } from './webhooks/dispatcher.js';
import { WebhookFanout } from './webhooks/fanout.js';
import { WebhookEvents } from './webhooks/outbox.js';
import { Sender } from './webhooks/send.js';
import type { RowsMessage } from './writer/held.js';
import { ClickhouseWriter, PULL_EXPIRES_MS } from './writer/writer.js';

/*
 * The processors tier's jobs, one function each (processors/main.ts composes them). A function
 * builds its job's parts from the shared connections and the settings and returns a Job; a job
 * that needs another's part (the writers tell the eraser what they stored, health and metrics
 * runs ask for playbook evaluations) takes it as an argument. Main starts the jobs in its list's
 * order and stops them in three stages, so that nothing still working loses its connections:
 * every job's loops first, then the consumers, then, once NATS has drained, threads and sockets.
 */

/** What every job shares: the settings, the root logger and the connections main.ts opened. */
export interface Tier {
  cfg: ProcessorsSettings;
  log: Logger;
  /** This process's name in leases and in the rows it writes. */
  instance: string;
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  sql: Sql;
  /** Webhooks and integrations on their own connections: a long playbook evaluation never holds up a delivery. */
  webhookSql: Sql;
  ch: ClickHouse;
  /** The registry /metrics serves. */
  metrics: WriterMetrics;
}

export interface Job {
  start(): void | Promise<void>;
  /** Shutdown, first stage (all jobs at once): loops stop; runs in progress finish, are answered or abandoned. */
  stop?(): Promise<void>;
  /** Second stage, once every job has stopped: consumers stop pulling, then write and ack what they hold. */
  drain?(): Promise<void>;
  /** Last stage, after the NATS connection drained: worker threads and sockets are released. */
  close?(): void | Promise<void>;
}

/** Sleeps `ms`, or less when `signal` aborts. */
const abortableSleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    });
  });

/** The four ClickHouse writers (usage, billing, system events, backfill), behind /readyz. */
export function writersJob(
  t: Tier,
  { eraser, erased }: { eraser: Eraser; erased: ErasedCustomers },
): Job & { writers: ClickhouseWriter[] } {
  const { cfg } = t;
  const pool = new Piscina({
    filename: fileURLToPath(new URL('./writer/check-rows.js', import.meta.url)),
    minThreads: 0,
    maxThreads: cfg.PROCESSORS_THREADS,
    idleTimeout: 30_000,
    maxQueue: 64,
  });
  const common = {
    batchRows: cfg.WRITER_BATCH_ROWS,
    batchBytes: cfg.WRITER_BATCH_BYTES,
    batchMs: cfg.WRITER_BATCH_MS,
    insertStreams: cfg.WRITER_INSERT_STREAMS,
    pullBytes: cfg.WRITER_PULL_BYTES,
    instance: t.instance,
  };
  const deps = { js: t.js, nc: t.nc, ch: t.ch, pool, log: t.log, metrics: t.metrics, running: new Set<string>() };
  const backfillHooks = backfillJobHooks(t.sql);
  const noticeErased = async (messages: RowsMessage[], generation: number) => eraser.stored(messages, generation);
  const writer = (consumer: string, table: 'events' | 'billing_events') =>
    new ClickhouseWriter({ ...common, consumer, table, erased, onStored: noticeErased }, deps);
  const writers = [
    writer(consumers.usageWriter, 'events'),
    writer(consumers.billingWriter, 'billing_events'),
    writer(consumers.systemWriter, 'events'),
    new ClickhouseWriter(
      {
        ...common,
        insertStreams: cfg.WRITER_BACKFILL_INSERT_STREAMS,
        consumer: consumers.backfillWriter,
        table: 'events',
        ...backfillHooks,
        erased,
        onStored: async (messages, generation) => {
          eraser.stored(messages, generation);
          await backfillHooks.onStored(messages);
        },
      },
      deps,
    ),
  ];
  // Keyed surface-B events: each partition landed by one instance at a time, holding its workspaces' keys.
  let keyed: KeyedOwnership | undefined;
  const startKeyed = async () => {
    const stream = await t.jsm.streams.info(STREAM_EVENTS);
    keyed = new KeyedOwnership(t.sql, t.log.child({ mod: 'keyed-writer' }), {
      holder: t.instance,
      partitions: KEYED_PARTITIONS,
      scope: stream.created,
      ttlMs: cfg.KEYED_WRITER_LEASE_MS,
      start: (p, signal) => startKeyedWriter(p, signal),
    });
    keyed.start();
  };
  const startKeyedWriter = async (p: number, signal: AbortSignal): Promise<ClickhouseWriter> => {
    // Messages a previous owner held come again once their ack wait has run out, and JetStream
    // hands out redeliveries before new messages: pulling only then keeps the stream order. Its
    // last pull may still be open (a handover frees the lease as soon as the writer stopped) and
    // take messages it will never see: looked at once that pull has expired.
    await abortableSleep(PULL_EXPIRES_MS + 500, signal);
    if (signal.aborted) throw new Error('keyed partition lease lost while starting');
    const c = await t.jsm.consumers.info(STREAM_EVENTS, keyedWriter(p));
    if (c.num_ack_pending > 0) {
      const waitMs = (c.config.ack_wait ?? 30e9) / 1e6 + 3_000;
      t.log.info(
        { partition: p, wait_ms: waitMs, pending: c.num_ack_pending },
        'keyed writer waits for its messages to come again',
      );
      await abortableSleep(waitMs, signal);
      if (signal.aborted) throw new Error('keyed partition lease lost while starting');
    }
    const w = new ClickhouseWriter(
      {
        ...common,
        consumer: keyedWriter(p),
        table: 'events',
        erased,
        keys: new KeysStore(t.ch, t.log.child({ mod: 'keyed-writer', partition: p })),
        onStored: async (messages, generation) => {
          eraser.stored(messages, generation);
          await backfillHooks.onStored(messages);
        },
        onDeadLettered: backfillHooks.onDeadLettered,
      },
      deps,
    );
    await w.start();
    return w;
  };
  return {
    writers,
    async start() {
      // Rows of erased customers are dropped from the first insert on.
      await erased.start();
      for (const w of writers) await w.start();
      if (cfg.SURFACE_B_DEDUP === 'stream') await startKeyed();
    },
    async drain() {
      await Promise.all([...writers.map((w) => w.stop()), keyed?.stop()]);
      await erased.stop();
    },
    close: () => pool.destroy(),
  };
}

/** The event catalog of live events (which also marks workspaces for event playbooks) and of backfills. */
export function catalogsJob(t: Tier): Job {
  const catalogs = [
    new EventCatalog(
      t.js,
      t.sql,
      consumers.catalog,
      t.log,
      new EventMarks(t.sql, t.log.child({ module: 'playbooks' })),
    ),
    new EventCatalog(t.js, t.sql, consumers.catalogBackfill, t.log),
    new EventCatalog(
      t.js,
      t.sql,
      consumers.catalogKeyed,
      t.log,
      new EventMarks(t.sql, t.log.child({ module: 'playbooks' })),
    ),
  ];
  return {
    async start() {
      for (const c of catalogs) await c.start();
    },
    async drain() {
      await Promise.all(catalogs.map((c) => c.stop()));
    },
  };
}

const relayOptions = (cfg: ProcessorsSettings) => ({
  pollMs: cfg.OUTBOX_POLL_MS,
  batch: 500,
  keepMs: 7 * 24 * 3600_000,
  tenants: commaList(cfg.OUTBOX_TENANTS),
});

/** The generated-event outbox relayed to JetStream as system events. */
export function outboxJob(t: Tier, outboxMetrics: OutboxMetrics): Job {
  const relay = new OutboxRelay(
    t.sql,
    new SystemEvents(t.js, 5000),
    t.log.child({ module: 'outbox' }),
    outboxMetrics,
    relayOptions(t.cfg),
  );
  return { start: () => relay.start(), stop: () => relay.stop() };
}

/** Webhooks: their outbox relayed to the WEBHOOKS stream, fanned out to subscriptions, delivered and retried. */
export function webhooksJob(t: Tier, outboxMetrics: OutboxMetrics, dataCipher: DataCipher | undefined): Job {
  const { cfg, webhookSql } = t;
  const log = t.log.child({ module: 'webhooks' });
  const relay = new OutboxRelay(webhookSql, new WebhookEvents(t.js, 5000), log, outboxMetrics, relayOptions(cfg));
  const sender = new Sender({
    timeoutMs: cfg.WEBHOOK_TIMEOUT_MS,
    maxSockets: cfg.WEBHOOK_CONCURRENCY,
    policy: { allowHttp: cfg.WEBHOOK_ALLOW_HTTP, allowPrivate: cfg.WEBHOOK_ALLOW_PRIVATE },
    userAgent: 'cs-platform-webhooks/1',
  });
  /** A webhook secret as stored: a ciphertext, or kept in clear from before secrets were encrypted (until rotated). */
  const openSecret = (stored: string) => {
    if (!isCiphertext(stored)) return stored;
    if (!dataCipher) throw new Error('no DATA_ENCRYPTION_KEY is configured');
    return dataCipher.decrypt(stored);
  };
  const dispatcher = new WebhookDispatcher(webhookSql, sender, log, {
    concurrency: cfg.WEBHOOK_CONCURRENCY,
    perEndpoint: cfg.WEBHOOK_ENDPOINT_CONCURRENCY,
    pollMs: cfg.WEBHOOK_POLL_MS,
    timeoutMs: cfg.WEBHOOK_TIMEOUT_MS,
    retryScheduleMs: cfg.WEBHOOK_RETRY_SCHEDULE.split(',').map((x) => Number(x.trim())),
    disableAfterMs: cfg.WEBHOOK_DISABLE_AFTER_MS,
    tenants: commaList(cfg.WEBHOOK_TENANTS),
    openSecret,
    metrics: new WebhookMetrics(t.metrics.registry),
  });
  const fanout = new WebhookFanout(t.js, webhookSql, consumers.webhookFanout, log, () => dispatcher.wake());
  return {
    async start() {
      relay.start();
      await fanout.start();
      dispatcher.start();
    },
    async stop() {
      await Promise.all([relay.stop(), dispatcher.stop()]);
    },
    drain: () => fanout.stop(),
    close: () => sender.close(),
  };
}

/** Integrations: playbook notifications sent through the providers, tokens refreshed, Zendesk tickets backfilled. */
export function integrationsJob(t: Tier, providers: Providers, dataCipher: DataCipher | undefined): Job {
  const { cfg, webhookSql } = t;
  const log = t.log.child({ module: 'integrations' });
  const accessTokens =
    dataCipher &&
    new AccessTokens(
      webhookSql,
      providers,
      dataCipher,
      log,
      REFRESH_MARGIN_MS,
      IntegrationMetrics.of(t.metrics.registry),
    );
  const tenants = commaList(cfg.INTEGRATION_TENANTS);
  const notifier = new Notifier(webhookSql, accessTokens, log, {
    pollMs: cfg.NOTIFY_POLL_MS,
    tenants,
    retries: cfg.INTEGRATION_NOTIFY_RETRIES,
    retryBaseMs: cfg.INTEGRATION_NOTIFY_RETRY_BASE_MS,
  });
  const refresher = new TokenRefresher(webhookSql, accessTokens, log, {
    pollMs: cfg.INTEGRATION_REFRESH_POLL_MS,
    tenants,
  });
  const backfill = new ZendeskBackfill(webhookSql, accessTokens, log, {
    pollMs: cfg.INTEGRATION_REFRESH_POLL_MS,
    tenants,
  });
  // A new Zendesk connection is backfilled at once, not at the next look.
  const requests = new IntegrationRequests(t.nc, log, ['zendesk'], (tenantId) => backfill.requested(tenantId));
  return {
    start() {
      notifier.start();
      refresher.start();
      backfill.start();
      requests.start();
    },
    async stop() {
      requests.stop();
      await Promise.all([notifier.stop(), refresher.stop(), backfill.stop()]);
    },
  };
}

/** The alert thresholds, shared by the API key spike check and the usage drop check after health runs. */
function alertThresholds(cfg: ProcessorsSettings) {
  return {
    keySpikeFactor: cfg.ALERTS_KEY_SPIKE_FACTOR,
    keySpikeFloor: cfg.ALERTS_KEY_SPIKE_FLOOR,
    dropRatio: cfg.ALERTS_USAGE_DROP_RATIO,
    dropMinWeekly: cfg.ALERTS_USAGE_DROP_MIN_WEEKLY,
  };
}

/** The api_key_usage_spike alert check (usage_drop runs after each health run: healthJob). */
export function alertsJob(t: Tier): Job {
  const log = t.log.child({ module: 'alerts' });
  const keySpikes = new KeySpikes(t.sql, alertThresholds(t.cfg), log, t.cfg.ALERTS_KEY_INTERVAL_MS);
  return { start: () => keySpikes.start(), stop: () => keySpikes.stop() };
}

/** Playbooks: evaluated on request, on a schedule, after events, and after health and metrics runs (afterRuns). */
export function playbooksJob(t: Tier): Job & { afterRuns: AfterRuns } {
  const { cfg } = t;
  const log = t.log.child({ module: 'playbooks' });
  const evaluator = new Evaluator({ sql: t.sql, ch: t.ch, log });
  const runner = new PlaybookRunner(t.sql, evaluator, log, cfg.PLAYBOOKS_CONCURRENCY);
  const afterRuns = new AfterRuns(runner, log);
  const tenants = commaList(cfg.PLAYBOOKS_TENANTS);
  const schedule = new LeasedSchedule(
    t.sql,
    { run: (tenantId, stopping) => runner.runWorkspace(tenantId, 'schedule', undefined, stopping) },
    log,
    {
      job: 'playbooks',
      intervalMs: cfg.PLAYBOOKS_INTERVAL_MS,
      leaseTtlMs: cfg.PLAYBOOKS_LEASE_TTL_MS,
      holder: t.instance,
      tenants,
    },
  );
  const eventLoop = new EventLoop(t.sql, runner, log, {
    pollMs: cfg.PLAYBOOKS_EVENT_POLL_MS,
    settleMs: cfg.PLAYBOOKS_EVENT_SETTLE_MS,
    tenants,
  });
  const responder = playbookRunResponder(t.nc, evaluator, log);
  return {
    afterRuns,
    start() {
      responder.start();
      schedule.start();
      eventLoop.start();
    },
    async stop() {
      await Promise.all([responder.stop(), schedule.stop(), eventLoop.stop(), afterRuns.stop()]);
    },
  };
}

/** Metrics: materialized on request and on a schedule; a run that wrote values asks for a playbook evaluation. */
export function metricsJob(t: Tier, afterRuns: AfterRuns): Job {
  const { cfg } = t;
  const log = t.log.child({ module: 'metrics' });
  const materializer = new Materializer({ sql: t.sql, ch: t.ch, log, instance: t.instance });
  const schedule = new LeasedSchedule(
    t.sql,
    {
      run: async (tenantId, stopping) => {
        const r = await materializer.materializeWorkspace(tenantId, stopping);
        if (r.metrics) afterRuns.request(tenantId, 'metrics');
        return r;
      },
    },
    log,
    {
      job: 'metrics',
      intervalMs: cfg.METRICS_MATERIALIZE_INTERVAL_MS,
      leaseTtlMs: cfg.METRICS_LEASE_TTL_MS,
      holder: t.instance,
      tenants: commaList(cfg.METRICS_TENANTS),
    },
  );
  const responder = materializeNowResponder(t.nc, t.sql, materializer, log);
  return {
    start() {
      responder.start();
      schedule.start();
    },
    async stop() {
      await Promise.all([schedule.stop(), responder.stop()]);
    },
  };
}

/**
 * Health scores: recalculated on request and on a schedule, with their history kept and trimmed
 * (HEALTH_ENABLED: false builds the parts but starts none). A scheduled run asks for a playbook
 * evaluation and checks the workspace's customers for usage drops.
 */
export function healthJob(t: Tier, afterRuns: AfterRuns): Job {
  const { cfg, sql, ch } = t;
  const log = t.log.child({ module: 'health' });
  const alertsLog = t.log.child({ module: 'alerts' });
  const thresholds = alertThresholds(cfg);
  const pool = new Piscina<ScoreTask, Scored>({
    filename: fileURLToPath(new URL('./health/score-worker.js', import.meta.url)),
    minThreads: 0,
    maxThreads: cfg.PROCESSORS_THREADS,
    idleTimeout: 30_000,
  });
  const metrics = new HealthMetrics(t.metrics.registry);
  const scorer = new HealthScorer({
    sql,
    ch,
    pool,
    log,
    metrics,
    poolMinCustomers: cfg.HEALTH_POOL_MIN_CUSTOMERS,
    instance: t.instance,
  });
  const history = new HistoryBuffer(ch, log, t.instance);
  const scheduler = new HealthScheduler(
    sql,
    scorer,
    log,
    metrics,
    {
      intervalMs: cfg.HEALTH_RECALC_INTERVAL_MS,
      leaseTtlMs: cfg.HEALTH_LEASE_TTL_MS,
      holder: t.instance,
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
  const responder = recalculateResponder(t.nc, scorer, history, log, metrics, { lanes: cfg.HEALTH_RECALC_LANES });
  const retention = new HistoryRetention(ch, log);
  return {
    start() {
      if (!cfg.HEALTH_ENABLED) return;
      responder.start();
      scheduler.start();
      retention.start();
    },
    // An unfinished run is abandoned (its lease freed for another instance); requests in progress
    // are answered and their history written.
    async stop() {
      retention.stop();
      await Promise.all([scheduler.stop(), responder.stop()]);
      await history.flush();
    },
    close: () => pool.destroy(),
  };
}

/**
 * Customer erasures: queued ones carried out; the erased customers, whose rows the writers drop (the
 * writers start and stop that list); rows that landed before the list knew removed.
 */
export function erasureJob(t: Tier): Job & { eraser: Eraser; erased: ErasedCustomers } {
  const { cfg } = t;
  const log = t.log.child({ module: 'erasure' });
  const erased = new ErasedCustomers(t.sql, t.nc, log, {
    refreshMs: cfg.ERASURE_FILTER_REFRESH_MS,
    watchMs: cfg.ERASURE_WATCH_MS,
    onLearned: (tenants) => eraser.report(tenants),
  });
  const eraser = new Eraser(t.sql, t.ch, log, erased, {
    holder: t.instance,
    pollMs: cfg.ERASURE_POLL_MS,
    leaseTtlMs: cfg.ERASURE_LEASE_TTL_MS,
    tenants: commaList(cfg.ERASURE_TENANTS),
    watchMs: cfg.ERASURE_WATCH_MS,
    sweepMs: cfg.ERASURE_SWEEP_MS,
    fullSweepMs: cfg.ERASURE_FULL_SWEEP_MS,
  });
  return { eraser, erased, start: () => eraser.start(), stop: () => eraser.stop() };
}

/** The EVENTS and WEBHOOKS streams trimmed below their consumers' floor. */
export function trimmerJob(t: Tier): Job {
  const trimmer = new StreamTrimmer(t.jsm, [STREAM_EVENTS, STREAM_WEBHOOKS], t.log.child({ mod: 'stream-trimmer' }));
  return { start: () => trimmer.start(), stop: () => trimmer.stop() };
}
