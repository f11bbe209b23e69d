-- Ingestion surface B: deduplication keys (kept forever), exact idempotent responses, backfill jobs.

-- One row per (customer, external_id) ever accepted on surface B. The ingest tier inserts a
-- request's keys in one statement inside a transaction that commits only after JetStream stored
-- the events, so a key exists here if and only if its event was stored.
CREATE TABLE event_dedup (
  tenant_id    uuid NOT NULL,
  customer_id  uuid NOT NULL,
  external_id  text NOT NULL,
  PRIMARY KEY (tenant_id, customer_id, external_id)
);

-- Surface B replays the first response byte for byte: the exact bytes and headers are kept
-- beside the JSON body the core API uses.
ALTER TABLE idempotency_keys ADD COLUMN response bytea;
ALTER TABLE idempotency_keys ADD COLUMN response_headers jsonb;
CREATE INDEX idempotency_keys_age ON idempotency_keys (created_at);

-- Backfill jobs are written by the ingest tier and completed by the processors; the core API's
-- job runner only runs bulk imports.
CREATE INDEX jobs_tenant_type ON jobs (tenant_id, type, created_at);
