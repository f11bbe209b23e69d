-- Surface B records a request's deduplication keys before its publish and confirms them after
-- the PubAck, instead of holding their row locks in a transaction until the PubAck (requests that
-- shared keys waited for each other's publish and commit in a chain). Each key row names the
-- request that recorded it; a request between recording and confirming has a reservation row.
-- A key whose request has no reservation is stored; rows from before this migration (batch_id
-- NULL) are. ingest/surface-b/dedup.ts has the rules.
ALTER TABLE event_dedup ADD COLUMN batch_id uuid;

CREATE TABLE event_dedup_pending (
  batch_id   uuid PRIMARY KEY,
  tenant_id  uuid NOT NULL,
  -- Past it, the request is taken for dead and the next request with one of its keys stores the event.
  expires_at timestamptz NOT NULL
);
