-- Health scores (processors/health/ computes, core-api/health/ serves), the transactional outbox
-- of generated events, and leases for scheduled per-workspace jobs.

-- The workspace health model as PATCHed; a workspace without a row uses the defaults of
-- schemas/health.ts. Stored whole (weights, thresholds, active_dimensions, key_events).
CREATE TABLE health_models (
  tenant_id   uuid PRIMARY KEY REFERENCES tenants ON DELETE CASCADE,
  model       jsonb NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Current score per customer, written in bulk by the scorer (one row per customer ever scored).
-- The day-by-day history lives in ClickHouse (csp.health_history). dimensions is the breakdown
-- as GET /v1/customers/{id}/health shows it.
CREATE TABLE customer_health (
  customer_id    uuid PRIMARY KEY REFERENCES customers ON DELETE CASCADE,
  tenant_id      uuid NOT NULL,
  score          smallint NOT NULL CHECK (score BETWEEN 0 AND 100),
  status         text NOT NULL CHECK (status IN ('healthy', 'neutral', 'at_risk')),
  dimensions     jsonb NOT NULL,
  calculated_at  timestamptz NOT NULL
);
CREATE INDEX customer_health_status ON customer_health (tenant_id, status);

-- Events the service generates itself (health_changed, task_*, integration activity), written in
-- the same transaction as the state change that causes them and relayed to JetStream by the
-- processors (processors/outbox/). id becomes the message's Nats-Msg-Id, its batch_id and the
-- event_id of the stored row, so a relay that publishes twice stores the event once.
CREATE TABLE event_outbox (
  id            uuid PRIMARY KEY,
  tenant_id     uuid NOT NULL,
  customer_id   uuid NOT NULL,
  event_name    text NOT NULL,
  properties    jsonb NOT NULL DEFAULT '{}',
  occurred_at   timestamptz NOT NULL DEFAULT now(),
  published_at  timestamptz
);
CREATE INDEX event_outbox_unpublished ON event_outbox (occurred_at) WHERE published_at IS NULL;
CREATE INDEX event_outbox_published ON event_outbox (published_at) WHERE published_at IS NOT NULL;

-- A lease per (scheduled job, workspace): several processors instances spread the work and never
-- run the same workspace's job at once. A crashed holder's lease runs out at expires_at.
CREATE TABLE job_leases (
  job               text NOT NULL,
  tenant_id         uuid NOT NULL,
  holder            text,
  expires_at        timestamptz NOT NULL DEFAULT '-infinity',
  last_started_at   timestamptz,
  last_finished_at  timestamptz,
  PRIMARY KEY (job, tenant_id)
);
