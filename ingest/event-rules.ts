import { jsonBytesBounds, NO_PROPERTIES, type SplitProperties, splitProperties } from '../lib/event-properties.js';
import { type InexactNumber, inexactMessage, pathText } from '../lib/json.js';
import { MAX_PROPERTIES_BYTES } from '../schemas/ingest.js';
import { RawProperties } from '../lib/json-scan.js';
import { type RowBinaryWriter, uuidWire } from '../lib/row-binary.js';

/** A per-event rejection, as both surfaces list it in `errors[]`. */
export interface Rejection {
  code: 'invalid_timestamp' | 'invalid_properties' | 'properties_too_large' | 'invalid_number';
  message: string;
}

/**
 * The events whose properties hold a number that a 64-bit float, and so the stored event, would not
 * keep as written (lib/json.ts keepsValue), each with its rejection naming the first such number:
 * index in `events` → rejection. A number anywhere else of the body is in no stored field.
 */
export function numberRejections(inexact: readonly InexactNumber[] | undefined): Map<number, Rejection> | undefined {
  if (inexact === undefined) return undefined;
  const out = new Map<number, Rejection>();
  for (const { path, text } of inexact) {
    const [top, index, field] = path;
    if (top !== 'events' || typeof index !== 'number' || field !== 'properties' || out.has(index)) continue;
    out.set(index, { code: 'invalid_number', message: inexactMessage(pathText(path.slice(2)), text) });
  }
  return out;
}

/** The timestamp window: [oldest, newest] in unix ms; `tooOld` is the surface's wording. */
export interface Window {
  now: number;
  oldest: number;
  newest: number;
  tooOld: string;
}

/**
 * Unix ms of the event, or why it is refused. A string was already checked as ISO 8601 with a
 * zone; a number is one already read (ingest/scan.ts).
 */
export function eventTime(timestamp: string | number | undefined, w: Window): number | Rejection {
  if (timestamp === undefined) return w.now;
  const ts = typeof timestamp === 'number' ? timestamp : Date.parse(timestamp);
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
export function storedProperties(
  properties: Record<string, unknown> | RawProperties | undefined,
): SplitProperties | RawProperties | Rejection {
  if (properties === undefined) return NO_PROPERTIES;
  // Read from the body's bytes (lib/json-scan.ts), already measured exactly.
  if (properties instanceof RawProperties) return properties.jsonBytes > MAX_PROPERTIES_BYTES ? tooLarge() : properties;
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
  /** The customer's UUID in wire order, 16 bytes at `customerAt` (ingest/resolver.ts CustomerView). */
  customer: Uint8Array;
  customerAt: number;
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
  props: SplitProperties | RawProperties;
}

/**
 * Row fields with every field empty, over `customer`'s 16-byte slots: filled in for each event in
 * turn and handed to `writeEventRow`, one object per request rather than per event.
 */
export const blankRowFields = (customer: Uint8Array): EventRowFields => ({
  customer,
  customerAt: 0,
  eventName: '',
  ts: 0,
  externalCustomerId: '',
  externalSource: '',
  userId: '',
  productId: '',
  productCode: '',
  externalId: '',
  userEmail: '',
  userExternalId: '',
  props: NO_PROPERTIES,
});

export interface RequestStamp {
  tenantId: string;
  batchId: string;
  /** Receipt time, unix ms. */
  now: number;
  surface: 'a' | 'b';
}

/** A request's stamp with what every row repeats already encoded. */
export interface RowStamp extends RequestStamp {
  tenant: Uint8Array;
  batch: Uint8Array;
}

export function rowStamp(r: RequestStamp): RowStamp {
  return { ...r, tenant: uuidWire(r.tenantId), batch: uuidWire(r.batchId) };
}

/**
 * One row of csp.events (the contract: schemas/rows.ts) written into `w`, stamped with tenant,
 * batch and a fresh event id: the columns of EVENT_ROW_COLUMNS, in their order
 * (test/unit/rows.test.ts reads a row back by the contract's names).
 */
export function writeEventRow(w: RowBinaryWriter, r: RowStamp, f: EventRowFields): void {
  w.raw16(r.tenant);
  w.raw16(f.customer, f.customerAt);
  w.string(f.eventName);
  w.dateTime(Math.floor(f.ts / 1000));
  w.uint16(f.ts % 1000);
  w.uuidv7(r.now);
  w.raw16(r.batch);
  w.dateTime(Math.floor(r.now / 1000));
  w.string(f.externalCustomerId);
  w.string(f.externalSource);
  w.string(f.userId);
  w.string(f.productId);
  w.string(f.productCode);
  w.string(r.surface);
  w.string(f.externalId);
  const p = f.props;
  if (p instanceof RawProperties) p.writeColumns(w);
  else {
    w.string(p.raw);
    w.strings(p.keys);
    w.strings(p.values);
  }
  w.string(f.userEmail);
  w.string(f.userExternalId);
  if (p instanceof RawProperties) p.writeKinds(w);
  else w.string(p.kinds);
}
