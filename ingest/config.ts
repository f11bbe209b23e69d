import os from 'node:os';
import Type, { type Static } from '#typebox';
import { INGEST_LIMITS } from '../schemas/ingest-limits.js';
import { SurfaceBDedup } from '../lib/config.js';

/**
 * Every variable the ingest tier reads, with its default (STYLE.md: one schema per process);
 * ingest/main.ts loads it at start. docs/configuration.md is generated from it (npm run docs:config).
 */
export const IngestConfig = Type.Object({
  INGEST_HOST: Type.String({ default: '127.0.0.1', description: 'Address the ingest tier listens on.' }),
  INGEST_PORT: Type.Integer({
    default: 3100,
    description: 'Port of both surfaces, shared by all ingest processes (SO_REUSEPORT).',
  }),
  INGEST_PROCESSES: Type.Integer({
    minimum: 1,
    default: os.availableParallelism(),
    docsDefault: 'one per core',
    description:
      'Processes serving the port (SO_REUSEPORT); a supervisor restarts any that dies, and has one that was much the ' +
      'busiest for 4 s (1.5 × the CPU of the least busy, and half a core or more) close its clients’ connections ' +
      'once, so that the kernel spreads them again.',
  }),
  NATS_URL: Type.String({
    default: 'nats://127.0.0.1:14222',
    description:
      'NATS with JetStream, where accepted events are published: servers, comma-separated (every server of a ' +
      'cluster; the client fails over between them).',
  }),
  DATABASE_URL: Type.String({
    default: 'postgres://postgres@127.0.0.1:15432/csp',
    description:
      'PostgreSQL, the source of truth (every tier uses the same database): ingestion keys, customers, ' +
      'deduplication keys, quotas.',
  }),
  SURFACE_B_DEDUP: SurfaceBDedup,
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
    description:
      'Time to wait for a JetStream PubAck before publishing again under the same message id; a request may spend ' +
      'three times this publishing (transient failures such as a restarting nats-server are retried with backoff ' +
      'within that budget).',
  }),
  GAUGES_INTERVAL_MS: Type.Integer({
    minimum: 100,
    default: 5000,
    description:
      "How often /metrics' sampled gauges are refreshed: the streams' consumers (unacknowledged messages, the age of " +
      "the oldest), the streams' sizes (the dead-letter stream) and the PostgreSQL pool probe (docs/operations.md).",
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
    description:
      'How long an unknown customer reference ("no such customer") is remembered; invalidations clear it sooner.',
  }),
  CUSTOMER_CACHE_MAX_AGE_MS: Type.Integer({
    minimum: 1000,
    default: 60_000,
    description:
      "A tenant's customer and product caches are refreshed in the background after this long even without " +
      'invalidations (a missed invalidation heals); customers are dropped at twice this age if their refresh has ' +
      'not landed.',
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
      'Ed25519 public key (SPKI PEM, \\n allowed) of core-api access tokens; empty: read from PostgreSQL ' +
      '(signing_keys).',
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
  CLICKHOUSE_DATABASE: Type.String({
    default: 'csp',
    description: 'ClickHouse database of the events tables GET /v1/events reads.',
  }),
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
      'Request-body bytes one process works on at once; past it new requests get 503 with Retry-After: 1 (memory ' +
      'backpressure; one request always passes).',
  }),
  INGEST_MAX_OLD_SPACE_MB: Type.Integer({
    minimum: 0,
    default: 192,
    description:
      "V8 old-space cap of each worker process when INGEST_PROCESSES > 1 (0: Node's default); keeps RSS bounded " +
      'under load.',
  }),
  INGEST_MAX_SEMI_SPACE_MB: Type.Integer({
    minimum: 0,
    default: 8,
    description:
      "V8 semi-space size of each worker process when INGEST_PROCESSES > 1 (0: Node's default, 16 MB); the young " +
      "generation takes three times it: 24 MB instead of 48 MB takes about 20 MB off each worker's RSS at the same " +
      'CPU per event (bench/RESULTS.md).',
  }),
  INGEST_SINGLE_THREADED_GC: Type.Boolean({
    default: true,
    description:
      "Each worker process collects its garbage on its own thread (V8's --single-threaded-gc) when " +
      "INGEST_PROCESSES > 1: with a process per core, V8's helper threads wait for a core and stretch the pauses; " +
      'in alternated runs at 100k events/s the half-load p99 had a median of 6.1 ms against 7.2 ms with the helper ' +
      'threads, at the same CPU per event and about 6 MB more RSS (bench/RESULTS.md).',
  }),
  LOG_LEVEL: Type.String({
    default: 'info',
    description:
      'pino level of the JSON logs (fatal, error, warn, info, debug, trace); a 5xx answer is logged with its ' +
      'trace_id.',
  }),
});

/** The ingest tier's settings, as loaded from the environment. */
export type IngestSettings = Readonly<Static<typeof IngestConfig>>;
