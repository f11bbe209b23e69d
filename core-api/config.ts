import Type from '#typebox';
import { IntegrationConfig } from '../lib/integrations/config.js';
import { MAX_CACHE_TTL_MS } from '../schemas/core/analytics.js';

/**
 * Every variable the core API reads, with its default (STYLE.md: one schema per process);
 * core-api/main.ts loads it at start. docs/configuration.md is generated from it (npm run docs:config).
 */
export const CoreApiConfig = Type.Object({
  API_HOST: Type.String({ default: '127.0.0.1', description: 'Address the core API listens on.' }),
  API_PORT: Type.Integer({
    minimum: 0,
    maximum: 65535,
    default: 3200,
    description: 'Port the core API listens on, shared by its processes.',
  }),
  API_PROCESSES: Type.Integer({
    minimum: 1,
    default: 1,
    description: 'Processes sharing the port (SO_REUSEPORT); a supervisor restarts any that dies.',
  }),
  NATS_URL: Type.String({
    default: 'nats://127.0.0.1:14222',
    description:
      'NATS: invalidations between processes and tiers, requests to the processors (recalculate, materialize, ' +
      'run); servers, comma-separated (every server of a cluster; the client fails over between them).',
  }),
  DATABASE_URL: Type.String({
    default: 'postgres://postgres@127.0.0.1:15432/csp',
    description: 'PostgreSQL, the source of truth (every tier uses the same database).',
  }),
  WEBHOOK_ALLOW_HTTP: Type.Boolean({
    default: false,
    description: 'Accept plain http:// webhook URLs; the processors read it too (npm start and the tests set it).',
  }),
  WEBHOOK_ALLOW_PRIVATE: Type.Boolean({
    default: false,
    description:
      'Accept webhook URLs whose host is loopback, private or link-local; the processors read it too (npm start ' +
      'and the tests set it).',
  }),
  DATA_ENCRYPTION_KEY: Type.String({
    default: '',
    description:
      'Keys of secrets at rest (provider tokens, webhook signing secrets; AES-256-GCM), comma-separated, each 32 ' +
      'bytes as base64 or 64 hex digits: the first encrypts, all decrypt; the same in core-api and processors; ' +
      'rotation: npm run rotate-data-key (docs/security.md). Empty (and no INTEGRATION_TOKEN_KEY): integrations ' +
      'cannot be connected nor webhook subscriptions created (503 secrets_unavailable). npm start generates one ' +
      'into .data/.',
  }),
  INTEGRATION_TOKEN_KEY: Type.String({
    default: '',
    description:
      'The earlier name of a single data key, still read (after DATA_ENCRYPTION_KEY); npm start and the tests ' +
      'generate one into .data/<profile>/integration-token.key.',
  }),
  PUBLIC_BASE_URL: Type.String({
    default: 'http://127.0.0.1:3200',
    description: 'Origin clients see: error type URIs, OAuth issuer, OpenAPI server.',
  }),
  JWT_PRIVATE_KEY: Type.String({
    default: '',
    description:
      'Ed25519 private key (PKCS#8 PEM, \\n allowed) for access tokens; empty: one key is created on first start ' +
      'and shared by every process through PostgreSQL (signing_keys).',
  }),
  JWT_KEY_ID: Type.String({
    default: 'configured',
    description: "Key id (kid) of the tokens signed with JWT_PRIVATE_KEY; without it the shared key's id is default.",
  }),
  ACCESS_TOKEN_TTL_S: Type.Integer({
    minimum: 1,
    maximum: 86_400,
    default: 3600,
    description: 'Lifetime of an access token, in seconds.',
  }),
  API_READS_PER_MIN: Type.Integer({
    minimum: 1,
    default: 1000,
    description: "Read requests per minute per workspace, unless API_PLAN_LIMITS sets its plan's.",
  }),
  API_WRITES_PER_MIN: Type.Integer({
    minimum: 1,
    default: 300,
    description: "Write requests per minute per workspace, unless API_PLAN_LIMITS sets its plan's.",
  }),
  API_BULK_IMPORTS_PER_HOUR: Type.Integer({
    minimum: 1,
    default: 10,
    description: "Bulk imports per hour per workspace, unless API_PLAN_LIMITS sets its plan's.",
  }),
  API_PLAN_LIMITS: Type.String({
    default: '{}',
    description:
      'JSON per plan overriding the defaults, e.g. ' +
      '{"enterprise":{"reads_per_min":5000,"writes_per_min":1500,"bulk_imports_per_hour":50}}.',
  }),
  API_MAX_BODY_BYTES: Type.Integer({
    minimum: 1024,
    default: 256 * 1024,
    description: 'Body cap of ordinary requests (bulk import: 8 MiB; OAuth forms: 16 KiB).',
  }),
  API_TRUSTED_PROXIES: Type.String({
    default: '127.0.0.1/32,::1/128',
    description:
      "CIDR ranges of the peers (the edge proxy) whose X-Forwarded-For (last hop) is taken as the caller's " +
      'address; empty: none.',
  }),
  CLICKHOUSE_URL: Type.String({
    default: 'http://127.0.0.1:18123',
    description:
      'ClickHouse HTTP endpoints, comma-separated, tried in order, for read-only queries: health history, event ' +
      'catalog, metric test queries, widget values.',
  }),
  CLICKHOUSE_DATABASE: Type.String({
    default: 'csp',
    description: 'ClickHouse database those queries read (on a cluster, the one holding the Distributed tables).',
  }),
  HEALTH_HISTORY_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    default: 5000,
    description: 'Timeout of one health history query; past it the answer is 503.',
  }),
  HEALTH_RECALC_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    default: 10_000,
    description: 'How long POST …/health/recalculate waits for the scorer before 503 scorer_unavailable.',
  }),
  METRICS_QUERY_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    default: 10_000,
    description: 'Timeout of a metric test query (POST /v1/metrics/test); past it the answer is 503.',
  }),
  METRICS_MATERIALIZE_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    default: 30_000,
    description:
      'How long POST /v1/metrics/{id}/materialize waits for the processors before 503 materializer_unavailable.',
  }),
  PLAYBOOK_RUN_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    default: 30_000,
    description: 'How long POST /v1/playbooks/{id}/run waits for the processors before 503 runner_unavailable.',
  }),
  HOUSEKEEPING_INTERVAL_MS: Type.Integer({
    minimum: 1000,
    default: 3_600_000,
    description:
      'How often the purges run (customers deleted over 30 days ago, idempotency keys after 24 h, OAuth codes a ' +
      'day after expiry), each by one process at a time (job_leases).',
  }),
  GAUGES_INTERVAL_MS: Type.Integer({
    minimum: 100,
    default: 15_000,
    description:
      "How often /metrics' sampled gauges are refreshed: the age of each housekeeping job's last run and the " +
      'PostgreSQL pool probe (docs/operations.md).',
  }),
  ANALYTICS_CACHE_TTL_MS: Type.Integer({
    minimum: 0,
    maximum: MAX_CACHE_TTL_MS,
    default: MAX_CACHE_TTL_MS,
    description:
      'How long an analytics answer is reused per workspace and query, at most 30 s (answers read recently are ' +
      'refreshed in the background before then); 0: never reused.',
  }),
  LOG_LEVEL: Type.String({
    default: 'info',
    description:
      'pino level of the JSON logs (fatal, error, warn, info, debug, trace); a 5xx answer is logged with its ' +
      'trace_id.',
  }),
  ...IntegrationConfig,
});
