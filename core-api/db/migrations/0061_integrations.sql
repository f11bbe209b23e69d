-- Integrations (docs/integrations.md): one row per (workspace, connector) once a connection was
-- started; no row = disconnected. Tokens are AES-256-GCM ciphertexts (lib/integrations/tokens.ts),
-- never plain text.
CREATE TABLE integrations (
  tenant_id             uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  name                  text NOT NULL CHECK (name IN ('gmail', 'outlook', 'google_calendar', 'outlook_calendar',
                                                       'slack', 'teams', 'zendesk', 'intercom')),
  -- The connection id providers push activity to; a new one at every connection.
  connection_id         uuid NOT NULL DEFAULT gen_random_uuid() UNIQUE,
  status                text NOT NULL CHECK (status IN ('pending', 'connected', 'error', 'disconnected')),
  -- The pending authorization: SHA-256 of the state, its expiry, the PKCE verifier (encrypted).
  state_hash            text UNIQUE,
  state_expires_at      timestamptz,
  code_verifier         text,
  access_token          text,
  refresh_token         text,
  token_expires_at      timestamptz,
  scope                 text,
  account               text,
  error                 text,
  connected_at          timestamptz,
  activities            bigint NOT NULL DEFAULT 0,
  unmatched_activities  bigint NOT NULL DEFAULT 0,
  created_at            timestamptz NOT NULL DEFAULT now(),
  updated_at            timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, name)
);
CREATE INDEX integrations_refresh ON integrations (token_expires_at) WHERE status = 'connected';

-- Provider activity already turned into events: a provider that pushes an activity again (a retry)
-- adds nothing.
CREATE TABLE integration_activities (
  tenant_id    uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  name         text NOT NULL,
  activity_id  text NOT NULL,
  received_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, name, activity_id)
);

-- Generated events carry the surface they came from into csp.events ('system', 'integration').
ALTER TABLE event_outbox ADD COLUMN surface text NOT NULL DEFAULT 'system';

-- Notifications of playbook notify actions on a connected chat or e-mail integration, sent by the
-- processors (processors/integrations/) after the evaluation that queued them committed.
CREATE TABLE integration_notifications (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id        uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  name             text NOT NULL,
  channel          text NOT NULL,
  target           text NOT NULL,
  text             text NOT NULL,
  playbook_id      uuid,
  run_id           uuid,
  customer_id      uuid,
  status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  response_status  integer,
  error            text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX integration_notifications_due ON integration_notifications (next_attempt_at) WHERE status = 'pending';

-- integration.connected / integration.disconnected webhook events, from the status changes.
CREATE FUNCTION webhook_integration(i integrations) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object('name', i.name, 'status', i.status, 'connection_id', i.connection_id,
    'account', i.account, 'connected_at', webhook_ts(i.connected_at))
$$;

CREATE FUNCTION webhook_integrations_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_outbox (tenant_id, type, data)
  SELECT n.tenant_id,
    CASE WHEN n.status = 'connected' THEN 'integration.connected' ELSE 'integration.disconnected' END,
    webhook_integration(n)
  FROM new_rows n JOIN old_rows o ON o.tenant_id = n.tenant_id AND o.name = n.name
  WHERE ((n.status = 'connected' AND o.status <> 'connected')
      OR (n.status = 'disconnected' AND o.status = 'connected'))
    AND webhook_subscribed(n.tenant_id);
  RETURN NULL;
END
$$;

CREATE TRIGGER integrations_webhook_changed AFTER UPDATE ON integrations
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_integrations_changed();

-- Pushed activity resolves participants by contact e-mail, then by customer email_domain.
CREATE INDEX contacts_tenant_email ON contacts (tenant_id, lower(email)) WHERE email IS NOT NULL;
CREATE INDEX customers_email_domain ON customers (tenant_id, email_domain) WHERE deleted_at IS NULL;
