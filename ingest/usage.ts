import { isUuid, uuidv7 } from '../lib/ids.js';
import { MAX_EVENT_AGE_MS, MAX_PROPERTIES_BYTES, type UsageEventA } from '../schemas/ingest.js';
import { unprocessable, type Detail } from './errors.js';
import type { Resolver } from './resolver.js';

export type EventErrorCode = 'unknown_customer' | 'unknown_external_customer' | 'invalid_customer_id' | 'invalid_timestamp' | 'properties_too_large' | 'invalid_properties';

export interface EventError {
  index: number;
  event_name: string;
  code: EventErrorCode;
  message: string;
}

export interface Prepared {
  /** Accepted events as ClickHouse JSONEachRow rows separated by commas (ClickHouse accepts that). */
  rows: string;
  accepted: number;
  errors: EventError[];
  /** Distinct event names of the accepted events, for the event catalog. */
  names: string[];
}

export interface UsageContext {
  tenantId: string;
  batchId: string;
  now: number;
  /** Timestamps up to this far ahead of the server clock are accepted (clock skew). */
  futureSkewMs: number;
  /** Grace added to the 30-day window for clock skew and transit time. */
  ageGraceMs: number;
  resolver: Resolver;
}

/** Rule 1: an event with neither reference fails the whole request. */
function requireReferences(events: UsageEventA[]): void {
  const details: Detail[] = [];
  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    if (e.customer_id === undefined && e.external_customer_id === undefined) {
      details.push({ type: 'customer_reference_required', loc: ['body', 'events', i], msg: 'Each event needs customer_id or external_customer_id', input: null });
    }
  }
  if (details.length) throw unprocessable(details);
}

/**
 * Per-event rules of surface A, on one pass: customer reference (rules 1–3), timestamp window,
 * properties size, product attribution. Accepted events come out already in the sink's row
 * format, stamped with tenant, event id, batch id and the resolved customer.
 */
export async function prepareUsage(events: UsageEventA[], ctx: UsageContext): Promise<Prepared> {
  requireReferences(events);
  const { tenantId, resolver } = ctx;
  const ids: string[] = [];
  const exts: Array<[string, string]> = [];
  let products = false;
  for (const e of events) {
    if (e.customer_id !== undefined) {
      if (isUuid(e.customer_id)) ids.push(e.customer_id.toLowerCase());
    } else exts.push([e.external_source ?? 'internal', e.external_customer_id!]);
    if (e.product_id !== undefined || e.product_code !== undefined) products = true;
  }
  await Promise.all([resolver.prepare(tenantId, ids, exts), products ? resolver.prepareProducts(tenantId) : undefined]);

  const rows: object[] = [];
  const errors: EventError[] = [];
  const names = new Set<string>();
  const receivedAt = Math.floor(ctx.now / 1000);
  const oldest = ctx.now - MAX_EVENT_AGE_MS - ctx.ageGraceMs;
  const newest = ctx.now + ctx.futureSkewMs;
  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    const fail = (code: EventErrorCode, message: string) => errors.push({ index: i, event_name: e.event_name, code, message });
    let customerId: string;
    if (e.customer_id !== undefined) {
      if (!isUuid(e.customer_id)) {
        fail('invalid_customer_id', 'customer_id is not a valid UUID');
        continue;
      }
      customerId = e.customer_id.toLowerCase();
      if (!resolver.hasCustomer(tenantId, customerId)) {
        fail('unknown_customer', 'No customer with this customer_id in the workspace');
        continue;
      }
    } else {
      const found = resolver.customerByExternal(tenantId, e.external_source ?? 'internal', e.external_customer_id!);
      if (found === undefined) {
        fail('unknown_external_customer', `No customer with external_source "${e.external_source ?? 'internal'}" and this external_customer_id`);
        continue;
      }
      customerId = found;
    }
    let ts = ctx.now;
    if (e.timestamp !== undefined) {
      ts = Date.parse(e.timestamp);
      if (!(ts >= oldest)) {
        fail('invalid_timestamp', 'timestamp is more than 30 days in the past');
        continue;
      }
      if (ts > newest) {
        fail('invalid_timestamp', 'timestamp is in the future');
        continue;
      }
    }
    let properties = '{}';
    const keys: string[] = [];
    const values: string[] = [];
    if (e.properties !== undefined) {
      try {
        properties = JSON.stringify(e.properties);
      } catch {
        fail('invalid_properties', 'properties nest too deeply to be stored');
        continue;
      }
      if (properties.length > MAX_PROPERTIES_BYTES || (properties.length * 3 > MAX_PROPERTIES_BYTES && Buffer.byteLength(properties) > MAX_PROPERTIES_BYTES)) {
        fail('properties_too_large', `properties exceed ${MAX_PROPERTIES_BYTES} bytes serialized as JSON`);
        continue;
      }
      const p = e.properties as Record<string, unknown>;
      for (const k in p) {
        const v = p[k];
        keys.push(k);
        values.push(typeof v === 'string' ? v : JSON.stringify(v));
      }
    }
    names.add(e.event_name);
    rows.push({
      tenant_id: tenantId,
      customer_id: customerId,
      event_name: e.event_name,
      ts: Math.floor(ts / 1000),
      ts_ms: ts % 1000,
      event_id: uuidv7(ctx.now),
      batch_id: ctx.batchId,
      received_at: receivedAt,
      external_customer_id: e.external_customer_id ?? '',
      external_source: e.external_source ?? 'internal',
      user_id: e.user_id ?? '',
      product_id: resolver.product(tenantId, e.product_id, e.product_code),
      product_code: e.product_code ?? '',
      surface: 'a',
      external_id: '',
      properties,
      prop_keys: keys,
      prop_values: values,
    });
  }
  const json = rows.length ? JSON.stringify(rows) : '[]';
  return { rows: json.slice(1, -1), accepted: rows.length, errors, names: [...names] };
}
