-- The placeholder health columns of customers (0002) give way to customer_health (0020), which the
-- health scorer writes: the list filter and the detail view join it.
ALTER TABLE customers DROP COLUMN IF EXISTS health_status, DROP COLUMN IF EXISTS health_score;
