import { isUtf8 } from 'node:buffer';
import { isUuid } from '../../lib/ids.js';
import { JsonScanner, type RawProperties, UNSCANNABLE } from '../../lib/json-scan.js';
import { validDay } from '../../schemas/formats.js';
import { MAX_USAGE_BATCH, type UsageEventA } from '../../schemas/ingest.js';

/**
 * A usage event as surface A's rules take it: the request's fields, with `properties` either the
 * parsed object (the general path) or spans of the body (`scanUsage`).
 */
export type IncomingUsage = Omit<UsageEventA, 'properties' | 'timestamp'> & {
  properties?: Record<string, unknown> | RawProperties;
  /** As sent, or already read as unix ms (`scanUsage`). */
  timestamp?: string | number;
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

/** The two digits at `at` as a number (NaN unless both are digits). */
function two(b: Buffer, at: number): number {
  const hi = b[at] - 0x30;
  const lo = b[at + 1] - 0x30;
  return hi >= 0 && hi <= 9 && lo >= 0 && lo <= 9 ? hi * 10 + lo : Number.NaN;
}

/** Days from 1970-01-01 to a day of the proleptic Gregorian calendar. */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  return era * 146_097 + yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy - 719_468;
}

/**
 * The string content [start, end) as the `date-time` format takes it (schemas/formats.ts,
 * isDateTime), read straight into unix ms as Date.parse reads it (fractions past the millisecond
 * cut off); NaN for anything the format refuses.
 */
function dateTime(b: Buffer, start: number, end: number): number {
  const n = end - start;
  if (n < 20 || n > 40) return Number.NaN;
  const year = two(b, start) * 100 + two(b, start + 2);
  const month = two(b, start + 5);
  const day = two(b, start + 8);
  const hour = two(b, start + 11);
  const minute = two(b, start + 14);
  const second = two(b, start + 17);
  const t = b[start + 10];
  if (b[start + 4] !== 0x2d || b[start + 7] !== 0x2d || (t !== 0x54 && t !== 0x74 && t !== 0x20)) return Number.NaN;
  if (b[start + 13] !== 0x3a || b[start + 16] !== 0x3a) return Number.NaN;
  if (!validDay(year, month, day) || !(hour <= 23 && minute <= 59 && second <= 59)) return Number.NaN;
  let i = start + 19;
  let ms = 0;
  if (b[i] === 0x2e) {
    const first = ++i;
    for (; i < end && b[i] >= 0x30 && b[i] <= 0x39; i++) if (i - first < 3) ms = ms * 10 + b[i] - 0x30;
    const digits = i - first;
    if (digits === 0 || digits > 9) return Number.NaN;
    if (digits < 3) ms *= digits === 1 ? 100 : 10;
  }
  let offset = 0;
  const z = b[i];
  if (z === 0x5a || z === 0x7a) i++;
  else if (z === 0x2b || z === 0x2d) {
    const oh = two(b, i + 1);
    const om = two(b, i + 4);
    if (b[i + 3] !== 0x3a || !(oh <= 15 && om <= 59)) return Number.NaN;
    offset = (z === 0x2b ? 1 : -1) * (oh * 60 + om) * 60_000;
    i += 6;
  } else return Number.NaN;
  if (i !== end) return Number.NaN;
  return (
    daysFromCivil(year, month, day) * 86_400_000 + hour * 3_600_000 + minute * 60_000 + second * 1000 + ms - offset
  );
}

/** A string field of the event: its text when its length in code points is within [min, max]. */
function field(s: JsonScanner, min: number, max: number): string {
  s.peek();
  const start = s.at + 1;
  const value = s.text();
  // Bytes bound the code points from above (and the minimums, 0 or 1, are the same in both);
  // count them only when that bound is not enough.
  const bytes = s.at - 1 - start;
  if (bytes < min || (bytes > max && s.codePoints(start, s.at - 1) > max)) throw UNSCANNABLE;
  return value;
}

/** Which field a key names (its length picks the candidates), or -1. */
function fieldOf(s: JsonScanner, start: number, end: number): number {
  switch (end - start) {
    case 10:
      return s.is(start, end, EVENT_NAME)
        ? F.EventName
        : s.is(start, end, PROPERTIES)
          ? F.Properties
          : s.is(start, end, PRODUCT_ID)
            ? F.ProductId
            : -1;
    case 11:
      return s.is(start, end, CUSTOMER_ID) ? F.CustomerId : -1;
    case 7:
      return s.is(start, end, USER_ID) ? F.UserId : -1;
    case 9:
      return s.is(start, end, TIMESTAMP) ? F.Timestamp : -1;
    case 20:
      return s.is(start, end, EXTERNAL_CUSTOMER_ID) ? F.ExternalCustomerId : -1;
    case 15:
      return s.is(start, end, EXTERNAL_SOURCE) ? F.ExternalSource : -1;
    case 12:
      return s.is(start, end, PRODUCT_CODE) ? F.ProductCode : -1;
    default:
      return -1;
  }
}

enum F {
  EventName = 1,
  CustomerId = 2,
  ExternalCustomerId = 4,
  ExternalSource = 8,
  UserId = 16,
  ProductId = 32,
  ProductCode = 64,
  Properties = 128,
  Timestamp = 256,
}

function event(s: JsonScanner): IncomingUsage {
  s.expect(0x7b);
  const e = {} as IncomingUsage;
  // Fields seen: a repeated key (JSON.parse keeps the last one) is left to the general path.
  let seen = 0;
  if (s.peek() === 0x7d) throw UNSCANNABLE; // event_name is required
  do {
    s.peek();
    const start = s.at + 1;
    const f = fieldOf(s, start, s.string());
    if (f === -1 || (seen & f) !== 0) throw UNSCANNABLE;
    seen |= f;
    s.expect(0x3a);
    s.peek();
    switch (f) {
      case F.EventName: {
        const at = s.at + 1;
        e.event_name = field(s, 1, 255);
        if (!snakeCase(s.b, at, s.at - 1)) throw UNSCANNABLE;
        break;
      }
      case F.CustomerId:
        e.customer_id = field(s, 0, 255);
        break;
      case F.ExternalCustomerId:
        e.external_customer_id = field(s, 1, 255);
        break;
      case F.ExternalSource:
        e.external_source = field(s, 1, 64);
        break;
      case F.UserId:
        e.user_id = field(s, 0, 255);
        break;
      case F.ProductId:
        e.product_id = s.text();
        if (!isUuid(e.product_id)) throw UNSCANNABLE;
        break;
      case F.ProductCode:
        e.product_code = field(s, 1, 255);
        break;
      case F.Properties:
        e.properties = s.properties();
        break;
      default: {
        const start = s.at + 1;
        const end = s.string();
        e.timestamp = dateTime(s.b, start, end);
        if (Number.isNaN(e.timestamp)) throw UNSCANNABLE;
      }
    }
  } while (s.more(0x7d));
  if ((seen & F.EventName) === 0) throw UNSCANNABLE;
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
