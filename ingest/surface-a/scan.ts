import { isUtf8 } from 'node:buffer';
import { isUuid } from '../../lib/ids.js';
import { JsonScanner, type RawProperties, UNSCANNABLE } from '../../lib/json-scan.js';
import { isDateTime } from '../../schemas/formats.js';
import { MAX_USAGE_BATCH, type UsageEventA } from '../../schemas/ingest.js';

/**
 * A usage event as surface A's rules take it: the request's fields, with `properties` either the
 * parsed object (the general path) or spans of the body (`scanUsage`).
 */
export type IncomingUsage = Omit<UsageEventA, 'properties'> & {
  properties?: Record<string, unknown> | RawProperties;
};

const name = (s: string) => Buffer.from(s);
const EVENTS = name('events');
const EVENT_NAME = name('event_name');
const CUSTOMER_ID = name('customer_id');
const EXTERNAL_CUSTOMER_ID = name('external_customer_id');
const EXTERNAL_SOURCE = name('external_source');
const USER_ID = name('user_id');
const PRODUCT_ID = name('product_id');
const PRODUCT_CODE = name('product_code');
const PROPERTIES = name('properties');
const TIMESTAMP = name('timestamp');

/** event_name's pattern, `^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$` (schemas/ingest.ts), on bytes. */
function snakeCase(b: Buffer, start: number, end: number): boolean {
  if (!(b[start] >= 0x61 && b[start] <= 0x7a)) return false;
  let underscore = false;
  for (let i = start + 1; i < end; i++) {
    const c = b[i];
    if (c === 0x5f) {
      if (underscore) return false;
      underscore = true;
    } else if ((c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39)) underscore = false;
    else return false;
  }
  return !underscore;
}

/** A string field of the event: its text when its length in code points is within [min, max]. */
function field(s: JsonScanner, min: number, max: number): string {
  s.peek();
  const start = s.at + 1;
  const value = s.text();
  const n = s.codePoints(start, s.at - 1);
  if (n < min || n > max) throw UNSCANNABLE;
  return value;
}

function event(s: JsonScanner): IncomingUsage {
  s.expect(0x7b);
  const e = {} as IncomingUsage;
  if (s.peek() === 0x7d) throw UNSCANNABLE; // event_name is required
  do {
    s.peek();
    const start = s.at + 1;
    const end = s.string();
    s.expect(0x3a);
    s.peek();
    // A repeated key: JSON.parse keeps the last, which the general path handles.
    if (s.is(start, end, EVENT_NAME) && e.event_name === undefined) {
      const at = s.at + 1;
      e.event_name = field(s, 1, 255);
      if (!snakeCase(s.b, at, s.at - 1)) throw UNSCANNABLE;
    } else if (s.is(start, end, CUSTOMER_ID) && e.customer_id === undefined) e.customer_id = field(s, 0, 255);
    else if (s.is(start, end, EXTERNAL_CUSTOMER_ID) && e.external_customer_id === undefined)
      e.external_customer_id = field(s, 1, 255);
    else if (s.is(start, end, EXTERNAL_SOURCE) && e.external_source === undefined) e.external_source = field(s, 1, 64);
    else if (s.is(start, end, USER_ID) && e.user_id === undefined) e.user_id = field(s, 0, 255);
    else if (s.is(start, end, PRODUCT_ID) && e.product_id === undefined) {
      e.product_id = s.text();
      if (!isUuid(e.product_id)) throw UNSCANNABLE;
    } else if (s.is(start, end, PRODUCT_CODE) && e.product_code === undefined) e.product_code = field(s, 1, 255);
    else if (s.is(start, end, PROPERTIES) && e.properties === undefined) e.properties = s.properties();
    else if (s.is(start, end, TIMESTAMP) && e.timestamp === undefined) {
      e.timestamp = s.text();
      if (!isDateTime(e.timestamp)) throw UNSCANNABLE;
    } else throw UNSCANNABLE;
  } while (s.more(0x7d));
  if (e.event_name === undefined) throw UNSCANNABLE;
  return e;
}

/**
 * Surface A's usage batch read straight from the body's bytes: the events when the body is one the
 * schema accepts as it is and the scanner covers (lib/json-scan.ts), else undefined, and the
 * caller decodes and validates it the general way (which then finds and words any error). The
 * body's content type and emptiness are checked before.
 */
export function scanUsage(body: Buffer): IncomingUsage[] | undefined {
  if (!isUtf8(body)) return undefined;
  const s = new JsonScanner(body);
  try {
    s.expect(0x7b);
    s.peek();
    const start = s.at + 1;
    if (!s.is(start, s.string(), EVENTS)) throw UNSCANNABLE;
    s.expect(0x3a);
    s.expect(0x5b);
    const events: IncomingUsage[] = [];
    if (s.peek() === 0x5d) throw UNSCANNABLE; // at least one event
    do {
      if (events.length === MAX_USAGE_BATCH) throw UNSCANNABLE;
      events.push(event(s));
    } while (s.more(0x5d));
    s.expect(0x7d);
    s.end();
    return events;
  } catch (err) {
    if (err === UNSCANNABLE) return undefined;
    throw err;
  }
}
