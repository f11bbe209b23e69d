-- ClickHouse DDL. Runs on 18.16 and on current releases: no DateTime64, JSON type, CODEC, TTL.
-- Written for one server; infra/apply.ts derives a replicated, sharded cluster's DDL from it
-- (clusterStatements): every table here becomes a Replicated* table in csp_local plus a
-- Distributed table of the same name in csp, sharded by workspace; views move to csp_local.
-- Timestamps are DateTime (seconds, UTC) plus a millisecond column; properties are kept as
-- parallel key/value arrays so that properties.plan = 'pro' compiles to
-- prop_values[indexOf(prop_keys, 'plan')] = 'pro', and the raw JSON is rebuilt from them.

CREATE DATABASE IF NOT EXISTS csp;

-- The queries and replication queues of every server of the store: a view over this server's
-- system tables here, a Distributed table over every server of a cluster. The writer waits on
-- them before it decides whether a suspect batch is stored (processors/writer/reconcile.ts).
CREATE VIEW IF NOT EXISTS csp.processes AS SELECT * FROM system.processes;
CREATE VIEW IF NOT EXISTS csp.replicas AS SELECT * FROM system.replicas;

-- batch_id is the id of the JetStream message (one ingestion request) a row came in: the writer
-- uses it to tell which redelivered messages are already stored.
CREATE TABLE IF NOT EXISTS csp.events (
  tenant_id             UUID,
  customer_id           UUID,
  event_name            String,
  ts                    DateTime,
  ts_ms                 UInt16,
  event_id              UUID,
  batch_id              UUID,
  received_at           DateTime,
  external_customer_id  String,
  external_source       LowCardinality(String),
  user_id               String,
  product_id            String,
  product_code          String,
  surface               LowCardinality(String),
  external_id           String,
  properties            String,
  prop_keys             Array(String),
  prop_values           Array(String)
) ENGINE = MergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY (tenant_id, customer_id, event_name, ts);

-- Surface B's acting user, added after the CREATE so existing installations get them too.
-- ClickHouse 18.16 has no ADD COLUMN IF NOT EXISTS: infra/apply.ts treats "already exists" as done.
ALTER TABLE csp.events ADD COLUMN user_email String;
ALTER TABLE csp.events ADD COLUMN user_external_id String;
-- One character per property key, 's' (the value is the string itself) or 'j' (the value is JSON
-- text): the raw JSON is rebuilt from keys, values and kinds, and `properties` is left empty on
-- rows written since (lib/event-properties.ts).
ALTER TABLE csp.events ADD COLUMN prop_kinds String;

CREATE TABLE IF NOT EXISTS csp.billing_events (
  tenant_id    UUID,
  customer_id  UUID,
  event_type   LowCardinality(String),
  amount       Nullable(Float64),
  currency     LowCardinality(String),
  status       LowCardinality(String),
  ts           DateTime,
  ts_ms        UInt16,
  event_id     UUID,
  batch_id     UUID,
  received_at  DateTime
) ENGINE = MergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY (tenant_id, customer_id, ts);

-- Daily rollups: what health scoring and metrics read instead of raw events. Fed by materialized
-- views, so every insert into the source table feeds them in the same statement. They stay exactly
-- once because the writer never deletes rows it inserted: a partly stored batch is completed by
-- inserting only its missing rows (processors/writer/), so a view never sees a row twice. Events
-- the service generates itself (surface 'system') are not product usage and stay out of them.
-- Their granules are finer than the default 8192 rows: an on-demand recalculation reads a few
-- customers' rows, and a granule of 8192 would bring hundreds of other customers' aggregate states
-- with each one (infra/apply.ts rebuilds an existing table whose granularity changed).
CREATE TABLE IF NOT EXISTS csp.usage_daily (
  tenant_id    UUID,
  customer_id  UUID,
  day          Date,
  events       AggregateFunction(count),
  names        AggregateFunction(uniq, String),
  users        AggregateFunction(uniq, String)
) ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (tenant_id, customer_id, day)
SETTINGS index_granularity = 256;

CREATE MATERIALIZED VIEW IF NOT EXISTS csp.usage_daily_mv TO csp.usage_daily AS
SELECT tenant_id, customer_id, toDate(ts) AS day, countState() AS events, uniqState(event_name) AS names,
       uniqStateIf(user_id, user_id != '') AS users
FROM csp.events WHERE surface != 'system'
GROUP BY tenant_id, customer_id, day;

CREATE TABLE IF NOT EXISTS csp.usage_daily_names (
  tenant_id    UUID,
  customer_id  UUID,
  day          Date,
  event_name   String,
  events       UInt64
) ENGINE = SummingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (tenant_id, customer_id, day, event_name)
SETTINGS index_granularity = 1024;

CREATE MATERIALIZED VIEW IF NOT EXISTS csp.usage_daily_names_mv TO csp.usage_daily_names AS
SELECT tenant_id, customer_id, toDate(ts) AS day, event_name, count() AS events
FROM csp.events WHERE surface != 'system'
GROUP BY tenant_id, customer_id, day, event_name;

-- Billing events per day, type and status, with the latest time of each (payment health needs
-- whether a payment_succeeded came after the failures).
CREATE TABLE IF NOT EXISTS csp.billing_daily (
  tenant_id    UUID,
  customer_id  UUID,
  day          Date,
  event_type   LowCardinality(String),
  status       LowCardinality(String),
  events       AggregateFunction(count),
  first_ts     AggregateFunction(min, DateTime),
  last_ts      AggregateFunction(max, DateTime)
) ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (tenant_id, customer_id, day, event_type, status)
SETTINGS index_granularity = 1024;

CREATE MATERIALIZED VIEW IF NOT EXISTS csp.billing_daily_mv TO csp.billing_daily AS
SELECT tenant_id, customer_id, toDate(ts) AS day, event_type, status,
       countState() AS events, minState(ts) AS first_ts, maxState(ts) AS last_ts
FROM csp.billing_events
GROUP BY tenant_id, customer_id, day, event_type, status;

-- Which batches (JetStream messages) are stored and with how many rows, keyed by batch_id so the
-- writer proves a batch new or finds it stored with a primary-key lookup instead of a scan of
-- the events table. One row per batch and insert block; sums merge in the background.
CREATE TABLE IF NOT EXISTS csp.batch_ledger (
  batch_id     UUID,
  tbl          String,
  rows         UInt64
) ENGINE = SummingMergeTree()
ORDER BY (batch_id, tbl);

CREATE MATERIALIZED VIEW IF NOT EXISTS csp.batch_ledger_events_mv TO csp.batch_ledger AS
SELECT batch_id, 'events' AS tbl, count() AS rows FROM csp.events GROUP BY batch_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS csp.batch_ledger_billing_mv TO csp.batch_ledger AS
SELECT batch_id, 'billing_events' AS tbl, count() AS rows FROM csp.billing_events GROUP BY batch_id;

-- Surface B's deduplication keys of the events stored: one row per (workspace, customer_id,
-- external_id). The writer that owns a workspace loads them into memory when it takes the
-- workspace (processors/dedup/), then claims keys there. Filled by the view from the events
-- inserted since it exists, and once from those stored before (infra/apply.ts, POPULATE), so keys
-- recorded before the deduplication moved off the request path keep deduplicating. Replacing: a
-- key the populate copies beside the view's row is one key.
CREATE TABLE IF NOT EXISTS csp.event_keys (
  tenant_id    UUID,
  customer_id  UUID,
  external_id  String,
  batch_id     UUID
) ENGINE = ReplacingMergeTree()
ORDER BY (tenant_id, customer_id, external_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS csp.event_keys_mv TO csp.event_keys AS
SELECT tenant_id, customer_id, external_id, batch_id FROM csp.events WHERE external_id != '';

-- Health history: one point per customer per day, the day's last calculation (ReplacingMergeTree
-- keeps the row with the latest calculated_at). 1M customers x 730 days is 730M narrow rows:
-- routine for ClickHouse, a burden for PostgreSQL's row store and vacuum. Kept two years:
-- the health scorer drops partitions older than 25 months.
CREATE TABLE IF NOT EXISTS csp.health_history (
  tenant_id      UUID,
  customer_id    UUID,
  day            Date,
  score          UInt8,
  status         LowCardinality(String),
  calculated_at  DateTime
) ENGINE = ReplacingMergeTree(calculated_at)
PARTITION BY toYYYYMM(day)
ORDER BY (tenant_id, customer_id, day);

-- The event catalog's ClickHouse half (the names and first_seen_at live in PostgreSQL's
-- event_catalog): when each name was last seen and which top-level property keys its events
-- carry, with how many events carried each. Every surface counts, generated events too. Fed from
-- the first insert after the views exist; names stored before show last_seen_at from their next event.
CREATE TABLE IF NOT EXISTS csp.event_names (
  tenant_id    UUID,
  event_name   String,
  first_ts     AggregateFunction(min, DateTime),
  last_ts      AggregateFunction(max, DateTime)
) ENGINE = AggregatingMergeTree()
ORDER BY (tenant_id, event_name);

CREATE MATERIALIZED VIEW IF NOT EXISTS csp.event_names_mv TO csp.event_names AS
SELECT tenant_id, event_name, minState(ts) AS first_ts, maxState(ts) AS last_ts
FROM csp.events
GROUP BY tenant_id, event_name;

-- Top-level property keys per event name, counted per distinct key set: readers ARRAY JOIN the
-- few sets of a name at query time. The view used to arrayJoin every inserted row into one row
-- per key, which on 18.16 copies every column of the inserted block once per key: that alone
-- took as long as the rest of the insert (0.5 x the insert rate of csp.events, measured with
-- clickhouse-client on 300k benchmark rows). event_property_keys holds the per-key counts of
-- the events stored before, and readers add both; its view is dropped.
CREATE TABLE IF NOT EXISTS csp.event_property_keys (
  tenant_id    UUID,
  event_name   String,
  key          String,
  events       UInt64
) ENGINE = SummingMergeTree()
ORDER BY (tenant_id, event_name, key);

DROP TABLE IF EXISTS csp.event_property_keys_mv;

CREATE TABLE IF NOT EXISTS csp.event_property_keysets (
  tenant_id    UUID,
  event_name   String,
  keys_hash    UInt64,
  keys         Array(String),
  events       UInt64
) ENGINE = SummingMergeTree(events)
ORDER BY (tenant_id, event_name, keys_hash);

CREATE MATERIALIZED VIEW IF NOT EXISTS csp.event_property_keysets_mv TO csp.event_property_keysets AS
SELECT tenant_id, event_name, cityHash64(prop_keys) AS keys_hash, any(prop_keys) AS keys, count() AS events
FROM csp.events
GROUP BY tenant_id, event_name, keys_hash;

-- Materialized metric values: one row per metric, customer and period, the latest computation
-- winning (ReplacingMergeTree over computed_at; readers take argMax(value, computed_at) before the
-- merge). A portfolio-grain metric stores customer_id 00000000-0000-0000-0000-000000000000.
-- value is NULL where the calculation has none (avg, max, last_value without matching events).
CREATE TABLE IF NOT EXISTS csp.metric_values (
  tenant_id     UUID,
  metric_id     UUID,
  customer_id   UUID,
  period_start  DateTime,
  period_end    DateTime,
  value         Nullable(Float64),
  computed_at   DateTime
) ENGINE = ReplacingMergeTree(computed_at)
PARTITION BY toYYYYMM(period_start)
ORDER BY (tenant_id, metric_id, customer_id, period_start);
