-- Erasure of a customer's data in every store (docs/erasure.md). remove_customers() deletes the
-- customers for good and queues one erasure each, in the caller's transaction (DELETE …?hard=true,
-- the 30-day trash purge): the customer rows and what cascades from them go at once, counted per
-- table; the rest (ClickHouse mutations, tables without a foreign key) is done by the processors
-- (processors/erasure/), which lease the rows, count, delete and mark them completed. The row is
-- the workspace's proof and outlives the customer: ids, times and counts, never a name, a domain or
-- an external id. Customer ids are random UUIDs, unique across workspaces: the key on its own.
CREATE TABLE erasures (
  customer_id         uuid PRIMARY KEY,
  tenant_id           uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  reason              text NOT NULL CHECK (reason IN ('hard_delete', 'trash_purge')),
  status              text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'completed')),
  requested_at        timestamptz NOT NULL DEFAULT now(),
  started_at          timestamptz,
  completed_at        timestamptz,
  -- Rows removed per table: {"events": 1000000, …}.
  clickhouse_rows     jsonb NOT NULL DEFAULT '{}',
  postgres_rows       jsonb NOT NULL DEFAULT '{}',
  -- Rows counted in a ClickHouse table just before its mutation was issued, moved to clickhouse_rows
  -- once it is done: a run killed in between resumes knowing what its mutation removed.
  clickhouse_pending  jsonb NOT NULL DEFAULT '{}',
  -- The processors instance working on it, until lease_expires_at (a killed one's work resumes after).
  holder              text,
  lease_expires_at    timestamptz NOT NULL DEFAULT '-infinity',
  attempts            integer NOT NULL DEFAULT 0
);
CREATE INDEX erasures_open ON erasures (requested_at) WHERE status <> 'completed';
CREATE INDEX erasures_page ON erasures (tenant_id, requested_at, customer_id);
-- The writer's watch: workspaces with an erasure completed recently, whose late rows are removed.
CREATE INDEX erasures_completed ON erasures (completed_at) WHERE status = 'completed';

-- Deletes the customers `ids` (of any workspace) and queues their erasures; the number deleted.
-- Rows of every table whose foreign key cascades from customers are counted first, per customer:
-- found in the catalog, so a table added later is counted without touching this function.
CREATE FUNCTION remove_customers(ids uuid[], why text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  fk record;
  n integer;
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
  DELETE FROM customers WHERE id = ANY(ids);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;
