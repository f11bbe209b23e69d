-- Deduplication keys are looked up only by the whole key, so the primary key's column order is
-- free: external_id before customer_id puts the keys of a producer whose ids grow (sequence
-- numbers, time-ordered ids) next to each other, and a request's 1000 new keys then land in a few
-- leaf pages at the end of the workspace's range instead of one page per customer across the
-- whole index (random page reads, splits and page images in the WAL for every key). Random ids
-- cost what they cost before. On a large table, build the new index CONCURRENTLY first.
ALTER TABLE event_dedup DROP CONSTRAINT event_dedup_pkey;
ALTER TABLE event_dedup ADD PRIMARY KEY (tenant_id, external_id, customer_id);
