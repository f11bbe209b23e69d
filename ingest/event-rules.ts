import { jsonBytesBounds, NO_PROPERTIES, type SplitProperties, splitProperties } from '../lib/event-properties.js';
import { uuidv7 } from '../lib/ids.js';
import { MAX_PROPERTIES_BYTES } from '../schemas/ingest.js';
import type { EventRow } from '../schemas/rows.js';

/** A per-event rejection, as both surfaces list it in `errors[]`. */
export interface Rejection {
  code: 'invalid_timestamp' | 'invalid_properties' | 'properties_too_large';
  message: string;
}

/** The timestamp window: [oldest, newest] in unix ms; `tooOld` is the surface's wording. */
export interface Window {
  now: number;
  oldest: number;
  newest: number;
  tooOld: string;
}

/** Unix ms of the event, or why it is refused. The string was already checked as ISO 8601 with a zone. */
export function eventTime(timestamp: string | undefined, w: Window): number | Rejection {
  if (timestamp === undefined) return w.now;
  const ts = Date.parse(timestamp);
  if (!(ts >= w.oldest)) return { code: 'invalid_timestamp', message: w.tooOld };
  if (ts > w.newest) return { code: 'invalid_timestamp', message: 'timestamp is in the future' };
  return ts;
}

const tooDeep = (): Rejection => ({
  code: 'invalid_properties',
  message: 'properties nest too deeply to be stored',
});
const tooLarge = (): Rejection => ({
  code: 'properties_too_large',
  message: `properties exceed ${MAX_PROPERTIES_BYTES} bytes serialized as JSON`,
});

/**
 * Properties as stored (lib/event-properties.ts), or why they are refused: the JSON text may take
 * at most 10,240 bytes. Its length is bounded from the split values, so the whole object is
 * serialized only when the limit falls between the bounds.
 */
export function storedProperties(properties: Record<string, unknown> | undefined): SplitProperties | Rejection {
  if (properties === undefined) return NO_PROPERTIES;
  let p: SplitProperties;
  try {
    p = splitProperties(properties);
  } catch {
    return tooDeep();
  }
  const [lo, hi] = jsonBytesBounds(p);
  if (hi <= MAX_PROPERTIES_BYTES) return p;
  if (lo > MAX_PROPERTIES_BYTES) return tooLarge();
  let json: string;
  try {
    json = p.raw || JSON.stringify(properties);
  } catch {
    return tooDeep();
  }
  return Buffer.byteLength(json) > MAX_PROPERTIES_BYTES ? tooLarge() : p;
}

export const isRejection = (v: unknown): v is Rejection => typeof v === 'object' && v !== null && 'code' in v;

/** What a surface says about one accepted event; the rest of the row is the request's. */
export interface EventRowFields {
  customerId: string;
  eventName: string;
  ts: number;
  externalCustomerId: string;
  externalSource: string;
  userId: string;
  productId: string;
  productCode: string;
  externalId: string;
  userEmail: string;
  userExternalId: string;
  props: SplitProperties;
}

export interface RequestStamp {
  tenantId: string;
  batchId: string;
  /** Receipt time, unix ms. */
  now: number;
  surface: 'a' | 'b';
}

/**
 * One row of csp.events in ClickHouse's JSONEachRow form (the contract: schemas/rows.ts), stamped
 * with tenant, batch and a fresh event id. Every row has the same keys in the same order.
 */
export function eventRow(r: RequestStamp, f: EventRowFields): EventRow {
  return {
    tenant_id: r.tenantId,
    customer_id: f.customerId,
    event_name: f.eventName,
    ts: Math.floor(f.ts / 1000),
    ts_ms: f.ts % 1000,
    event_id: uuidv7(r.now),
    batch_id: r.batchId,
    received_at: Math.floor(r.now / 1000),
    external_customer_id: f.externalCustomerId,
    external_source: f.externalSource,
    user_id: f.userId,
    product_id: f.productId,
    product_code: f.productCode,
    surface: r.surface,
    external_id: f.externalId,
    properties: f.props.raw,
    prop_keys: f.props.keys,
    prop_values: f.props.values,
    user_email: f.userEmail,
    user_external_id: f.userExternalId,
    prop_kinds: f.props.kinds,
  };
}
