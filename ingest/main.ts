import os from 'node:os';
import Type from 'typebox';
import { configOrExit, loadConfig, ConfigError } from '../lib/config.js';
import { createLogger } from '../lib/logger.js';
import { connectNats, subjects, tenantOfSubject } from '../lib/nats.js';
import { connectPg } from '../lib/pg.js';
import { SharedRateLimiter } from '../lib/rate-limit.js';
import { announceListening, onRebalance, onShutdown, supervise } from '../lib/lifecycle.js';
import { loadUws, type ListenSocket } from '../lib/http/uws.js';
import { ingestApp } from './app.js';
import { drain, rebalance, traffic as newTraffic } from '../lib/http/traffic.js';
import { INGEST_LIMITS } from '../schemas/ingest-routes.js';
import { IngestionKeys } from './keys.js';
import { IngestMetrics } from './metrics.js';
import { Publisher } from './publisher.js';
import { BufferPool } from '../lib/buffer-pool.js';
import { Resolver } from './resolver.js';
import { DailyQuota, parseQuotas, type DailyQuotas } from './quota.js';
import { EventQuery } from './surface-b/query.js';
import { SurfaceBStore } from './surface-b/store.js';
import { ApiKeyStore } from '../lib/credentials/api-keys.js';
import { AuditLog } from '../lib/credentials/audit.js';
import { Authenticator, RevokedFamilies } from '../lib/credentials/authenticate.js';
import { trustedProxies } from '../lib/credentials/ip.js';
import { SharedTokenVerifier } from '../lib/credentials/tokens.js';

export const IngestConfig = Type.Object({
  INGEST_HOST: Type.String({ default: '127.0.0.1', description: 'Address the ingest tier listens on.' }),
  INGEST_PORT: Type.Integer({ default: 3100, description: 'Port of surface A (shared by all ingest processes).' }),
  INGEST_PROCESSES: Type.Integer({
    minimum: 1,
    default: os.availableParallelism(),
    description: 'Ingest processes sharing the port (SO_REUSEPORT); default one per core.',
  }),
  NATS_URL: Type.String({
    default: 'nats://127.0.0.1:14222',
    description: 'NATS servers, comma-separated (every server of a cluster; the client fails over between them).',
  }),
  DATABASE_URL: Type.String({ default: 'postgres://postgres@127.0.0.1:15432/csp' }),
  INGEST_RATE_LIMIT_PER_MIN: Type.Integer({
    minimum: 1,
    default: INGEST_LIMITS.surfaceARequestsPerMinute,
    description: 'Requests per minute per organization, shared by both surface-A endpoints.',
  }),
  INGEST_MAX_BODY_BYTES: Type.Integer({
    minimum: 1024,
    default: INGEST_LIMITS.surfaceABodyBytes,
    description: 'Request body cap, before and after gunzip (413 beyond).',
  }),
  INGEST_PUBLISH_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    default: 5000,
    description: 'Time to wait for a JetStream PubAck before retrying with the same message id.',
  }),
  INGEST_FUTURE_SKEW_MS: Type.Integer({
    minimum: 0,
    default: 300_000,
    description: 'How far ahead of the server clock a timestamp may be.',
  }),
  INGEST_AGE_GRACE_MS: Type.Integer({
    minimum: 0,
    default: 60_000,
    description: 'Allowance on the 30-day window for clock skew and transit.',
  }),
  CUSTOMER_CACHE_NEGATIVE_TTL_MS: Type.Integer({
    minimum: 0,
    default: 1000,
    description: 'How long an unknown customer reference is remembered.',
  }),
  CUSTOMER_CACHE_MAX_AGE_MS: Type.Integer({
    minimum: 1000,
    default: 60_000,
    description: "A tenant's customer cache is rebuilt after this long even without invalidations.",
  }),
  INGEST_PG_POOL: Type.Integer({
    minimum: 2,
    default: 16,
    description: 'PostgreSQL connections per ingest process (surface B holds one per request until the PubAck).',
  }),
  PUBLIC_BASE_URL: Type.String({
    default: 'http://127.0.0.1:3200',
    description: 'Origin clients see; problem+json type URIs of surface B.',
  }),
  INGEST_TRUSTED_PROXIES: Type.String({
    default: '127.0.0.1/32,::1/128',
    description: 'CIDR ranges whose X-Forwarded-For is believed (the edge) for API-key IP allowlists; empty: none.',
  }),
  JWT_PUBLIC_KEY: Type.String({
    default: '',
    description:
      'Ed25519 public key (SPKI PEM, \\n allowed) of core-api access tokens; empty: read from PostgreSQL (signing_keys).',
  }),
  JWT_KEY_ID: Type.String({
    default: 'default',
    description: 'signing_keys row to read when JWT_PUBLIC_KEY is empty.',
  }),
  JWT_ISSUER: Type.String({
    default: '',
    description:
      "Required iss of access tokens, core-api's PUBLIC_BASE_URL (aud: it + /v1); empty: this tier's PUBLIC_BASE_URL.",
  }),
  CLICKHOUSE_URL: Type.String({
    default: 'http://127.0.0.1:18123',
    description: 'ClickHouse HTTP endpoints for GET /v1/events, comma-separated, tried in order.',
  }),
  CLICKHOUSE_DATABASE: Type.String({ default: 'csp' }),
  EVENTS_QUERY_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    default: 10_000,
    description: 'Timeout of one GET /v1/events query.',
  }),
  EVENTS_BATCHES_PER_MIN: Type.Integer({
    minimum: 1,
    default: INGEST_LIMITS.batchesPerMinute,
    description: 'POST /v1/events requests per minute per workspace.',
  }),
  EVENTS_BACKFILLS_PER_MIN: Type.Integer({
    minimum: 1,
    default: INGEST_LIMITS.backfillsPerMinute,
    description: 'POST /v1/events/backfill requests per minute per workspace.',
  }),
  EVENTS_READS_PER_MIN: Type.Integer({
    minimum: 1,
    default: INGEST_LIMITS.readsPerMinute,
    description: 'GET /v1/events requests per minute per workspace.',
  }),
  EVENTS_MAX_BODY_BYTES: Type.Integer({
    minimum: 1024,
    default: INGEST_LIMITS.surfaceBBodyBytes,
    description: 'Surface B body cap, before and after gunzip (413 beyond).',
  }),
  EVENTS_MAX_PAYLOAD_BYTES: Type.Integer({
    minimum: 65_536,
    default: 8 * 1024 * 1024 - 65_536,
    description: 'Largest stored form of one surface-B request (one JetStream message).',
  }),
  EVENTS_DAILY_QUOTAS: Type.String({
    default: 'starter=1000000,growth=10000000,scale=100000000,enterprise=unlimited',
    description: 'Events per UTC day by plan, both surfaces together; unlimited or a plan left out: no quota.',
  }),
  IDEMPOTENCY_WAIT_MS: Type.Integer({
    minimum: 100,
    default: 10_000,
    description: 'How long a request waits for another one holding the same Idempotency-Key before answering 409.',
  }),
  INGEST_MAX_INFLIGHT_BYTES: Type.Integer({
    minimum: 1024,
    default: 16 * 1024 * 1024,
    description:
      'Request-body bytes one process works on at once; past it new requests get 503 with Retry-After (memory backpressure).',
  }),
  INGEST_MAX_OLD_SPACE_MB: Type.Integer({
    minimum: 0,
    default: 192,
    description: "V8 old-space cap of each worker process (0: Node's default); bounds RSS under load.",
  }),
  LOG_LEVEL: Type.String({ default: 'info' }),
});

const boot = createLogger('ingest');
const { cfg, quotas, proxies } = configOrExit(boot, () => {
  const cfg = loadConfig(IngestConfig, process.env);
  let quotas: DailyQuotas;
  try {
    quotas = parseQuotas(cfg.EVENTS_DAILY_QUOTAS);
  } catch (err) {
    throw new ConfigError(`invalid configuration:\n  EVENTS_DAILY_QUOTAS: ${(err as Error).message}`);
  }
  return { cfg, quotas, proxies: trustedProxies('INGEST_TRUSTED_PROXIES', cfg.INGEST_TRUSTED_PROXIES) };
});

if (cfg.INGEST_PROCESSES > 1 && process.env.INGEST_WORKER === undefined) {
  boot.info({ processes: cfg.INGEST_PROCESSES, port: cfg.INGEST_PORT }, 'starting ingest processes');
  supervise(
    boot,
    cfg.INGEST_PROCESSES,
    'INGEST_WORKER',
    process.env,
    cfg.INGEST_MAX_OLD_SPACE_MB ? [`--max-old-space-size=${cfg.INGEST_MAX_OLD_SPACE_MB}`] : [],
  );
} else {
  await serve();
}

async function serve(): Promise<void> {
  const log = createLogger('ingest', cfg.LOG_LEVEL);
  const uws = loadUws(process.env);
  const sql = connectPg(cfg.DATABASE_URL, cfg.INGEST_PG_POOL);
  const nc = await connectNats(cfg.NATS_URL, `ingest-${process.pid}`, log);
  const js = nc.jetstream();
  const keys = new IngestionKeys(sql);
  await keys.load();
  const resolver = new Resolver(sql, {
    negativeTtlMs: cfg.CUSTOMER_CACHE_NEGATIVE_TTL_MS,
    maxEntriesPerTenant: 500_000,
    productTtlMs: 60_000,
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
  nc.subscribe(subjects.apiKeyRevoked, { callback: (_e, m) => apiKeys.invalidate(m.string()) });
  nc.subscribe(subjects.familyRevoked, { callback: (_e, m) => revoked.add(m.string()) });
  // Invalidations sent while we were cut off from NATS were missed: forget what we cached.
  void (async () => {
    for await (const s of nc.status())
      if (s.type === 'reconnect') {
        apiKeys.clear();
        resolver.invalidateAll();
        await revoked.load(sql, 86_400).catch(() => {});
      }
  })();
  nc.subscribe(subjects.ingestionKeyChanged, { callback: (_e, m) => keys.invalidate(m.string()) });
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
  const publisher = new Publisher(js, cfg.INGEST_PUBLISH_TIMEOUT_MS);
  const metrics = new IngestMetrics();
  const audit = new AuditLog(sql, log.child({ mod: 'audit' }));
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
      store: new SurfaceBStore(sql, publisher, quota, {
        maxPayloadBytes: cfg.EVENTS_MAX_PAYLOAD_BYTES,
        idempotencyWaitMs: cfg.IDEMPOTENCY_WAIT_MS,
      }),
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

  const listenSocket = await new Promise<ListenSocket>((resolve, reject) => {
    app.listen(cfg.INGEST_HOST, cfg.INGEST_PORT, (s) =>
      s ? resolve(s) : reject(new Error(`cannot listen on ${cfg.INGEST_HOST}:${cfg.INGEST_PORT}`)),
    );
  }).catch((err: Error) => {
    log.fatal(err.message);
    process.exit(1);
  });
  log.info({ host: cfg.INGEST_HOST, port: cfg.INGEST_PORT }, 'ingest listening');
  onRebalance(() => rebalance(traffic));
  announceListening();

  onShutdown(log, async () => {
    // Stop accepting connections; answer what still comes on open ones (closing each after its
    // answer) until requests stop arriving and every one has its PubAck; only then let NATS go.
    uws.us_listen_socket_close(listenSocket);
    await drain(traffic, Date.now() + 10_000);
    await audit.close();
    await nc.drain();
    await sql.end({ timeout: 5 });
    log.info('ingest stopped');
  });
}
