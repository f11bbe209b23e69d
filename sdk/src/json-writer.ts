/**
 * Writes a value as JSON straight into a buffer, as UTF-8: byte for byte what
 * `Buffer.from(JSON.stringify(value))` holds, without the string in between. JSON.stringify with
 * its string (garbage for every event), Buffer.byteLength and the copy into the batch took most of
 * the producer client's CPU per event; this writes the same bytes in less than half the time.
 *
 * It writes only what it can write exactly: plain objects (prototype Object.prototype or null,
 * without toJSON), arrays, Dates, strings, numbers, booleans and null. For anything else it
 * returns NOT_PLAIN and the caller serializes with JSON.stringify, which then also throws or
 * escapes as it always did: BigInt, cycles (past MAX_DEPTH), class instances, Maps, boxed
 * primitives, objects with toJSON, strings with a control character other than \b \f \n \r \t or
 * with an unpaired surrogate (JSON.stringify writes those as `\uXXXX`, which the client checks
 * for text the service cannot store), and every object while Object.prototype has an enumerable
 * property. One difference remains, for a getter that adds or deletes properties of its own object
 * while it is written: JSON.stringify lists the keys first, this reads them as it goes.
 *
 * NO_ROOM: the bytes would pass `limit` (bounds are checked per string, at 3 bytes per UTF-16
 * unit, so it may say so a little early); nothing is promised about the bytes written before that.
 */

export const NOT_PLAIN = -1;
export const NO_ROOM = -2;
/** Deeper values go to JSON.stringify, which also finds cycles. */
const MAX_DEPTH = 32;
/** The longest number JSON.stringify writes, e.g. -1.2345678901234567e-308. */
const MAX_NUMBER_BYTES = 25;

/** The letter of a two-character escape (\" \\ \b \f \n \r \t), 0 for the other characters below 0x60. */
const ESCAPE = new Uint8Array(0x60);
ESCAPE[0x22] = 0x22;
ESCAPE[0x5c] = 0x5c;
ESCAPE[0x08] = 0x62;
ESCAPE[0x0c] = 0x66;
ESCAPE[0x0a] = 0x6e;
ESCAPE[0x0d] = 0x72;
ESCAPE[0x09] = 0x74;

const TRUE = Buffer.from('true');
const FALSE = Buffer.from('false');
const NULL = Buffer.from('null');
const dateToJSON = Date.prototype.toJSON;

/** Writes `v` at `at`; the offset past its last byte, or NOT_PLAIN, or NO_ROOM. */
export function writeJson(v: unknown, buf: Buffer, at: number, limit: number): number {
  return value(v, buf, at, limit, 0);
}

function value(v: unknown, b: Buffer, at: number, limit: number, depth: number): number {
  switch (typeof v) {
    case 'string':
      return string(v, b, at, limit);
    case 'number':
      return number(v, b, at, limit);
    case 'boolean':
      return word(v ? TRUE : FALSE, b, at, limit);
    case 'object':
      if (v === null) return word(NULL, b, at, limit);
      return depth < MAX_DEPTH ? object(v, b, at, limit, depth + 1) : NOT_PLAIN;
    default:
      // bigint (JSON.stringify throws, or calls a BigInt.prototype.toJSON); the others are skipped by the callers.
      return NOT_PLAIN;
  }
}

/** undefined, functions and symbols: left out of objects, null in arrays. */
const skipped = (v: unknown): boolean => v === undefined || typeof v === 'function' || typeof v === 'symbol';

function object(o: object, b: Buffer, at: number, limit: number, depth: number): number {
  const proto = Object.getPrototypeOf(o);
  if (proto === Date.prototype && (o as Date).toJSON === dateToJSON) {
    const s = (o as Date).toJSON();
    return s === null ? word(NULL, b, at, limit) : string(s, b, at, limit);
  }
  if (typeof (o as { toJSON?: unknown }).toJSON === 'function') return NOT_PLAIN;
  if (proto === Array.prototype && Array.isArray(o)) return array(o, b, at, limit, depth);
  if (proto !== Object.prototype && proto !== null) return NOT_PLAIN;
  // for-in reads by the object's enum cache, faster than Object.keys and a lookup per key; it
  // visits inherited properties too, so only while Object.prototype has no enumerable one.
  if (proto !== null && inheritsEnumerable()) return NOT_PLAIN;
  const r = o as Record<string, unknown>;
  if (at >= limit) return NO_ROOM;
  b[at++] = 0x7b; // {
  let first = true;
  for (const k in r) {
    const x = r[k];
    if (skipped(x)) continue;
    if (!first) {
      if (at >= limit) return NO_ROOM;
      b[at++] = 0x2c; // ,
    }
    first = false;
    at = string(k, b, at, limit);
    if (at < 0) return at;
    if (at >= limit) return NO_ROOM;
    b[at++] = 0x3a; // :
    at = value(x, b, at, limit, depth);
    if (at < 0) return at;
  }
  if (at >= limit) return NO_ROOM;
  b[at++] = 0x7d; // }
  return at;
}

const EMPTY = {};

/** Whether Object.prototype (or an object above it) has an enumerable property that for-in would visit. */
function inheritsEnumerable(): boolean {
  for (const _ in EMPTY) return true;
  return false;
}

function array(a: unknown[], b: Buffer, at: number, limit: number, depth: number): number {
  if (at >= limit) return NO_ROOM;
  b[at++] = 0x5b; // [
  for (let i = 0; i < a.length; i++) {
    if (i > 0) {
      if (at >= limit) return NO_ROOM;
      b[at++] = 0x2c;
    }
    const x = a[i];
    at = skipped(x) ? word(NULL, b, at, limit) : value(x, b, at, limit, depth);
    if (at < 0) return at;
  }
  if (at >= limit) return NO_ROOM;
  b[at++] = 0x5d; // ]
  return at;
}

function word(w: Buffer, b: Buffer, at: number, limit: number): number {
  if (at + w.length > limit) return NO_ROOM;
  for (let i = 0; i < w.length; i++) b[at + i] = w[i];
  return at + w.length;
}

function number(v: number, b: Buffer, at: number, limit: number): number {
  if (!Number.isFinite(v)) return word(NULL, b, at, limit);
  if (at + MAX_NUMBER_BYTES > limit) return NO_ROOM;
  if (v === (v | 0)) {
    // A 32-bit integer (-0 too, which JSON writes 0): its digits, without a string.
    let x = v;
    if (x < 0) {
      b[at++] = 0x2d;
      x = -x;
    }
    let end = at + 1;
    for (let y = x; y >= 10; y = Math.floor(y / 10)) end++;
    for (let i = end - 1; i >= at; i--) {
      b[i] = 0x30 + (x % 10);
      x = Math.floor(x / 10);
    }
    return end;
  }
  // Number's own toString is JSON's.
  const s = String(v);
  for (let i = 0; i < s.length; i++) b[at + i] = s.charCodeAt(i);
  return at + s.length;
}

/**
 * A string of printable ASCII but `"` and `\` is written as it is. Tested by the regular expression
 * engine's native loop (anchored, about 0.6 ns a character) and copied by Buffer's own latin1
 * write, it costs about half of the loop below (2.2 ns a character); the two calls cost more than
 * the loop saves on strings shorter than LONG (event names, ids, timestamps), so those take the loop.
 */
const VERBATIM = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;
const LONG = 48;
const latin1Write: (this: Buffer, s: string, at: number, n: number) => number =
  (Buffer.prototype as unknown as { latin1Write?: (s: string, at: number, n: number) => number }).latin1Write ??
  function (this: Buffer, s: string, at: number, n: number) {
    return this.write(s, at, n, 'latin1');
  };

function string(s: string, b: Buffer, at: number, limit: number): number {
  const n = s.length;
  // At most 3 bytes per UTF-16 unit (a pair takes 4 for 2; an escape 2 for 1), and the quotes.
  if (at + 3 * n + 2 > limit) return NO_ROOM;
  b[at++] = 0x22;
  if (n >= LONG && VERBATIM.test(s)) {
    at += latin1Write.call(b, s, at, n);
    b[at++] = 0x22;
    return at;
  }
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) {
      if (c >= 0x20 && c !== 0x22 && c !== 0x5c) {
        b[at++] = c;
        continue;
      }
      const e = ESCAPE[c];
      if (e === 0) return NOT_PLAIN;
      b[at++] = 0x5c;
      b[at++] = e;
    } else if (c < 0x800) {
      b[at++] = 0xc0 | (c >> 6);
      b[at++] = 0x80 | (c & 0x3f);
    } else if (c < 0xd800 || c > 0xdfff) {
      b[at++] = 0xe0 | (c >> 12);
      b[at++] = 0x80 | ((c >> 6) & 0x3f);
      b[at++] = 0x80 | (c & 0x3f);
    } else {
      const d = i + 1 < n ? s.charCodeAt(i + 1) : 0;
      if (c > 0xdbff || d < 0xdc00 || d > 0xdfff) return NOT_PLAIN;
      i++;
      const p = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
      b[at++] = 0xf0 | (p >> 18);
      b[at++] = 0x80 | ((p >> 12) & 0x3f);
      b[at++] = 0x80 | ((p >> 6) & 0x3f);
      b[at++] = 0x80 | (p & 0x3f);
    }
  }
  b[at++] = 0x22;
  return at;
}
