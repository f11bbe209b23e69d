-- Deleting a customer (the permanent delete, the trash purge, a workspace's deletion) cascades to
-- every table that references it; without an index led by customer_id each cascade is a scan of
-- the whole table, per customer (a workspace of 100,000 customers took over half an hour to delete).
CREATE INDEX playbook_firing_customer ON playbook_firing (customer_id);
CREATE INDEX tasks_customer ON tasks (customer_id);
CREATE INDEX customer_status_history_customer_id ON customer_status_history (customer_id);
CREATE INDEX alerts_customer ON alerts (customer_id);
