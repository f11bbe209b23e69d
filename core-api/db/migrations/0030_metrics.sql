-- The metrics library (core-api/metrics/, compiled by lib/metrics/): metric definitions,
-- proposals made from a plain-English description, and the usage widgets. Objectives, health
-- drivers and metric_threshold playbook triggers reference metrics(id) and count as consumers;
-- the materialized values live in ClickHouse (csp.metric_values).

CREATE TABLE metrics (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id        uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  -- Fixed after creation and never reused, not even after deletion: a health dimension is named
  -- metric:<slug>, and a deleted metric's stored values stay readable under it.
  slug             text NOT NULL,
  name             text NOT NULL,
  description      text,
  source_event     text NOT NULL,
  calculation      text NOT NULL
    CHECK (calculation IN ('count', 'sum', 'avg', 'max', 'distinct_count', 'last_value', 'exists')),
  target_property  text,
  filter           jsonb NOT NULL DEFAULT '[]',
  window_def       jsonb NOT NULL,
  grain            text NOT NULL CHECK (grain IN ('customer', 'portfolio')),
  unit             text,
  status           text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'deleted')),
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  deleted_at       timestamptz,
  UNIQUE (tenant_id, slug)
);
CREATE INDEX metrics_page ON metrics (tenant_id, created_at, id);
-- The materializer's scan: active metrics of every workspace.
CREATE INDEX metrics_active ON metrics (tenant_id) WHERE status = 'active';

CREATE TABLE metric_proposals (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id    uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  description  text NOT NULL,
  proposal     jsonb NOT NULL,
  validation   jsonb NOT NULL,
  status       text NOT NULL DEFAULT 'proposed' CHECK (status IN ('proposed', 'accepted', 'rejected')),
  metric_id    uuid REFERENCES metrics ON DELETE SET NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  decided_at   timestamptz
);
CREATE INDEX metric_proposals_tenant ON metric_proposals (tenant_id, created_at);

-- At most 8 per workspace (the 9th answers 409 widget_limit_reached), enforced under a lock of
-- the workspace's row so that concurrent creations cannot pass the limit together.
CREATE TABLE usage_widgets (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id    uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  name         text NOT NULL,
  event_name   text,
  aggregation  text NOT NULL CHECK (aggregation IN ('count', 'unique_users', 'trend_pct', 'frequency')),
  period       text NOT NULL CHECK (period IN ('7d', '30d', '90d')),
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX usage_widgets_tenant ON usage_widgets (tenant_id, created_at, id);
