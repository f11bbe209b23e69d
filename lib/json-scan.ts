import { keepsValue } from './json.js';
import { type RowBinaryWriter, wordsOf } from './row-binary.js';

/**
 * A JSON scanner over the request's bytes for the ingest hot path: it checks the syntax of what
 * it walks and finds where values lie, so an event's properties go from the body into its row
 * without being parsed into objects and serialized back (lib/event-properties.ts says how they are
 * stored). It covers what clients send nearly always; the first thing outside that makes it give
 * up (it throws UNSCANNABLE), and the caller parses the body the general way, which stays the reference
 * for every rule and error. So a document scans only when the general path would store exactly
 * the same bytes:
 * - strings hold no `\u` or `\/` escape (the other escapes are those JSON.stringify writes), no raw
 *   control character;
 * - a top-level property key holds no escape, does not start with a digit (an index key would
 *   move first in the parsed object) and occurs once;
 * - a top-level property number is written as JSON.stringify writes it (`1`, `0.5`, not `1.0`);
 * - every number keeps its value in a 64-bit float (lib/json.ts keepsValue: not `1e400`);
 * - objects and arrays nest at most MAX_SCAN_DEPTH deep.
 * A nested value (an object or array property) whose text differs from JSON.stringify's (spaces,
 * `1.0`, a repeated key, a digit key) is rewritten as JSON.stringify writes it.
 */

/** Node's Buffer slices without toString's argument handling (both exist on every Buffer). */
export type Slicing = Buffer & {
  latin1Slice(start: number, end: number): string;
  utf8Slice(start: number, end: number): string;
};

/** Thrown (never escapes the scanner's caller) when the document is not one the scanner covers. */
export const UNSCANNABLE = Symbol('unscannable');

export const MAX_SCAN_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const MINUS = 0x2d;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
const STRING_KIND = 0x73; // 's'
const JSON_KIND = 0x6a; // 'j'

/** 1 for a byte that stands for itself inside a string: not a quote, a backslash or a control character. */
const STRING_BYTE = new Uint8Array(256).fill(1, 0x20);
STRING_BYTE[QUOTE] = 0;
STRING_BYTE[BACKSLASH] = 0;
/** What follows a backslash in a string the scanner takes: the escapes JSON.stringify writes. */
const SHORT_ESCAPE = new Uint8Array(256);
for (const c of '"\\bfnrt') SHORT_ESCAPE[c.charCodeAt(0)] = 1;
/** The byte an escape stands for. */
const UNESCAPED = new Uint8Array(128);
UNESCAPED[QUOTE] = QUOTE;
UNESCAPED[BACKSLASH] = BACKSLASH;
UNESCAPED[0x62] = 0x08;
UNESCAPED[0x66] = 0x0c;
UNESCAPED[0x6e] = 0x0a;
UNESCAPED[0x72] = 0x0d;
UNESCAPED[0x74] = 0x09;

const LITERALS: Record<number, Uint8Array> = {
  116: Buffer.from('true'),
  102: Buffer.from('false'),
  110: Buffer.from('null'),
};

/** How a property's value is written (`RawProperties` spans). */
enum How {
  /** String content copied as it is. */
  StringBytes = 0,
  /** String content with escapes, unescaped while copied. */
  StringEscaped = 1,
  /** JSON text copied as it is. */
  JsonBytes = 2,
  /** JSON text from `texts` (the value rewritten as JSON.stringify writes it). */
  JsonText = 3,
}

/** Ints per property in a `RawProperties` span list: key start, key end, value start, value end, how. */
const PER_KEY = 5;

/**
 * A list of ints that grows by doubling. The scanner's span and key lists are these rather than
 * arrays: a JS array grown by push to a request's few thousand spans reallocated and copied its
 * backing store on the JS heap every few events (measured: 62 % of all the ingest process
 * allocated, at about 1 KB per event), and `length = 0` gave it back to be grown again for the
 * next object. A typed array's memory lies outside the JS heap, so the young generation does not
 * fill with it.
 */
class Ints {
  a: Int32Array;
  n = 0;

  constructor(capacity: number) {
    this.a = new Int32Array(capacity);
  }

  push(v: number): void {
    if (this.n === this.a.length) this.grow();
    this.a[this.n++] = v;
  }

  private grow(): void {
    const a = new Int32Array(this.a.length * 2);
    a.set(this.a);
    this.a = a;
  }
}

/**
 * One event's properties as spans of the request body, written into a row as lib/event-properties.ts
 * stores them (`properties` empty, `prop_keys`, `prop_values`, `prop_kinds`) without making a
 * string of any of them.
 */
export class RawProperties {
  constructor(
    private readonly body: Buffer,
    /** PER_KEY ints per property from `first` (shared by the request's events). */
    private readonly spans: Int32Array,
    private readonly first: number,
    readonly count: number,
    /** Rewritten values, indexed by a JsonText span's start. */
    private readonly texts: string[],
    /** Bytes of JSON.stringify of the parsed object (UTF-8). */
    readonly jsonBytes: number,
  ) {}

  /** The `properties`, `prop_keys` and `prop_values` columns. */
  writeColumns(w: RowBinaryWriter): void {
    const { body, spans, first, count } = this;
    w.string('');
    w.count(count);
    for (let k = first; k < first + count * PER_KEY; k += PER_KEY) w.bytes(body, spans[k], spans[k + 1]);
    w.count(count);
    for (let k = first; k < first + count * PER_KEY; k += PER_KEY) {
      const how = spans[k + 4];
      if (how === How.StringBytes || how === How.JsonBytes) w.bytes(body, spans[k + 2], spans[k + 3]);
      else if (how === How.StringEscaped) w.unescaped(body, spans[k + 2], spans[k + 3], UNESCAPED);
      else w.string(this.texts[spans[k + 2]]);
    }
  }

  /** The `prop_kinds` column. */
  writeKinds(w: RowBinaryWriter): void {
    const { spans, first, count } = this;
    w.count(count);
    for (let k = first; k < first + count * PER_KEY; k += PER_KEY)
      w.byte(spans[k + 4] <= How.StringEscaped ? STRING_KIND : JSON_KIND);
  }
}

/**
 * The scanner's state over one body. Methods move `at` past what they read and throw UNSCANNABLE
 * at the first thing outside what the scanner covers (or not JSON at all).
 */
export class JsonScanner {
  at = 0;
  /** Escapes in the last string read. */
  escapes = 0;
  /** Whether the last string read is all ASCII. */
  ascii = true;
  /** Set while scanning a nested value when its text is not JSON.stringify's. */
  private odd = false;
  /** Key spans of the objects being scanned, innermost last (duplicate detection). */
  private readonly keys = new Ints(64);
  private readonly texts: string[] = [];
  /**
   * The request's property spans, made at the first `properties` with an int per 8 bytes of body
   * (the benchmark's events need one per 14), so it rarely grows. A RawProperties keeps the array
   * its spans were written in; a later growth copies them on and never writes that array again.
   */
  private spans?: Ints;

  /** The body as 32-bit words at any offset (string content is skimmed four bytes at a time, `string`). */
  private readonly words: DataView<ArrayBufferLike>;

  constructor(readonly b: Buffer) {
    this.words = wordsOf(b);
  }

  /** The next byte after any whitespace (-1 at the end); `at` moves to it. */
  peek(): number {
    const b = this.b;
    let i = this.at;
    for (; i < b.length; i++) {
      const c = b[i];
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      this.odd = true;
    }
    this.at = i;
    return i < b.length ? b[i] : -1;
  }

  /** Whitespace, then the byte `c`. */
  expect(c: number): void {
    if (this.peek() !== c) throw UNSCANNABLE;
    this.at++;
  }

  /** After a member: true if a comma follows (and is taken), false at the closing byte `close` (taken). */
  more(close: number): boolean {
    const c = this.peek();
    this.at++;
    if (c === COMMA) return true;
    if (c === close) return false;
    throw UNSCANNABLE;
  }

  /** Whitespace to the end of the body. */
  end(): void {
    if (this.peek() !== -1) throw UNSCANNABLE;
  }

  /** A string at `at` (its opening quote); returns the end of its content, `at` moves past the closing quote. */
  string(): number {
    const b = this.b;
    if (b[this.at] !== QUOTE) throw UNSCANNABLE;
    const words = this.words;
    // Where the last whole word of the body starts.
    const lastWord = b.length - 4;
    let i = this.at + 1;
    let escapes = 0;
    // Any byte of 0x80 and above among those skimmed: a non-ASCII string (`text`).
    let high = 0;
    for (;;) {
      // Whole words while none holds a quote, a backslash or a control byte (the tests below are
      // exact: a word passes only when none of its four does), then byte by byte to what stopped
      // it. Past the end of the body b[i] is undefined, and so is its class. Words are read where
      // they fall (x86 and ARM read unaligned words at full speed): aligning first took a byte loop
      // per string, 5 % of surface A's per-event work (bench/builds.ts).
      for (; i <= lastWord; i += 4) {
        const v = words.getInt32(i);
        const quote = v ^ 0x22222222;
        const backslash = v ^ 0x5c5c5c5c;
        const zeroQuote = (quote - 0x01010101) & ~quote;
        const zeroBackslash = (backslash - 0x01010101) & ~backslash;
        const control = (v - 0x20202020) & ~v;
        if (((zeroQuote | zeroBackslash | control) & 0x80808080) !== 0) break;
        high |= v;
      }
      while (STRING_BYTE[b[i]] === 1) high |= b[i++];
      const c = b[i];
      if (c === QUOTE) break;
      if (c !== BACKSLASH) throw UNSCANNABLE;
      if (SHORT_ESCAPE[b[i + 1]] !== 1) throw UNSCANNABLE;
      escapes++;
      i += 2;
    }
    this.escapes = escapes;
    this.ascii = (high & 0x80808080) === 0;
    this.at = i + 1;
    return i;
  }

  /** A string without escapes as a JS string. */
  text(): string {
    const start = this.at + 1;
    const end = this.string();
    if (this.escapes !== 0) throw UNSCANNABLE;
    const b = this.b as Slicing;
    return this.ascii ? b.latin1Slice(start, end) : b.utf8Slice(start, end);
  }

  /** Code points of the string content [start, end) (JSON Schema's maxLength counts these). */
  codePoints(start: number, end: number): number {
    let n = 0;
    for (let i = start; i < end; i++) if ((this.b[i] & 0xc0) !== 0x80) n++;
    return n;
  }

  /** Whether the string content [start, end) equals `name` (ASCII bytes). */
  is(start: number, end: number, name: Uint8Array): boolean {
    if (end - start !== name.length) return false;
    for (let i = 0; i < name.length; i++) if (this.b[start + i] !== name[i]) return false;
    return true;
  }

  /** A number at `at`; returns whether its text is the one JSON.stringify writes for it. */
  private number(): boolean {
    const b = this.b;
    const start = this.at;
    let i = start;
    if (b[i] === MINUS) i++;
    const first = i;
    if (b[i] === ZERO) i++;
    else if (b[i] > ZERO && b[i] <= NINE) while (b[i] >= ZERO && b[i] <= NINE) i++;
    else throw UNSCANNABLE;
    const integer = i - first;
    // Where the fraction's digits start, or -1.
    let fraction = -1;
    let exponent = false;
    if (b[i] === DOT) {
      fraction = ++i;
      while (b[i] >= ZERO && b[i] <= NINE) i++;
      if (i === fraction) throw UNSCANNABLE;
    }
    if (b[i] === 0x65 || b[i] === 0x45) {
      exponent = true;
      i++;
      if (b[i] === 0x2b || b[i] === MINUS) i++;
      const d = i;
      while (b[i] >= ZERO && b[i] <= NINE) i++;
      if (i === d) throw UNSCANNABLE;
    }
    this.at = i;
    if (!exponent) {
      // Up to 15 significant digits a decimal keeps its value in a double and is its shortest text,
      // which JS prints as written when it has no trailing zero and is not below 1e-6 (then it uses
      // an exponent).
      if (fraction === -1) {
        if (integer <= 15) return !(integer === 1 && b[first] === ZERO && first > start);
      } else {
        let digits = integer + (i - fraction);
        let zeros = 0;
        if (integer === 1 && b[first] === ZERO) {
          while (b[fraction + zeros] === ZERO) zeros++;
          digits -= 1 + zeros;
        }
        // Far below 1e-6 a double may not hold the value at all (1e-400 is 0): left to the check below.
        if (digits <= 15 && zeros <= 5) return b[i - 1] !== ZERO;
      }
    }
    const t = (b as Slicing).latin1Slice(start, i);
    if (String(Number(t)) === t) return true;
    // A value the double does not keep is refused, with its path, by the general path.
    if (!keepsValue(t)) throw UNSCANNABLE;
    return false;
  }

  private literal(): void {
    const word = LITERALS[this.b[this.at]];
    if (word === undefined) throw UNSCANNABLE;
    for (let i = 0; i < word.length; i++) if (this.b[this.at + i] !== word[i]) throw UNSCANNABLE;
    this.at += word.length;
  }

  /** Any value at `at` (after whitespace); sets `odd` where its text is not JSON.stringify's. */
  value(depth: number): void {
    const c = this.peek();
    if (c === QUOTE) this.string();
    else if (c === OPEN_OBJECT) this.object(depth + 1);
    else if (c === OPEN_ARRAY) this.array(depth + 1);
    else if (c === MINUS || (c >= ZERO && c <= NINE)) {
      if (!this.number()) this.odd = true;
    } else this.literal();
  }

  private array(depth: number): void {
    if (depth > MAX_SCAN_DEPTH) throw UNSCANNABLE;
    this.at++;
    if (this.peek() === CLOSE_ARRAY) {
      this.at++;
      return;
    }
    do this.value(depth);
    while (this.more(CLOSE_ARRAY));
  }

  private object(depth: number): void {
    if (depth > MAX_SCAN_DEPTH) throw UNSCANNABLE;
    this.at++;
    if (this.peek() === CLOSE_OBJECT) {
      this.at++;
      return;
    }
    const base = this.keys.n;
    do {
      this.peek();
      const start = this.at + 1;
      const end = this.string();
      // Parsing then serializing would reorder an index key and keep one of repeated keys.
      if (this.escapes !== 0 || this.isDigit(start) || this.repeats(base, start, end)) this.odd = true;
      this.keys.push(start);
      this.keys.push(end);
      this.expect(COLON);
      this.value(depth);
    } while (this.more(CLOSE_OBJECT));
    this.keys.n = base;
  }

  private isDigit(at: number): boolean {
    return this.b[at] >= ZERO && this.b[at] <= NINE;
  }

  /** Whether the key [start, end) is among the keys from `base` of the object being scanned. */
  private repeats(base: number, start: number, end: number): boolean {
    const b = this.b;
    const n = end - start;
    const keys = this.keys.a;
    for (let k = base; k < this.keys.n; k += 2) {
      const s = keys[k];
      if (keys[k + 1] - s !== n) continue;
      let i = 0;
      while (i < n && b[s + i] === b[start + i]) i++;
      if (i === n) return true;
    }
    return false;
  }

  /**
   * An event's properties object at `at`, its members as spans, measured as JSON.stringify would
   * write it. Throws UNSCANNABLE where the general path would store something else than the
   * bytes (a repeated or index key, a top-level number written otherwise).
   */
  properties(): RawProperties {
    if (this.peek() !== OPEN_OBJECT) throw UNSCANNABLE;
    this.at++;
    this.spans ??= new Ints(Math.max(64, this.b.length >> 3));
    const spans = this.spans;
    const first = spans.n;
    let count = 0;
    // Braces, and per key its quotes and colon; commas are added at the end.
    let bytes = 2;
    if (this.peek() === CLOSE_OBJECT) this.at++;
    else
      do {
        this.peek();
        const keyStart = this.at + 1;
        const keyEnd = this.string();
        if (this.escapes !== 0 || this.isDigit(keyStart) || this.repeats(0, keyStart, keyEnd)) throw UNSCANNABLE;
        this.keys.push(keyStart);
        this.keys.push(keyEnd);
        this.expect(COLON);
        const c = this.peek();
        const start = this.at;
        let how: How;
        let valueStart = start;
        let valueEnd: number;
        if (c === QUOTE) {
          valueStart = start + 1;
          valueEnd = this.string();
          how = this.escapes === 0 ? How.StringBytes : How.StringEscaped;
          bytes += valueEnd - valueStart + 2;
        } else if (c === MINUS || (c >= ZERO && c <= NINE)) {
          // A top-level number is stored as String(value): one not written that way is left to the general path.
          if (!this.number()) throw UNSCANNABLE;
          valueEnd = this.at;
          how = How.JsonBytes;
          bytes += valueEnd - start;
        } else {
          this.odd = false;
          this.value(1);
          valueEnd = this.at;
          if (this.odd) {
            const text = JSON.stringify(JSON.parse(this.b.toString('utf8', start, valueEnd)));
            valueStart = this.texts.push(text) - 1;
            how = How.JsonText;
            bytes += Buffer.byteLength(text);
          } else {
            how = How.JsonBytes;
            bytes += valueEnd - start;
          }
        }
        bytes += keyEnd - keyStart + 3;
        spans.push(keyStart);
        spans.push(keyEnd);
        spans.push(valueStart);
        spans.push(valueEnd);
        spans.push(how);
        count++;
      } while (this.more(CLOSE_OBJECT));
    this.keys.n = 0;
    if (count > 1) bytes += count - 1;
    return new RawProperties(this.b, spans.a, first, count, this.texts, bytes);
  }
}
