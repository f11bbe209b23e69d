-- The status history of every customer, so that retention can be computed for any past month
-- (GET /v1/analytics/cohorts). Written by triggers on customers, not by the code that changes a
-- customer: create, PATCH, bulk import, soft delete, restore and any future write path are all
-- recorded without having to remember it.
--
-- A row is the customer's state from changed_at on, until its next row: its status, and whether it
-- was soft-deleted. A soft delete and a restore are rows of their own that keep the status and flip
-- `deleted`, so a customer's status at any time is the status of its latest row up to then, and the
-- trash can be told apart from churn. A permanent delete removes the customer's history with it.
CREATE TABLE customer_status_history (
  id           bigserial PRIMARY KEY,
  tenant_id    uuid NOT NULL,
  customer_id  uuid NOT NULL REFERENCES customers ON DELETE CASCADE,
  status       text NOT NULL CHECK (status IN ('active', 'trial', 'churned', 'paused')),
  deleted      boolean NOT NULL DEFAULT false,
  changed_at   timestamptz NOT NULL
);
-- Read per customer in time order (the next row closes an interval); id breaks ties in one transaction.
CREATE INDEX customer_status_history_customer ON customer_status_history (tenant_id, customer_id, changed_at, id);

-- Statement-level with transition tables: a bulk insert of 100,000 customers writes its history in
-- one INSERT … SELECT instead of 100,000 trigger calls. A new customer's first row is at its
-- created_at (which an import may set in the past); a change is at the transaction's time.
CREATE FUNCTION customer_status_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO customer_status_history (tenant_id, customer_id, status, deleted, changed_at)
  SELECT n.tenant_id, n.id, n.status, n.deleted_at IS NOT NULL, n.created_at FROM new_rows n;
  RETURN NULL;
END
$$;

CREATE FUNCTION customer_status_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO customer_status_history (tenant_id, customer_id, status, deleted, changed_at)
  SELECT n.tenant_id, n.id, n.status, n.deleted_at IS NOT NULL, now()
  FROM new_rows n JOIN old_rows o ON o.id = n.id
  WHERE o.status IS DISTINCT FROM n.status OR (o.deleted_at IS NULL) <> (n.deleted_at IS NULL);
  RETURN NULL;
END
$$;

CREATE TRIGGER customers_status_inserted AFTER INSERT ON customers
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION customer_status_inserted();

-- PostgreSQL allows no column list (UPDATE OF status, deleted_at) on a trigger with transition
-- tables; the join above keeps only the rows whose status or trash state changed.
CREATE TRIGGER customers_status_updated AFTER UPDATE ON customers
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION customer_status_updated();

-- Customers that existed before this migration: one row at their created_at with their current
-- status, and for those in the trash a second row at the time they were deleted.
INSERT INTO customer_status_history (tenant_id, customer_id, status, deleted, changed_at)
SELECT tenant_id, id, status, false, created_at FROM customers;
INSERT INTO customer_status_history (tenant_id, customer_id, status, deleted, changed_at)
SELECT tenant_id, id, status, true, deleted_at FROM customers WHERE deleted_at IS NOT NULL;
