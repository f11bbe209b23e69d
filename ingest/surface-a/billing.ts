import type { BufferPool } from '../../lib/buffer-pool.js';
import { uuidv7 } from '../../lib/ids.js';
import type { BillingEvent } from '../../schemas/ingest.js';
import { unprocessable, type Detail } from './errors.js';
import type { Resolver } from '../resolver.js';
import type { BillingRow } from '../../schemas/rows.js';
import { BILLING_ROW_COLUMNS, RowBinaryWriter } from '../../lib/row-binary.js';

export interface PreparedBilling {
  /** csp.billing_events rows in RowBinary (lib/row-binary.ts). */
  rows: Buffer;
  accepted: number;
}

/**
 * Billing events carry the customer's service UUID only. The response has no per-event error
 * list, so an unknown customer fails the request with 422 (retrying would never help) instead of
 * being dropped silently.
 */
export async function prepareBilling(
  events: BillingEvent[],
  ctx: { tenantId: string; batchId: string; now: number; resolver: Resolver; payloads?: BufferPool },
): Promise<PreparedBilling> {
  const { tenantId, resolver } = ctx;
  const ids = events.map((e) => e.customer_id.toLowerCase());
  const customers = await resolver.prepare(tenantId, ids);
  const details: Detail[] = [];
  for (let i = 0; i < ids.length; i++) {
    if (customers.ids[i] < 0) {
      details.push({
        type: 'unknown_customer',
        loc: ['body', 'events', i, 'customer_id'],
        msg: 'No customer with this customer_id in the workspace',
        input: events[i].customer_id,
      });
    }
  }
  if (details.length) throw unprocessable(details);
  const ts = Math.floor(ctx.now / 1000);
  const w = new RowBinaryWriter(events.length * 128, ctx.payloads);
  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    w.row(BILLING_ROW_COLUMNS, {
      tenant_id: tenantId,
      customer_id: ids[i],
      event_type: e.event_type,
      amount: e.amount ?? null,
      currency: e.currency ?? 'USD',
      status: e.status ?? 'pending',
      ts,
      ts_ms: ctx.now % 1000,
      event_id: uuidv7(ctx.now),
      batch_id: ctx.batchId,
      received_at: ts,
    } satisfies BillingRow);
  }
  return { rows: w.take(), accepted: events.length };
}
