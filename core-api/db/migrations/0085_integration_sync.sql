-- Incremental sync of the e-mail and calendar connectors (docs/integrations.md), run by the processors
-- (processors/integrations/sync/): one row per (workspace, connector) once a sync was asked for or
-- ran. The row is the connection's lease (one processors instance syncs a connection at a time,
-- until lease_expires_at; a killed holder's lease runs out) and its cursors at the provider (Gmail's
-- historyId, Google Calendar's syncToken, Microsoft Graph's deltaLinks), kept for the connection_id
-- they were taken with: a new connection starts over.
CREATE TABLE integration_syncs (
  tenant_id          uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  name               text NOT NULL CHECK (name IN ('gmail', 'outlook', 'google_calendar', 'outlook_calendar')),
  connection_id      uuid,
  cursor             jsonb NOT NULL DEFAULT '{}',
  holder             text,
  lease_expires_at   timestamptz NOT NULL DEFAULT '-infinity',
  -- POST /v1/integrations/{name}/sync: due at once, whatever the interval.
  requested_at       timestamptz,
  last_started_at    timestamptz,
  last_finished_at   timestamptz,
  -- The last sync that completed, and the last failure (kept after a later success, with its time).
  last_synced_at     timestamptz,
  last_error         text,
  last_error_at      timestamptz,
  PRIMARY KEY (tenant_id, name)
);

-- Calendar events that matched a customer but have not ended yet: produced as meeting_held once
-- they end, at their final time (a moved event replaces its row, a cancelled one deletes it).
CREATE TABLE integration_pending_meetings (
  tenant_id     uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  name          text NOT NULL,
  event_id      text NOT NULL,
  starts_at     timestamptz NOT NULL,
  ends_at       timestamptz NOT NULL,
  attendees     text[] NOT NULL,
  PRIMARY KEY (tenant_id, name, event_id)
);
CREATE INDEX integration_pending_meetings_due ON integration_pending_meetings (tenant_id, name, ends_at);

-- GET /v1/integrations counts each connector's events of the last 24 hours from the outbox (ids
-- are UUIDv7: time-ordered).
CREATE INDEX event_outbox_integration ON event_outbox (tenant_id, id) WHERE surface = 'integration';
