import os from 'node:os';
import Type, { type Static } from 'typebox';
import { configOrExit, loadConfig, ConfigError } from '../lib/config.js';
import { createLogger } from '../lib/logger.js';
import { supervise } from '../lib/lifecycle.js';
import { INGEST_LIMITS } from '../schemas/ingest-limits.js';
import { parseQuotas, type DailyQuotas } from './quota.js';
import { trustedProxies } from '../lib/credentials/ip.js';

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
    description:
      "A tenant's customer and product caches are refreshed in the background after this long even without invalidations; customers are dropped at twice this age if their refresh has not landed.",
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
  INGEST_MAX_SEMI_SPACE_MB: Type.Integer({
    minimum: 0,
    default: 8,
    description:
      "V8 semi-space size of each worker process (0: Node's default, 16); the young generation takes three times it.",
  }),
  INGEST_SINGLE_THREADED_GC: Type.Boolean({
    default: true,
    description:
      "Each worker process collects its garbage on its own thread (V8's --single-threaded-gc): with a process per core, V8's helper threads wait for a core and stretch the pauses.",
  }),
  LOG_LEVEL: Type.String({ default: 'info' }),
});

/** The ingest tier's settings, as loaded from the environment. */
export type IngestSettings = Readonly<Static<typeof IngestConfig>>;

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
  supervise(boot, cfg.INGEST_PROCESSES, 'INGEST_WORKER', process.env, [
    ...(cfg.INGEST_MAX_OLD_SPACE_MB ? [`--max-old-space-size=${cfg.INGEST_MAX_OLD_SPACE_MB}`] : []),
    ...(cfg.INGEST_MAX_SEMI_SPACE_MB ? [`--max-semi-space-size=${cfg.INGEST_MAX_SEMI_SPACE_MB}`] : []),
    ...(cfg.INGEST_SINGLE_THREADED_GC ? ['--single-threaded-gc'] : []),
  ]);
} else {
  // The supervisor only forks and watches: the servers' modules (uWS, NATS, PostgreSQL, the
  // surfaces) are loaded by the processes that serve, which keeps the supervisor's memory small.
  const { serve } = await import('./serve.js');
  await serve(cfg, quotas, proxies, process.env);
}
