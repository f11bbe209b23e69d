import Type, { type Static } from '#typebox';
import { IntegrationConfig } from '../lib/integrations/config.js';
import { SurfaceBDedup } from '../lib/config.js';

/**
 * Every variable the processors tier reads, with its default (STYLE.md: one schema per process);
 * processors/main.ts loads it at start and hands each job the settings it needs.
 */
export const ProcessorsConfig = Type.Object({
  PROCESSORS_HOST: Type.String({
    default: '127.0.0.1',
    description: 'Address of the processors health/metrics endpoint.',
  }),
  PROCESSORS_PORT: Type.Integer({ default: 3300, description: 'Port of /healthz, /readyz, /metrics.' }),
  NATS_URL: Type.String({
    default: 'nats://127.0.0.1:14222',
    description:
      'NATS with JetStream, whose streams the writers and the other jobs consume: servers, comma-separated (every ' +
      'server of a cluster; the client fails over between them).',
  }),
  CLICKHOUSE_URL: Type.String({
    default: 'http://127.0.0.1:18123',
    description:
      'ClickHouse HTTP endpoints, comma-separated, tried in order (one unreachable is set aside for 5 s); on a ' +
      'cluster, every server: the writer checks each for parts of unknown status (docs/cluster.md).',
  }),
  CLICKHOUSE_DATABASE: Type.String({
    default: 'csp',
    description: 'ClickHouse database the writers insert into (on a cluster, the one holding the Distributed tables).',
  }),
  CLICKHOUSE_CLUSTER: Type.String({
    default: '',
    description:
      'Name of the ClickHouse cluster whose Distributed tables CLICKHOUSE_DATABASE holds (storage in ' +
      '<database>_local); empty: one server.',
  }),
  DATABASE_URL: Type.String({
    default: 'postgres://postgres@127.0.0.1:15432/csp',
    description:
      'PostgreSQL, the source of truth (every tier uses the same database): leases, outboxes, playbooks, webhook ' +
      'deliveries.',
  }),
  WRITER_BATCH_ROWS: Type.Integer({
    minimum: 1,
    default: 100_000,
    description: 'Rows per ClickHouse insert (upper bound).',
  }),
  WRITER_BATCH_BYTES: Type.Integer({
    minimum: 1024,
    default: 16 * 1024 * 1024,
    description:
      'Bytes per ClickHouse insert (upper bound); a busy writer holds WRITER_INSERT_STREAMS + 1 buffers of this ' +
      'size.',
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
  SURFACE_B_DEDUP: SurfaceBDedup,
  KEYED_WRITER_LEASE_MS: Type.Integer({
    minimum: 1000,
    default: 15_000,
    description:
      'Lease of a partition of the keyed events (SURFACE_B_DEDUP=stream), which one processors instance at a time ' +
      'lands: when its holder dies, another instance takes the partition over this long after its last renewal.',
  }),
  WRITER_PULL_BYTES: Type.Integer({
    minimum: 65536,
    default: 4 * 1024 * 1024,
    description:
      'Bytes requested from JetStream per pull (nats-server drops a client holding > 64 MB); 4 MB keeps processors ' +
      'under 300 MB RSS while draining a backlog at the same rate as 16 MB (bench/RESULTS.md).',
  }),
  CLICKHOUSE_TIMEOUT_MS: Type.Integer({ minimum: 1000, default: 60_000, description: 'ClickHouse request timeout.' }),
  PROCESSORS_THREADS: Type.Integer({ minimum: 1, default: 1, description: 'piscina worker threads for CPU work.' }),
  HEALTH_ENABLED: Type.Boolean({
    default: true,
    description:
      'Run the health scorer: hourly recalculations, on-demand requests (cmd.health.recalculate), history ' +
      'retention.',
  }),
  HEALTH_RECALC_INTERVAL_MS: Type.Integer({
    minimum: 1000,
    default: 3_600_000,
    description:
      'A workspace is recalculated when its last run finished longer ago than this; instances look for due ' +
      'workspaces every quarter of it (at most 30 s, jittered).',
  }),
  HEALTH_POOL_MIN_CUSTOMERS: Type.Integer({
    minimum: 0,
    default: 5000,
    description:
      'Workspaces with more customers are scored in chunks of 5000 in the PROCESSORS_THREADS worker threads; ' +
      'smaller ones inline.',
  }),
  HEALTH_RECALC_LANES: Type.Integer({
    minimum: 1,
    default: 2,
    description:
      'On-demand recalculations of one workspace in flight at once per instance: requests arriving while one runs ' +
      'start the next batch after 2 ms instead of waiting for it to end.',
  }),
  HEALTH_LEASE_TTL_MS: Type.Integer({
    minimum: 1000,
    default: 120_000,
    description:
      "Lifetime of a workspace's scoring lease (job_leases, renewed during a run): one instance at a time per " +
      "workspace; a killed instance's workspace is taken over after it.",
  }),
  HEALTH_TENANTS: Type.String({
    default: '',
    description:
      'Comma-separated workspace ids the scheduled runs are limited to (empty: every workspace); on-demand ' +
      'requests are always answered.',
  }),
  METRICS_MATERIALIZE_INTERVAL_MS: Type.Integer({
    minimum: 1000,
    default: 3_600_000,
    description:
      "A workspace's metrics in use are materialized into csp.metric_values when its last run finished longer ago " +
      'than this (lease per workspace in job_leases, job metrics); materialize-now requests ' +
      '(cmd.metrics.materialize) are always answered.',
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
    description:
      "Every workspace's enabled playbooks are evaluated when their last scheduled run finished longer ago than " +
      'this (lease per workspace in job_leases, job playbooks); they are also evaluated after each health run and ' +
      'materialization of the workspace.',
  }),
  PLAYBOOKS_LEASE_TTL_MS: Type.Integer({
    minimum: 1000,
    default: 120_000,
    description: "Lifetime of a workspace's scheduled playbook lease (renewed during a run).",
  }),
  PLAYBOOKS_TENANTS: Type.String({
    default: '',
    description:
      'Comma-separated workspace ids the scheduled and event-driven playbook evaluations are limited to (empty: ' +
      'all); run-now requests are always answered.',
  }),
  PLAYBOOKS_CONCURRENCY: Type.Integer({
    minimum: 1,
    maximum: 16,
    default: 3,
    description:
      "How many of a workspace's playbooks one instance evaluates at the same time (each is one PostgreSQL " +
      'statement on one core).',
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
    description:
      "How long after its last matching event a workspace's event playbooks keep being re-evaluated (events stored " +
      'late).',
  }),
  OUTBOX_POLL_MS: Type.Integer({
    minimum: 10,
    default: 2000,
    description:
      'Longest pause between polls of event_outbox and webhook_outbox when they are empty: a relay polls at once ' +
      'when PostgreSQL notifies that rows were written (LISTEN outbox), so this bounds only the delay after a ' +
      'notification lost while its connection was down, or behind a pooler that does not pass LISTEN (generated ' +
      'events such as health_changed are relayed to ev.system.<tenant>, webhook events to wh.event.<tenant>, 500 ' +
      'rows per poll, FOR UPDATE SKIP LOCKED so instances share them; published rows are deleted after 7 days).',
  }),
  OUTBOX_TENANTS: Type.String({
    default: '',
    description:
      'Comma-separated workspace ids whose event_outbox and webhook_outbox rows this instance relays (empty: every ' +
      'workspace): for instances that serve some workspaces on a NATS of their own, whose outbox rows the other ' +
      "instances' relays must not publish to theirs.",
  }),
  WEBHOOK_CONCURRENCY: Type.Integer({
    minimum: 1,
    maximum: 10_000,
    default: 256,
    description:
      'Webhook attempts in flight in one processors instance, at most (deliveries wait in PostgreSQL, not in ' +
      'memory).',
  }),
  WEBHOOK_ENDPOINT_CONCURRENCY: Type.Integer({
    minimum: 1,
    maximum: 100,
    default: 8,
    description:
      'Webhook attempts in flight to one subscription in one processors instance, at most: a hanging endpoint ' +
      'holds only these.',
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
    description: 'Deliver to plain http:// URLs; core-api reads it too (npm start and the tests set it).',
  }),
  WEBHOOK_ALLOW_PRIVATE: Type.Boolean({
    default: false,
    description:
      'Deliver to loopback, private and link-local addresses; core-api reads it too (npm start and the tests set ' +
      'it).',
  }),
  DATA_ENCRYPTION_KEY: Type.String({
    default: '',
    description:
      "Keys of secrets at rest (provider tokens, webhook signing secrets; AES-256-GCM), the same as core-api's: " +
      'comma-separated, each 32 bytes as base64 or 64 hex digits; the first encrypts, all decrypt; rotation: npm ' +
      'run rotate-data-key (docs/security.md). Empty (and no INTEGRATION_TOKEN_KEY): integration notifications and ' +
      'refreshes are skipped, webhooks cannot be signed.',
  }),
  INTEGRATION_TOKEN_KEY: Type.String({
    default: '',
    description:
      'The earlier name of a single data key, still read (after DATA_ENCRYPTION_KEY); npm start and the tests ' +
      'generate one into .data/<profile>/integration-token.key.',
  }),
  INTEGRATION_REFRESH_POLL_MS: Type.Integer({
    minimum: 100,
    default: 60_000,
    description:
      'Pause between looks for integration tokens that expire within 5 minutes (refreshed then); a call to a ' +
      'provider refreshes a due token itself first, so this only keeps idle connections fresh. Also the pause ' +
      'between looks for Zendesk backfills to start or go on (at most 30 s, each jittered from half to one and a ' +
      "half of it); a new connection's backfill starts at once, on a message from the core API.",
  }),
  INTEGRATION_TENANTS: Type.String({
    default: '',
    description:
      'Comma-separated workspace ids whose integration notifications, token refreshes and e-mail and calendar ' +
      'syncs this instance handles (empty: all).',
  }),
  INTEGRATION_NOTIFY_RETRIES: Type.Integer({
    minimum: 0,
    maximum: 20,
    default: 3,
    description:
      'Retries of a playbook notification the provider answered 429 or 5xx, or could not be reached for ' +
      '(then failed); never after the provider accepted it or a request timed out.',
  }),
  INTEGRATION_NOTIFY_RETRY_BASE_MS: Type.Integer({
    minimum: 1,
    default: 5000,
    description: 'First retry delay of a notification, doubled at each next one, with jitter (a Retry-After wins).',
  }),
  INTEGRATION_SYNC_INTERVAL_MS: Type.Integer({
    minimum: 1000,
    default: 300_000,
    description:
      'A connected gmail, outlook, google_calendar or outlook_calendar is synced again when its last sync is ' +
      'older than this (POST /v1/integrations/{name}/sync: at once).',
  }),
  INTEGRATION_SYNC_POLL_MS: Type.Integer({
    minimum: 50,
    default: 5000,
    description:
      'Pause between the scheduled looks for due integration syncs (at most 30 s, each jittered from half to one ' +
      "and a half of it). A sync asked for through the API and a new connection's first sync start at once, on a " +
      'message from the core API; these looks start them when that message was lost.',
  }),
  INTEGRATION_SYNC_LEASE_TTL_MS: Type.Integer({
    minimum: 1000,
    default: 120_000,
    description:
      "Lifetime of a connection's sync lease (renewed during a sync); a killed instance's syncs resume after it.",
  }),
  INTEGRATION_SYNC_CONCURRENCY: Type.Integer({
    minimum: 1,
    maximum: 64,
    default: 4,
    description: 'Integration syncs in flight in one processors instance, at most.',
  }),
  INTEGRATION_SYNC_LOOKBACK_DAYS: Type.Integer({
    minimum: 1,
    maximum: 30,
    default: 30,
    description: 'How far back the first sync of a connection (or a resync after an expired cursor) reads.',
  }),
  INTEGRATION_SYNC_MAX_WAIT_MS: Type.Integer({
    minimum: 0,
    default: 120_000,
    description: 'The longest Retry-After a sync waits out; a provider asking for more ends the sync (retried later).',
  }),
  NOTIFY_POLL_MS: Type.Integer({
    minimum: 50,
    default: 500,
    description: 'Pause between claims of queued playbook notifications (Slack, Teams, e-mail).',
  }),
  ALERTS_KEY_SPIKE_FACTOR: Type.Number({
    minimum: 1,
    default: 10,
    description:
      "api_key_usage_spike is raised when a key's requests in 5 minutes are above this many times its 24-hour " +
      'average and above ALERTS_KEY_SPIKE_FLOOR.',
  }),
  ALERTS_KEY_SPIKE_FLOOR: Type.Integer({
    minimum: 1,
    default: 500,
    description: 'The fewest requests in 5 minutes that can raise api_key_usage_spike (with ALERTS_KEY_SPIKE_FACTOR).',
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
    description:
      "usage_drop (checked after each health run) is raised when a customer's events in the last 7 days are below " +
      'this share of its weekly baseline, if that baseline is at least ALERTS_USAGE_DROP_MIN_WEEKLY.',
  }),
  ALERTS_USAGE_DROP_MIN_WEEKLY: Type.Number({
    minimum: 0,
    default: 20,
    description:
      "The smallest weekly baseline (events per 7 days over days 8–37 ago) for which a customer's drop raises " +
      'usage_drop.',
  }),
  ERASURE_POLL_MS: Type.Integer({
    minimum: 50,
    default: 1000,
    description: 'Pause between looks for queued customer erasures (permanent deletes, trash purges; docs/erasure.md).',
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
      'How long after an erasure rows of the customer that still land (messages older than it) are removed: ' +
      "the events stream's max age and a day.",
  }),
  ERASURE_SWEEP_MS: Type.Integer({
    minimum: 100,
    default: 10_000,
    description:
      'A workspace where rows of an erased customer may have landed (checked by the writer before it knew of the ' +
      'erasure) is checked for them at most this often.',
  }),
  ERASURE_FILTER_REFRESH_MS: Type.Integer({
    minimum: 100,
    default: 2000,
    description:
      'The writers drop rows of erased customers; the list of them is refreshed this often, and at once when ' +
      'core-api announces a deleted customer.',
  }),
  ERASURE_FULL_SWEEP_MS: Type.Integer({
    minimum: 1000,
    default: 600_000,
    description: 'Every workspace under watch is checked for rows of erased customers this often.',
  }),
  ...IntegrationConfig,
  GAUGES_INTERVAL_MS: Type.Integer({
    minimum: 100,
    default: 15_000,
    description:
      "How often /metrics' sampled gauges are refreshed: the backlogs in PostgreSQL (scheduled runs, webhook " +
      'deliveries, integration syncs, erasures, outboxes; one statement) and the PostgreSQL pool probe ' +
      '(docs/operations.md).',
  }),
  LOG_LEVEL: Type.String({
    default: 'info',
    description: 'pino level of the JSON logs (fatal, error, warn, info, debug, trace).',
  }),
});

/** The processors tier's settings, as loaded from the environment. */
export type ProcessorsSettings = Readonly<Static<typeof ProcessorsConfig>>;
