import { createLogger } from '../lib/logger.js';
import { connectNats, STREAM_DLQ, STREAM_EVENTS, STREAM_WEBHOOKS, subjects, tenantOfSubject } from '../lib/nats.js';
import { connectPg } from '../lib/pg.js';
import { SharedRateLimiter } from '../lib/rate-limit.js';
import { announceListening, onRebalance, onShutdown } from '../lib/lifecycle.js';
import { listenOrExit, loadUws } from '../lib/http/uws.js';
import { ingestApp } from './app.js';
import { drain, rebalance, traffic as newTraffic } from '../lib/http/traffic.js';
import { Invalidations } from '../lib/credentials/invalidations.js';
import { IngestionKeys } from './keys.js';
import { IngestMetrics } from './metrics.js';
import { PoolProbe, watchNats } from '../lib/prometheus.js';
import { StreamLag } from '../lib/stream-lag.js';
import { Publisher } from './publisher.js';
import { BufferPool } from '../lib/buffer-pool.js';
import { Resolver } from './resolver.js';
import { DailyQuota, type DailyQuotas } from './quota.js';
import { EventQuery } from './surface-b/query.js';
import { SurfaceBStore } from './surface-b/store.js';
import { Ticker } from '../lib/ticker.js';
import { ApiKeyStore } from '../lib/credentials/api-keys.js';
import { AuditLog } from '../lib/credentials/audit.js';
import { Authenticator, RevokedFamilies } from '../lib/credentials/authenticate.js';
import type { Allowlist } from '../lib/credentials/ip.js';
import { SharedTokenVerifier } from '../lib/credentials/tokens.js';
import type { IngestSettings } from './config.js';

/** One ingest process: both surfaces on the shared port until shutdown (ingest/main.ts starts it). */
export async function serve(
  cfg: IngestSettings,
  quotas: DailyQuotas,
  proxies: Allowlist,
  env: NodeJS.ProcessEnv,
): Promise<void> {
  const log = createLogger('ingest', cfg.LOG_LEVEL);
  const uws = loadUws(env);
  const sql = connectPg(cfg.DATABASE_URL, cfg.INGEST_PG_POOL);
  // A turn's publishes leave together (ingest/publisher.ts): up to 16 MB, 300 requests' rows.
  const nc = await connectNats(cfg.NATS_URL, `ingest-${process.pid}`, log, { pendingBytes: 16 * 1024 * 1024 });
  const keys = new IngestionKeys(sql);
  await keys.load();
  const resolver = new Resolver(sql, {
    negativeTtlMs: cfg.CUSTOMER_CACHE_NEGATIVE_TTL_MS,
    maxEntriesPerTenant: 500_000,
    maxAgeMs: cfg.CUSTOMER_CACHE_MAX_AGE_MS,
  });
  const apiKeys = new ApiKeyStore(sql);
  const revoked = new RevokedFamilies();
  const tokens = new SharedTokenVerifier(sql, {
    publicPem: cfg.JWT_PUBLIC_KEY,
    kid: cfg.JWT_KEY_ID,
    issuer: (cfg.JWT_ISSUER || cfg.PUBLIC_BASE_URL).replace(/\/+$/, ''),
  });
  await tokens.load();
  // Access tokens live an hour at most (SPEC.md); a day covers any configured lifetime.
  await revoked.load(sql, 86_400);
  const invalidations = new Invalidations(nc, log.child({ mod: 'invalidations' }))
    .on(subjects.apiKeyRevoked, (id) => apiKeys.invalidate(id))
    .on(subjects.familyRevoked, (id) => revoked.add(id))
    .on(subjects.ingestionKeyChanged, (tenantId) => keys.invalidate(tenantId));
  await invalidations.start({ watch: false });
  // Invalidations sent while we were cut off from NATS were missed: forget what we cached.
  void (async () => {
    for await (const s of nc.status())
      if (s.type === 'reconnect') {
        apiKeys.clear();
        resolver.invalidateAll();
        await keys.load().catch(() => {});
        await revoked.load(sql, 86_400).catch(() => {});
      }
  })();
  nc.subscribe(subjects.customersChanged('*'), {
    callback: (_e, m) => resolver.invalidateCustomers(tenantOfSubject(m.subject) ?? ''),
  });
  nc.subscribe(subjects.productsChanged('*'), {
    callback: (_e, m) => resolver.invalidateProducts(tenantOfSubject(m.subject) ?? ''),
  });

  const traffic = newTraffic(cfg.INGEST_MAX_INFLIGHT_BYTES);
  traffic.bodies = new BufferPool();
  const limiter = new SharedRateLimiter(sql);
  const quota = new DailyQuota(sql, limiter, quotas);
  const metrics = new IngestMetrics();
  const publisher = new Publisher(nc, cfg.INGEST_PUBLISH_TIMEOUT_MS, undefined, metrics);
  watchNats(nc, metrics.registry);
  const poolProbe = new PoolProbe(metrics.registry, { ingest: sql }, cfg.GAUGES_INTERVAL_MS);
  poolProbe.start();
  // The streams' freshness, sampled by one process of the tier (the first slot, or the only process).
  const lag =
    (env.INGEST_WORKER ?? '0') === '0'
      ? new StreamLag(
          await nc.jetstreamManager({ checkAPI: false }),
          metrics.registry,
          log.child({ mod: 'stream-lag' }),
          {
            consumersOf: [STREAM_EVENTS, STREAM_WEBHOOKS],
            sizesOf: [STREAM_EVENTS, STREAM_WEBHOOKS, STREAM_DLQ],
            everyMs: cfg.GAUGES_INTERVAL_MS,
          },
        )
      : undefined;
  lag?.start();
  const audit = new AuditLog(sql, log.child({ mod: 'audit' }));
  const store = new SurfaceBStore(
    sql,
    publisher,
    quota,
    {
      maxPayloadBytes: cfg.EVENTS_MAX_PAYLOAD_BYTES,
      idempotencyWaitMs: cfg.IDEMPOTENCY_WAIT_MS,
      // Past the publisher's whole budget (three PubAck waits), with room for the statements around it.
      reservationMs: 3 * cfg.INGEST_PUBLISH_TIMEOUT_MS + 15_000,
      dedupAt: cfg.SURFACE_B_DEDUP,
    },
    log.child({ mod: 'surface-b' }),
  );
  await store.listen();
  // Every ingest process sweeps now and then; the statements are safe to run concurrently.
  const sweeper = new Ticker(
    60_000,
    async () => {
      const n = await store.sweepExpired();
      if (n) log.warn({ reservations: n }, 'released the keys of surface-B requests whose process died');
    },
    (err) => log.warn({ err: String((err as Error).message ?? err) }, 'sweeping expired reservations failed'),
  );
  sweeper.start(30_000);
  const app = ingestApp(
    uws.App(),
    {
      keys,
      resolver,
      limiter,
      quota,
      publisher,
      metrics,
      log,
      traffic,
      opts: {
        maxBodyBytes: cfg.INGEST_MAX_BODY_BYTES,
        requestsPerMinute: cfg.INGEST_RATE_LIMIT_PER_MIN,
        futureSkewMs: cfg.INGEST_FUTURE_SKEW_MS,
        ageGraceMs: cfg.INGEST_AGE_GRACE_MS,
      },
    },
    {
      auth: new Authenticator(apiKeys, tokens, revoked),
      audit,
      limiter,
      quota,
      resolver,
      metrics,
      log,
      store,
      events: new EventQuery(cfg.CLICKHOUSE_URL, cfg.CLICKHOUSE_DATABASE, cfg.EVENTS_QUERY_TIMEOUT_MS),
      baseUrl: cfg.PUBLIC_BASE_URL.replace(/\/+$/, ''),
      trustedProxies: proxies,
      traffic,
      opts: {
        maxBodyBytes: cfg.EVENTS_MAX_BODY_BYTES,
        batchesPerMinute: cfg.EVENTS_BATCHES_PER_MIN,
        backfillsPerMinute: cfg.EVENTS_BACKFILLS_PER_MIN,
        readsPerMinute: cfg.EVENTS_READS_PER_MIN,
        futureSkewMs: cfg.INGEST_FUTURE_SKEW_MS,
        ageGraceMs: cfg.INGEST_AGE_GRACE_MS,
      },
    },
    { ready: () => !nc.isClosed(), metrics },
  );

  const listenSocket = await listenOrExit(app, cfg.INGEST_HOST, cfg.INGEST_PORT, log);
  log.info({ host: cfg.INGEST_HOST, port: cfg.INGEST_PORT }, 'ingest listening');
  onRebalance((closes) => rebalance(traffic, closes));
  announceListening();

  onShutdown(log, async () => {
    // Stop accepting connections; answer what still comes on open ones (closing each after its
    // answer) until requests stop arriving and every one has its PubAck; only then let NATS go.
    uws.us_listen_socket_close(listenSocket);
    await drain(traffic, Date.now() + 10_000);
    invalidations.stop();
    poolProbe.stop();
    await lag?.stop();
    await sweeper.stop();
    await audit.close();
    await nc.drain();
    await sql.end({ timeout: 5 });
    log.info('ingest stopped');
  });
}
