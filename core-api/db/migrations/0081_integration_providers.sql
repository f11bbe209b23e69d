-- Integrations against the real providers (docs/integrations.md).
-- subdomain: the Zendesk account a connection was made to (https://{subdomain}.zendesk.com), given
-- at connect. webhook_id, webhook_secret: the Zendesk webhook created for the connection and its
-- signing secret (AES-256-GCM ciphertext, like the tokens). backfill_*: the Zendesk incremental
-- ticket export of a new connection, resumed from its cursor; done when backfilled_at is set.
ALTER TABLE integrations
  ADD COLUMN subdomain text,
  ADD COLUMN webhook_id text,
  ADD COLUMN webhook_secret text,
  ADD COLUMN backfill_cursor text,
  ADD COLUMN backfill_lease_until timestamptz,
  ADD COLUMN backfilled_at timestamptz,
  -- The last failure a person can act on outside the sync (a notification Slack refused with
  -- channel_not_found, a backfill page refused…), with its time; GET /v1/integrations shows it.
  ADD COLUMN last_error text,
  ADD COLUMN last_error_at timestamptz;

-- A notification a sender holds (claimed, being sent): one whose sender died mid-attempt is not sent
-- again, since the provider may have accepted it; it fails as delivery_unknown.
ALTER TABLE integration_notifications ADD COLUMN in_flight boolean NOT NULL DEFAULT false;
CREATE INDEX integration_notifications_in_flight ON integration_notifications (next_attempt_at) WHERE in_flight;
