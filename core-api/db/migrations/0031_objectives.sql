-- Objectives: a target on one customer-grain metric for one customer. Like a health driver (kept
-- in health_models.model.drivers, a metric scored as a health dimension for every customer), an
-- objective makes its metric "in use": DELETE /v1/metrics/{id} answers 409 metric_in_use while
-- one exists, and the materializer (processors/metrics/) computes the metric for its customer.

CREATE TABLE objectives (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id     uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  customer_id   uuid NOT NULL REFERENCES customers ON DELETE CASCADE,
  metric_id     uuid NOT NULL REFERENCES metrics,
  name          text NOT NULL,
  target_value  double precision NOT NULL,
  due_date      date,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX objectives_customer ON objectives (customer_id, created_at, id);
CREATE INDEX objectives_metric ON objectives (metric_id);
