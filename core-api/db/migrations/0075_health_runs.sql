-- A customer's calculated_at is the time of its last calculation, scheduled or on demand. A scheduled
-- run does not rewrite the customer_health rows whose score it finds unchanged (most of them, every
-- hour), so the time it calculated them is kept once per workspace instead of once per row.

-- The time of each workspace's last complete scheduled run (processors/health/scorer.ts).
CREATE TABLE health_runs (
  tenant_id      uuid PRIMARY KEY REFERENCES tenants ON DELETE CASCADE,
  calculated_at  timestamptz NOT NULL
);

-- Scored customers that scheduled runs left out because they were in the trash, with the time of
-- their last calculation when the first such run started. A restored customer keeps it (a run
-- that did not cover it is not its calculation) until a run covers it again and drops the row.
CREATE TABLE health_run_misses (
  customer_id    uuid PRIMARY KEY REFERENCES customers ON DELETE CASCADE,
  tenant_id      uuid NOT NULL,
  calculated_at  timestamptz NOT NULL
);
CREATE INDEX health_run_misses_tenant ON health_run_misses (tenant_id);

-- customer_health as the API shows it: calculated_at is the later of the row's own time (a changed
-- score, an on-demand recalculation) and the last run that covered the customer. Read the current
-- health through this view wherever calculated_at is shown.
CREATE VIEW customer_health_current AS
  SELECT h.customer_id, h.tenant_id, h.score, h.status, h.dimensions,
    GREATEST(h.calculated_at, COALESCE(m.calculated_at, r.calculated_at)) AS calculated_at
  FROM customer_health h
    LEFT JOIN health_runs r ON r.tenant_id = h.tenant_id
    LEFT JOIN health_run_misses m ON m.customer_id = h.customer_id;
