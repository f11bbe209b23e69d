-- ClickHouse DDL. Runs on 18.16 and on current releases: no DateTime64, JSON type, CODEC, TTL.
-- Timestamps are DateTime (seconds, UTC) plus a millisecond column; properties are kept raw and
-- as parallel key/value arrays so that properties.plan = 'pro' compiles to
-- prop_values[indexOf(prop_keys, 'plan')] = 'pro'.

CREATE DATABASE IF NOT EXISTS csp;

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
