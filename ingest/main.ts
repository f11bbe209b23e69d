import os from 'node:os';
import Type from 'typebox';
import { loadConfig, ConfigError } from '../lib/config.js';
import { createLogger } from '../lib/logger.js';
import { connectNats, subjects } from '../lib/nats.js';
import { connectPg } from '../lib/pg.js';
import { SharedRateLimiter } from '../lib/rate-limit.js';
import { onShutdown, supervise } from '../lib/lifecycle.js';
import { loadUws, type ListenSocket } from '../lib/uws.js';
import { routes, type Traffic } from './app.js';
import { IngestionKeys } from './keys.js';
import { IngestMetrics } from './metrics.js';
import { Publisher } from './publisher.js';
import { Resolver } from './resolver.js';

export const IngestConfig = Type.Object({
  INGEST_HOST: Type.String({ default: '127.0.0.1', description: 'Address the ingest tier listens on.' }),
  INGEST_PORT: Type.Integer({ default: 3100, description: 'Port of surface A (shared by all ingest processes).' }),
  INGEST_PROCESSES: Type.Integer({ minimum: 1, default: os.availableParallelism(), description: 'Ingest processes sharing the port (SO_REUSEPORT); default one per core.' }),
  NATS_URL: Type.String({ default: 'nats://127.0.0.1:14222' }),
  DATABASE_URL: Type.String({ default: 'postgres://postgres@127.0.0.1:15432/csp' }),
  INGEST_RATE_LIMIT_PER_MIN: Type.Integer({ minimum: 1, default: 300, description: 'Requests per minute per organization, shared by both surface-A endpoints.' }),
  INGEST_MAX_BODY_BYTES: Type.Integer({ minimum: 1024, default: 1024 * 1024, description: 'Request body cap, before and after gunzip (413 beyond).' }),
  INGEST_PUBLISH_TIMEOUT_MS: Type.Integer({ minimum: 100, default: 5000, description: 'Time to wait for a JetStream PubAck before retrying with the same message id.' }),
  INGEST_FUTURE_SKEW_MS: Type.Integer({ minimum: 0, default: 300_000, description: 'How far ahead of the server clock a timestamp may be.' }),
  INGEST_AGE_GRACE_MS: Type.Integer({ minimum: 0, default: 60_000, description: 'Allowance on the 30-day window for clock skew and transit.' }),
  CUSTOMER_CACHE_NEGATIVE_TTL_MS: Type.Integer({ minimum: 0, default: 1000, description: 'How long an unknown customer reference is remembered.' }),
  LOG_LEVEL: Type.String({ default: 'info' }),
});

const boot = createLogger('ingest');
let cfg: ReturnType<typeof loadConfig<typeof IngestConfig>>;
try {
  cfg = loadConfig(IngestConfig);
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  boot.fatal(err.message);
  process.exit(1);
}

if (cfg.INGEST_PROCESSES > 1 && process.env.INGEST_WORKER === undefined) {
  boot.info({ processes: cfg.INGEST_PROCESSES, port: cfg.INGEST_PORT }, 'starting ingest processes');
  supervise(boot, cfg.INGEST_PROCESSES, 'INGEST_WORKER');
} else {
  await serve();
}

async function serve(): Promise<void> {
  const log = createLogger('ingest', cfg.LOG_LEVEL);
  const uws = loadUws();
  const sql = connectPg(cfg.DATABASE_URL, 8);
  const nc = await connectNats(cfg.NATS_URL, `ingest-${process.pid}`, log);
  const js = nc.jetstream();
  const keys = new IngestionKeys(sql);
  await keys.load();
  const resolver = new Resolver(sql, { negativeTtlMs: cfg.CUSTOMER_CACHE_NEGATIVE_TTL_MS, maxEntriesPerTenant: 500_000, productTtlMs: 60_000 });
  nc.subscribe(subjects.ingestionKeyChanged, { callback: (_e, m) => keys.invalidate(m.string()) });
  nc.subscribe(subjects.customersChanged('*'), { callback: (_e, m) => resolver.invalidateCustomers(m.subject.split('.')[2]) });
  nc.subscribe(subjects.productsChanged('*'), { callback: (_e, m) => resolver.invalidateProducts(m.subject.split('.')[2]) });

  const traffic: Traffic = { inflight: 0, lastRequestAt: 0, draining: false, closed: false };
  const app = routes(uws.App(), {
    keys, resolver, limiter: new SharedRateLimiter(sql), publisher: new Publisher(js, cfg.INGEST_PUBLISH_TIMEOUT_MS),
    metrics: new IngestMetrics(), log, ready: () => !nc.isClosed(),
    opts: { maxBodyBytes: cfg.INGEST_MAX_BODY_BYTES, requestsPerMinute: cfg.INGEST_RATE_LIMIT_PER_MIN, futureSkewMs: cfg.INGEST_FUTURE_SKEW_MS, ageGraceMs: cfg.INGEST_AGE_GRACE_MS },
  }, traffic);

  const listenSocket = await new Promise<ListenSocket>((resolve, reject) => {
    app.listen(cfg.INGEST_HOST, cfg.INGEST_PORT, (s) => (s ? resolve(s) : reject(new Error(`cannot listen on ${cfg.INGEST_HOST}:${cfg.INGEST_PORT}`))));
  }).catch((err: Error) => {
    log.fatal(err.message);
    process.exit(1);
  });
  log.info({ host: cfg.INGEST_HOST, port: cfg.INGEST_PORT }, 'ingest listening');

  onShutdown(log, async () => {
    // Stop accepting connections; answer what still comes on open ones (closing each after its
    // answer) until requests stop arriving and every one has its PubAck; only then let NATS go.
    uws.us_listen_socket_close(listenSocket);
    traffic.draining = true;
    const deadline = Date.now() + 10_000;
    while ((traffic.inflight > 0 || Date.now() - traffic.lastRequestAt < 250) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    traffic.closed = true;
    while (traffic.inflight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await nc.drain();
    await sql.end({ timeout: 5 });
    log.info('ingest stopped');
  });
}
