-- The outbox relays (processors/outbox/relay.ts) LISTEN on channel `outbox` and poll as soon as a
-- transaction that wrote outbox rows commits, instead of polling several times a second: the payload
-- names the table. One notification per statement, and only for a statement that inserted rows (the
-- webhook triggers of customers run an INSERT ... SELECT that inserts nothing in a workspace without
-- subscriptions); PostgreSQL folds identical notifications of one transaction into one. A relay still
-- polls every OUTBOX_POLL_MS, for a notification missed while its listening connection was down.
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM inserted) THEN
    PERFORM pg_notify('outbox', TG_TABLE_NAME);
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER event_outbox_notify AFTER INSERT ON event_outbox
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
CREATE TRIGGER webhook_outbox_notify AFTER INSERT ON webhook_outbox
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
