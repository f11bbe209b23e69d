import type { BillingRow, EventRow } from '../../schemas/rows.js';
import type { PreparedB } from '../../ingest/surface-b/events.js';
import { EVENT_ROW_COLUMNS, RowBinaryWriter } from '../../lib/row-binary.js';

/** A csp.events row numbered `i` (its name, time and event id follow the number), with `over` on top. */
export const sampleEventRow = (i: number, over: Partial<EventRow> = {}): EventRow => ({
  tenant_id: '0190f3a2-7b1c-7d4e-8f00-123456789abc',
  customer_id: 'FFFFFFFF-0000-4000-8000-00000000000A',
  event_name: `feature_${i}`,
  ts: 1_764_000_000 + i,
  ts_ms: i % 1000,
  event_id: `0190f3a2-7b1c-7d4e-8f00-${i.toString(16).padStart(12, '0')}`,
  batch_id: '0190f3a2-7b1c-7d4e-8f00-000000000000',
  received_at: 1_764_000_100,
  external_customer_id: 'cust-000001',
  external_source: 'internal',
  user_id: 'u1',
  product_id: '',
  product_code: '',
  surface: 'a',
  external_id: '',
  properties: '',
  prop_keys: [],
  prop_values: [],
  user_email: '',
  user_external_id: '',
  prop_kinds: '',
  ...over,
});

/** A csp.billing_events row (payment_failed, pending), with `over` on top. */
export const sampleBillingRow = (over: Partial<BillingRow> = {}): BillingRow => ({
  tenant_id: '0190f3a2-7b1c-7d4e-8f00-123456789abc',
  customer_id: '0190f3a2-7b1c-7d4e-8f00-123456789abd',
  event_type: 'payment_failed',
  currency: 'USD',
  status: 'pending',
  ts: 1,
  ts_ms: 2,
  event_id: '0190f3a2-7b1c-7d4e-8f00-123456789abe',
  batch_id: '0190f3a2-7b1c-7d4e-8f00-123456789abf',
  received_at: 3,
  amount: null,
  ...over,
});

/** Rows as surface B's prepare step leaves them: one RowBinary buffer, each row's end and event name. */
export function preparedRows(
  rows: EventRow[],
): Pick<PreparedB, 'rows' | 'rowCount' | 'rowEnds' | 'rowName' | 'names' | 'rowsTaken'> {
  const w = new RowBinaryWriter(1024);
  const rowEnds = new Int32Array(rows.length);
  const rowName = new Uint16Array(rows.length);
  const names: string[] = [];
  rows.forEach((r, i) => {
    w.row(EVENT_ROW_COLUMNS, r);
    rowEnds[i] = w.length;
    if (!names.includes(r.event_name)) names.push(r.event_name);
    rowName[i] = names.indexOf(r.event_name);
  });
  return { rows: w.take(), rowCount: rows.length, rowEnds, rowName, names, rowsTaken: false };
}
