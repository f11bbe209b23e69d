import type { ColumnKind } from './workers/check-rows.js';

/** The sink tables and their columns as the row checker sees them (infra/clickhouse/schema.sql). */
export const TABLES: Record<'events' | 'billing_events', Record<string, ColumnKind>> = {
  events: {
    tenant_id: 'uuid', customer_id: 'uuid', event_name: 'string', ts: 'uint', ts_ms: 'uint', event_id: 'uuid', batch_id: 'uuid',
    received_at: 'uint', external_customer_id: 'string', external_source: 'string', user_id: 'string', product_id: 'string',
    product_code: 'string', surface: 'string', external_id: 'string', properties: 'string', prop_keys: 'strings', prop_values: 'strings',
    user_email: 'string', user_external_id: 'string',
  },
  billing_events: {
    tenant_id: 'uuid', customer_id: 'uuid', event_type: 'string', amount: 'nullable_float', currency: 'string', status: 'string',
    ts: 'uint', ts_ms: 'uint', event_id: 'uuid', batch_id: 'uuid', received_at: 'uint',
  },
};
