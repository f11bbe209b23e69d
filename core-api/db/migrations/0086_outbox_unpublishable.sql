-- An outbox row that can never be published (it cannot be encoded as a message: e.g. an occurred_at
-- outside what the event store holds, from before the API refused such times) is set aside instead of
-- being retried forever: `unpublishable` says why, and published_at is set too, so that the relay
-- passes over it and the daily purge removes it with the published rows (processors/outbox/relay.ts).
ALTER TABLE event_outbox ADD COLUMN unpublishable text;
ALTER TABLE webhook_outbox ADD COLUMN unpublishable text;
