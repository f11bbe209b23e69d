-- GET /v1/analytics/portfolio over a whole workspace: index-only scans of the columns it sums
-- (no read of the wide customer rows), and top_risks read in arr order until ten at-risk
-- customers are found instead of sorting every at-risk customer.
CREATE INDEX customers_live_totals ON customers (tenant_id) INCLUDE (id, arr, status) WHERE deleted_at IS NULL;
CREATE INDEX customer_health_tenant ON customer_health (tenant_id) INCLUDE (customer_id, status, score);
CREATE INDEX customers_top_risk ON customers (tenant_id, arr DESC NULLS LAST, renewal_date, id)
  WHERE deleted_at IS NULL AND status <> 'churned';
