/**
 * The rows the ingest tier (and the processors' outbox relay) write into JetStream messages and the
 * ClickHouse writer inserts as they are: the contract between the tiers. The column lists are
 * those of infra/clickhouse/schema.sql, in its order (test/unit/rows.test.ts compares them), and
 * a row is one JSONEachRow object with exactly these keys in this order.
 */

export type ChType =
  | 'UUID'
  | 'String'
  | 'LowCardinality(String)'
  | 'DateTime'
  | 'UInt16'
  | 'Array(String)'
  | 'Nullable(Float64)';

export const EVENT_COLUMNS = {
  tenant_id: 'UUID',
  customer_id: 'UUID',
  event_name: 'String',
  ts: 'DateTime',
  ts_ms: 'UInt16',
  event_id: 'UUID',
  batch_id: 'UUID',
  received_at: 'DateTime',
  external_customer_id: 'String',
  external_source: 'LowCardinality(String)',
  user_id: 'String',
  product_id: 'String',
  product_code: 'String',
  surface: 'LowCardinality(String)',
  external_id: 'String',
  properties: 'String',
  prop_keys: 'Array(String)',
  prop_values: 'Array(String)',
  user_email: 'String',
  user_external_id: 'String',
  prop_kinds: 'String',
} as const satisfies Record<string, ChType>;

export const BILLING_COLUMNS = {
  tenant_id: 'UUID',
  customer_id: 'UUID',
  event_type: 'LowCardinality(String)',
  amount: 'Nullable(Float64)',
  currency: 'LowCardinality(String)',
  status: 'LowCardinality(String)',
  ts: 'DateTime',
  ts_ms: 'UInt16',
  event_id: 'UUID',
  batch_id: 'UUID',
  received_at: 'DateTime',
} as const satisfies Record<string, ChType>;

export const SINK_TABLES = { events: EVENT_COLUMNS, billing_events: BILLING_COLUMNS } as const;
export type SinkTable = keyof typeof SINK_TABLES;

/** How a JSONEachRow value carries each ClickHouse type: DateTime as unix seconds. */
type JsonOf<T extends ChType> = T extends 'Array(String)'
  ? string[]
  : T extends 'DateTime' | 'UInt16'
    ? number
    : T extends 'Nullable(Float64)'
      ? number | null
      : string;

type RowOf<C extends Record<string, ChType>> = { [K in keyof C]: JsonOf<C[K]> };

/**
 * One csp.events row. `surface`: 'a', 'b' (both ingestion surfaces), 'system' (generated events) or
 * 'integration' (activity pushed by a connected provider). `properties`, `prop_keys`, `prop_values`
 * and `prop_kinds` hold the event's properties as lib/event-properties.ts describes.
 */
export type EventRow = RowOf<typeof EVENT_COLUMNS>;
export type BillingRow = RowOf<typeof BILLING_COLUMNS>;
