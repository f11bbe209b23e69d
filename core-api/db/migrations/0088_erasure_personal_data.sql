-- No personal data of an erased customer left in rows that do not carry its id (docs/erasure.md,
-- "What stays"): the bulk-import rows it was uploaded in, the webhook events that describe it, the
-- addresses of its people in pending calendar meetings. Rows keyed by its id are removed by the
-- request (foreign keys) and by the processors (processors/erasure/postgres.ts).

-- A bulk import's rows are read until the job ends (a runner that takes over a stalled job reads
-- them again) and never after (GET /v1/jobs/{id} shows counts and row errors, by index): an ended
-- job keeps none, so a finished import holds no customer's data and an erasure need not read it.
CREATE FUNCTION jobs_input_dropped() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.input := '[]';
  RETURN NEW;
END
$$;

CREATE TRIGGER jobs_input_dropped BEFORE UPDATE OF status ON jobs FOR EACH ROW
  WHEN (OLD.status NOT IN ('succeeded', 'failed') AND NEW.status IN ('succeeded', 'failed'))
  EXECUTE FUNCTION jobs_input_dropped();

UPDATE jobs SET input = '[]' WHERE status IN ('succeeded', 'failed') AND input <> '[]';

-- The customer a webhook event is about, or null: customer.* events name it by `id`, the others
-- (task.*, alert.created, health.changed, playbook.notification) by `customer_id`. Never fails
-- (the indexes below evaluate it on every row written): a value that is not a uuid is no customer.
CREATE FUNCTION webhook_event_customer(type text, data jsonb) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN v ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
    THEN v::uuid END
  FROM (SELECT CASE WHEN type LIKE 'customer.%' THEN data ->> 'id' ELSE data ->> 'customer_id' END) AS x (v)
$$;

-- The same for a delivery's body: the JSON the fan-out wrote ({type, timestamp, data}), always valid
-- JSON (written by JSON.stringify from a message built from a jsonb value, or by jsonb itself).
CREATE FUNCTION webhook_body_customer(type text, body text) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT webhook_event_customer(type, body::jsonb -> 'data')
$$;

-- What stays of an event's data once its customer is erased: the ids (the event's own and the
-- customer's, which the erasure record keeps too) and the mark; no name, domain, external id or
-- e-mail address, no field a client wrote.
CREATE FUNCTION webhook_erased_data(data jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT jsonb_strip_nulls(jsonb_build_object('id', data -> 'id', 'customer_id', data -> 'customer_id'))
    || '{"erased": true}'
$$;

CREATE FUNCTION webhook_erased_body(body text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT jsonb_build_object('type', b -> 'type', 'timestamp', b -> 'timestamp', 'data',
    webhook_erased_data(b -> 'data'))::text
  FROM (SELECT body::jsonb) AS x (b)
$$;

-- The processors' erasure finds a customer's events and deliveries by these, whatever their number.
CREATE INDEX webhook_outbox_customer ON webhook_outbox (webhook_event_customer(type, data));
CREATE INDEX webhook_deliveries_customer ON webhook_deliveries (webhook_body_customer(event_type, body));

-- Subscribers still receive the events of a customer erased meanwhile whole (customer.deleted
-- tells them which customer went): an outbox row is reduced once it is published, a delivery once
-- it ended (succeeded, or failed after its last retry). Those that ended before the erasure are
-- reduced by the processors' erasure. A workspace that never erased a customer costs one index
-- probe per row (erasures_page); the body is read only in one that did.
CREATE FUNCTION webhook_outbox_erased() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM erasures WHERE tenant_id = NEW.tenant_id) THEN
    IF EXISTS (SELECT 1 FROM erasures WHERE customer_id = webhook_event_customer(NEW.type, NEW.data)) THEN
      NEW.data := webhook_erased_data(NEW.data);
    END IF;
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER webhook_outbox_erased BEFORE UPDATE OF published_at ON webhook_outbox FOR EACH ROW
  WHEN (OLD.published_at IS NULL AND NEW.published_at IS NOT NULL)
  EXECUTE FUNCTION webhook_outbox_erased();

CREATE FUNCTION webhook_delivery_erased() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM erasures WHERE tenant_id = NEW.tenant_id) THEN
    IF EXISTS (SELECT 1 FROM erasures WHERE customer_id = webhook_body_customer(NEW.event_type, NEW.body)) THEN
      NEW.body := webhook_erased_body(NEW.body);
    END IF;
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER webhook_delivery_erased BEFORE UPDATE OF status ON webhook_deliveries FOR EACH ROW
  WHEN (OLD.status = 'pending' AND NEW.status <> 'pending' AND NEW.event_type <> 'ping')
  EXECUTE FUNCTION webhook_delivery_erased();

-- remove_customers() of 0080, and, in the same transaction, what names the customers' people in
-- rows without their id, matched with the values the delete removes (read just before it, never
-- kept: the erasure record holds no personal data), within their workspaces:
-- - rows of bulk imports not yet finished (finished ones keep none, above) that would create or
--   update the customer: same (external_source, external_id), or, without an external_id, the
--   same name. Such a row becomes null (the job counts it failed, by its index); the others stay;
-- - addresses in calendar meetings not yet produced (integration_pending_meetings) that matched
--   the customer (a contact's e-mail address, or its email_domain) and match no other customer of
--   the workspace (a contact's address, a customer's domain); a meeting left without an address
--   is dropped (it would produce nothing).
-- Both are counted in the erasure record (`jobs.input`, `integration_pending_meetings.attendees`).
-- The import rows are updated after the delete, so the request never holds a job's row while it
-- waits for a customer row that a running import holds.
CREATE OR REPLACE FUNCTION remove_customers(ids uuid[], why text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  fk record;
  n integer;
  gone jsonb;
BEGIN
  IF ids IS NULL OR cardinality(ids) = 0 THEN
    RETURN 0;
  END IF;
  INSERT INTO erasures (customer_id, tenant_id, reason, postgres_rows)
  SELECT id, tenant_id, why, '{"customers": 1}' FROM customers WHERE id = ANY(ids)
  ON CONFLICT (customer_id) DO NOTHING;
  FOR fk IN
    SELECT cl.relname AS tbl, a.attname AS col
    FROM pg_constraint c
    JOIN pg_class cl ON cl.oid = c.conrelid
    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
    WHERE c.contype = 'f' AND c.confrelid = 'customers'::regclass AND c.confdeltype = 'c'
  LOOP
    EXECUTE format(
      'UPDATE erasures e SET postgres_rows = e.postgres_rows || jsonb_build_object(%L, d.n)
       FROM (SELECT %I AS id, count(*) AS n FROM %I WHERE %I = ANY($1) GROUP BY 1) d
       WHERE e.customer_id = d.id',
      fk.tbl, fk.col, fk.tbl, fk.col) USING ids;
  END LOOP;
  SELECT jsonb_agg(jsonb_build_object('id', c.id, 'tenant_id', c.tenant_id, 'name', c.name,
      'external_id', c.external_id, 'external_source', c.external_source, 'domain', lower(c.email_domain),
      'addresses', (SELECT coalesce(jsonb_agg(DISTINCT lower(k.email)), '[]') FROM contacts k
                    WHERE k.customer_id = c.id AND k.email IS NOT NULL)))
  INTO gone FROM customers c WHERE c.id = ANY(ids);
  DELETE FROM customers WHERE id = ANY(ids);
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n = 0 THEN
    RETURN 0;
  END IF;

  WITH g AS (
    SELECT * FROM jsonb_to_recordset(gone)
      AS g (id uuid, tenant_id uuid, name text, external_id text, external_source text)
  ),
  hit AS (
    SELECT DISTINCT ON (j.id, e.i) j.id AS job, e.i, g.id AS customer
    FROM jobs j
    CROSS JOIN LATERAL jsonb_array_elements(j.input) WITH ORDINALITY AS e (r, i)
    JOIN g ON g.tenant_id = j.tenant_id
    WHERE j.tenant_id IN (SELECT tenant_id FROM g) AND j.type = 'customers.bulk_import'
      AND j.status IN ('queued', 'running') AND jsonb_typeof(e.r) = 'object'
      AND CASE WHEN e.r ->> 'external_id' IS NOT NULL
               THEN e.r ->> 'external_id' = g.external_id
                 AND coalesce(e.r ->> 'external_source', 'internal') = g.external_source
               ELSE e.r ->> 'name' = g.name END
    ORDER BY j.id, e.i, g.id
  ),
  nulled AS (
    UPDATE jobs j SET input = (
      SELECT jsonb_agg(CASE WHEN h.i IS NULL THEN e.r ELSE 'null'::jsonb END ORDER BY e.i)
      FROM jsonb_array_elements(j.input) WITH ORDINALITY AS e (r, i)
      LEFT JOIN hit h ON h.job = j.id AND h.i = e.i)
    WHERE j.id IN (SELECT job FROM hit)
  )
  UPDATE erasures x SET postgres_rows = x.postgres_rows || jsonb_build_object('jobs.input', c.n)
  FROM (SELECT customer, count(*) AS n FROM hit GROUP BY 1) c
  WHERE x.customer_id = c.customer;

  WITH g AS (
    SELECT * FROM jsonb_to_recordset(gone) AS g (id uuid, tenant_id uuid, domain text, addresses jsonb)
  ),
  hit AS (
    SELECT m.tenant_id, m.name, m.event_id, x.address, min(g.id::text)::uuid AS customer
    FROM g
    JOIN integration_pending_meetings m ON m.tenant_id = g.tenant_id
    CROSS JOIN LATERAL unnest(m.attendees) AS x (address)
    WHERE (g.addresses ? x.address OR split_part(x.address, '@', 2) = g.domain)
      AND NOT EXISTS (SELECT 1 FROM contacts k WHERE k.tenant_id = m.tenant_id AND lower(k.email) = x.address)
      AND NOT EXISTS (SELECT 1 FROM customers c
                      WHERE c.tenant_id = m.tenant_id AND lower(c.email_domain) = split_part(x.address, '@', 2))
    GROUP BY 1, 2, 3, 4
  ),
  kept AS (
    UPDATE integration_pending_meetings m SET attendees = array(
      SELECT a FROM unnest(m.attendees) WITH ORDINALITY AS u (a, i)
      WHERE NOT EXISTS (SELECT 1 FROM hit h WHERE h.tenant_id = m.tenant_id AND h.name = m.name
                          AND h.event_id = m.event_id AND h.address = u.a)
      ORDER BY u.i)
    WHERE (m.tenant_id, m.name, m.event_id) IN (SELECT tenant_id, name, event_id FROM hit)
  )
  UPDATE erasures x SET postgres_rows = x.postgres_rows
    || jsonb_build_object('integration_pending_meetings.attendees', c.n)
  FROM (SELECT customer, count(*) AS n FROM hit GROUP BY 1) c
  WHERE x.customer_id = c.customer;
  DELETE FROM integration_pending_meetings
  WHERE tenant_id IN (SELECT (g ->> 'tenant_id')::uuid FROM jsonb_array_elements(gone) AS g) AND attendees = '{}';
  RETURN n;
END
$$;
