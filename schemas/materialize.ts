/**
 * Materialize now (POST /v1/metrics/{id}/materialize): the core NATS request the core API sends
 * and the materializer (processors/metrics/) answers once the values are stored in ClickHouse.
 */
export interface MaterializeRequest {
  tenant_id: string;
  metric_id: string;
}

export interface MaterializeSummary {
  metric_id: string;
  /** Customers a value was stored for (1 for a portfolio metric). */
  customers: number;
  period_start: string;
  period_end: string;
  computed_at: string;
}

export type MaterializeReply =
  | ({ ok: true } & MaterializeSummary)
  | { ok: false; error: 'invalid_request' | 'unknown_metric' | 'metric_deleted' | 'materialization_failed' | 'busy' };

/** Seconds a client should wait after `materializer_unavailable`. */
export const MATERIALIZE_RETRY_AFTER_S = 30;

/** customer_id of a portfolio-grain value in csp.metric_values (the API shows it as null). */
export const PORTFOLIO_CUSTOMER = '00000000-0000-0000-0000-000000000000';
