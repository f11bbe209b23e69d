-- Alerts (docs/analytics.md "Alerts"): unusual API key usage and sharp usage drops.
CREATE TABLE alerts (
  id           uuid PRIMARY KEY DEFAULT gen_uuid_v7(),
  tenant_id    uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  type         text NOT NULL CHECK (type IN ('api_key_usage_spike', 'usage_drop')),
  status       text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'acknowledged', 'resolved')),
  severity     text NOT NULL CHECK (severity IN ('low', 'medium', 'high')),
  customer_id  uuid REFERENCES customers ON DELETE CASCADE,
  api_key_id   uuid REFERENCES api_keys ON DELETE CASCADE,
  summary      text NOT NULL,
  details      jsonb NOT NULL DEFAULT '{}',
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  resolved_at  timestamptz
);
CREATE INDEX alerts_page ON alerts (tenant_id, created_at DESC, id DESC);
-- At most one alert per key and per customer that is not resolved (acknowledged counts as open).
CREATE UNIQUE INDEX alerts_one_open_key ON alerts (tenant_id, api_key_id)
  WHERE type = 'api_key_usage_spike' AND status <> 'resolved';
CREATE UNIQUE INDEX alerts_one_open_customer ON alerts (tenant_id, customer_id)
  WHERE type = 'usage_drop' AND status <> 'resolved';
CREATE INDEX alerts_customer_open ON alerts (customer_id) WHERE status <> 'resolved';

-- The 5-minute window of every key's requests is read every minute.
CREATE INDEX credential_audit_at ON credential_audit (at) WHERE actor_kind = 'api_key';

-- core-api/alerts/routes.ts toAlert.
CREATE FUNCTION webhook_alert(a alerts) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object('id', a.id, 'type', a.type, 'status', a.status, 'severity', a.severity,
    'customer_id', a.customer_id, 'api_key_id', a.api_key_id, 'summary', a.summary, 'details', a.details,
    'created_at', webhook_ts(a.created_at), 'updated_at', webhook_ts(a.updated_at))
$$;

CREATE FUNCTION webhook_alerts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_outbox (tenant_id, type, data)
  SELECT n.tenant_id, 'alert.created', webhook_alert(n) FROM new_rows n WHERE webhook_subscribed(n.tenant_id);
  RETURN NULL;
END
$$;

CREATE TRIGGER alerts_webhook_inserted AFTER INSERT ON alerts
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_alerts_inserted();
