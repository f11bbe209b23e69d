import { isUtf8 } from 'node:buffer';
import { JsonScanner, type RawProperties, type Slicing, UNSCANNABLE } from '../lib/json-scan.js';
import { formatCheck } from '../schemas/ajv.js';
import { validDay } from '../schemas/formats.js';
import { SNAKE_CASE } from '../schemas/ingest.js';

const EVENTS = Buffer.from('events');

/**
 * An event as a surface's rules take it: the request's fields, with `properties` either the parsed
 * object (the general path) or spans of the body, and `timestamp` as sent or already read into
 * unix ms (`BatchScanner`).
 */
export type Incoming<E> = Omit<E, 'properties' | 'timestamp'> & {
  properties?: Record<string, unknown> | RawProperties;
  timestamp?: string | number;
};

/** What a field of an event must be, as its surface's schema says (`ruleOf`). */
type FieldRule =
  | { kind: 'text'; min: number; max: number }
  /** A string in snake_case (schemas/ingest.ts SNAKE_CASE). */
  | { kind: 'snake_case'; min: number; max: number }
  /** A string passing `check` (a format, as Ajv checks it). */
  | { kind: 'format'; check: (s: string) => boolean; min: number; max: number }
  /** The date-time format, read into unix ms. */
  | { kind: 'date-time' }
  /** A JSON object, kept as spans (lib/json-scan.ts). */
  | { kind: 'properties' };

/** The JSON Schema keywords of the surfaces' batch schemas (schemas/ingest.ts, schemas/events.ts). */
interface Schema {
  type?: string;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: unknown;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
}

/** Keywords that do not change what passes. */
const ANNOTATIONS = new Set(['description', 'default']);

/**
 * The rule of an event field, read from its schema. A keyword the scanner does not check throws
 * here, at start-up: the scanner must never take a value the schema refuses.
 */
function ruleOf(key: string, s: Schema): FieldRule {
  const only = (...allowed: string[]) => {
    for (const k of Object.keys(s))
      if (!ANNOTATIONS.has(k) && !allowed.includes(k)) throw new Error(`the batch scanner cannot check ${key}: ${k}`);
  };
  if (s.type === 'object') {
    only('type', 'properties', 'additionalProperties');
    if (s.additionalProperties !== true || Object.keys(s.properties ?? {}).length > 0)
      throw new Error(`the batch scanner takes ${key} only as a free-form object`);
    return { kind: 'properties' };
  }
  if (s.type !== 'string') throw new Error(`the batch scanner cannot check ${key}: type ${s.type}`);
  only('type', 'minLength', 'maxLength', 'pattern', 'format');
  const min = s.minLength ?? 0;
  const max = s.maxLength ?? Number.POSITIVE_INFINITY;
  if (s.pattern !== undefined) {
    if (s.pattern !== SNAKE_CASE || s.format !== undefined)
      throw new Error(`the batch scanner cannot check ${key}: pattern ${s.pattern}`);
    return { kind: 'snake_case', min, max };
  }
  if (s.format === 'date-time') {
    only('type', 'format');
    return { kind: 'date-time' };
  }
  if (s.format !== undefined) return { kind: 'format', check: formatCheck(s.format), min, max };
  return { kind: 'text', min, max };
}

interface Field {
  name: Uint8Array;
  key: string;
  /** Its place among the schema's fields (`set`). */
  index: number;
  bit: number;
  rule: FieldRule;
}

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

/** A string field: its text when its length in code points is within [min, max]. */
function text(s: JsonScanner, min: number, max: number): string {
  s.peek();
  const start = s.at + 1;
  const value = s.text();
  // Bytes bound the code points from above, and a minimum of 0 or 1 is the same in both: count
  // them only when that is not enough.
  const bytes = s.at - 1 - start;
  if (bytes < min) throw UNSCANNABLE;
  if (bytes > max || min > 1) {
    const n = s.codePoints(start, s.at - 1);
    if (n < min || n > max) throw UNSCANNABLE;
  }
  return value;
}

/** Slots of `names`: a power of two. */
const NAME_SLOTS = 1024;

/**
 * Event names as strings, by their bytes: a workspace sends few of them, and each event's name
 * was a new string (a C++ call to make, then hashed again by each set and map that looks it up).
 * A name seen before is the same string, its hash kept. Direct-mapped: a name whose slot another
 * holds is made anew and takes the slot; at most NAME_SLOTS strings of at most 255 bytes stay.
 */
class Names {
  private readonly strings: Array<string | undefined> = new Array(NAME_SLOTS).fill(undefined);

  /** The ASCII bytes [start, end) of `b` as a string. */
  get(b: Buffer, start: number, end: number): string {
    let h = 0x811c9dc5;
    for (let i = start; i < end; i++) h = Math.imul(h ^ b[i], 0x01000193);
    const slot = (h ^ (h >>> 15)) & (NAME_SLOTS - 1);
    const known = this.strings[slot];
    if (known !== undefined && known.length === end - start) {
      let i = 0;
      while (i < known.length && known.charCodeAt(i) === b[start + i]) i++;
      if (i === known.length) return known;
    }
    const made = (b as Slicing).latin1Slice(start, end);
    this.strings[slot] = made;
    return made;
  }
}

const names = new Names();

function value(s: JsonScanner, rule: FieldRule): unknown {
  switch (rule.kind) {
    case 'text':
      return text(s, rule.min, rule.max);
    case 'snake_case': {
      // ASCII only, so its bytes are its code points.
      const start = s.at + 1;
      const end = s.string();
      const n = end - start;
      if (s.escapes !== 0 || n < rule.min || n > rule.max || !snakeCase(s.b, start, end)) throw UNSCANNABLE;
      return names.get(s.b, start, end);
    }
    case 'format': {
      const v = text(s, rule.min, rule.max);
      if (!rule.check(v)) throw UNSCANNABLE;
      return v;
    }
    case 'date-time': {
      const start = s.at + 1;
      const end = s.string();
      const ms = dateTime(s.b, start, end);
      if (Number.isNaN(ms)) throw UNSCANNABLE;
      return ms;
    }
    case 'properties':
      return s.properties();
  }
}

/**
 * A surface's batch (`{"events": [...]}`) read straight from the body's bytes: its events when the
 * body is one the schema accepts as it is and the scanner covers (lib/json-scan.ts), else
 * undefined, and the caller decodes and validates it the general way (which then finds and words
 * any error). The rules come from the batch's own schema, so the two cannot drift apart. Covered:
 * exactly the key `events` at the top; `minItems` to `maxItems` objects holding only the fields
 * the schema names, each at most once, the required ones present. The body's content type and
 * emptiness are checked before.
 */
export class BatchScanner<E> {
  /** Fields by the byte length of their name. */
  private readonly byLength: Field[][] = [];
  private readonly required: number;
  /**
   * A new event: an instance of a class that sets every field of the schema to undefined, so the
   * events of a batch share one shape whatever order their fields come in. Built up field by field,
   * an event took a shape per order (the reads of the surface's rules then went megamorphic) and
   * grew a properties store past its fourth field. Its rules test `!== undefined`, never `in`.
   *
   * A class, not an object literal: V8 tracks where each literal is made and, when most objects of
   * one place outlive a young-generation collection (as a tier's first requests do while their
   * look-ups wait for PostgreSQL), makes every later one there straight in the old generation
   * ("allocation-site pretenuring"), for the life of the process. Each event then died in the old
   * generation and held its young strings alive until a full collection: in one of the two
   * processes of most benchmark runs, 7 MB/s promoted, two full collections a second and 10 % of
   * the process's CPU in the collector (`--trace-gc-nvp`). An object made by `new` has no such
   * place, so its events die young in every process.
   *
   * `make` and `set` are made from the schema's field names as code (`new Function`, as Ajv makes
   * its validators): an object made whole is made faster than a copy of a blank object, and a store to a named
   * field (`e["user_id"] = v`, in a switch on the field's index) faster than `e[key] = v` with the
   * key varying, which V8 handles as a megamorphic keyed store. Together 4 % of surface A's
   * per-event work (bench/builds.ts). The names come from our own schema, written as JSON strings.
   */
  private readonly make: () => Record<string, unknown>;
  private readonly set: (e: Record<string, unknown>, index: number, value: unknown) => void;
  private readonly minEvents: number;
  private readonly maxEvents: number;

  constructor(batch: unknown) {
    const events = (batch as Schema).properties?.events;
    const item = events?.items;
    if (events?.type !== 'array' || item?.type !== 'object' || item.properties === undefined)
      throw new Error('the batch scanner takes a schema of {"events": [objects]}');
    this.minEvents = Math.max(1, events.minItems ?? 0);
    this.maxEvents = events.maxItems ?? Number.POSITIVE_INFINITY;
    let bit = 1;
    let required = 0;
    const fields: Field[] = [];
    for (const [key, schema] of Object.entries(item.properties)) {
      const f: Field = { name: Buffer.from(key), key, index: fields.length, bit, rule: ruleOf(key, schema) };
      fields.push(f);
      (this.byLength[f.name.length] ??= []).push(f);
      if (item.required?.includes(key)) required |= bit;
      bit <<= 1;
    }
    this.required = required;
    const quoted = fields.map((f) => JSON.stringify(f.key));
    const ScannedEvent = new Function(
      `return class ScannedEvent { constructor() { ${quoted.map((n) => `this[${n}] = undefined;`).join(' ')} } };`,
    )() as new () => Record<string, unknown>;
    this.make = () => new ScannedEvent();
    this.set = new Function(
      'e',
      'i',
      'v',
      `switch (i) {${quoted.map((n, i) => `case ${i}: e[${n}] = v; break;`).join(' ')}}`,
    ) as (e: Record<string, unknown>, index: number, value: unknown) => void;
  }

  private field(s: JsonScanner, start: number, end: number): Field {
    const candidates = this.byLength[end - start];
    if (candidates !== undefined) for (const f of candidates) if (s.is(start, end, f.name)) return f;
    throw UNSCANNABLE;
  }

  private event(s: JsonScanner): Incoming<E> {
    s.expect(0x7b);
    const e = this.make();
    // Fields seen: a repeated key (JSON.parse keeps the last one) is left to the general path.
    let seen = 0;
    if (s.peek() !== 0x7d)
      do {
        s.peek();
        const start = s.at + 1;
        const f = this.field(s, start, s.string());
        if ((seen & f.bit) !== 0) throw UNSCANNABLE;
        seen |= f.bit;
        s.expect(0x3a);
        s.peek();
        this.set(e, f.index, value(s, f.rule));
      } while (s.more(0x7d));
    else s.at++;
    if ((seen & this.required) !== this.required) throw UNSCANNABLE;
    return e as Incoming<E>;
  }

  scan(body: Buffer): Array<Incoming<E>> | undefined {
    if (!isUtf8(body)) return undefined;
    const s = new JsonScanner(body);
    try {
      s.expect(0x7b);
      s.peek();
      const start = s.at + 1;
      if (!s.is(start, s.string(), EVENTS)) throw UNSCANNABLE;
      s.expect(0x3a);
      s.expect(0x5b);
      const events: Array<Incoming<E>> = [];
      if (s.peek() === 0x5d) throw UNSCANNABLE; // at least one event (minEvents ≥ 1)
      do {
        if (events.length === this.maxEvents) throw UNSCANNABLE;
        events.push(this.event(s));
      } while (s.more(0x5d));
      if (events.length < this.minEvents) throw UNSCANNABLE;
      s.expect(0x7d);
      s.end();
      return events;
    } catch (err) {
      if (err === UNSCANNABLE) return undefined;
      throw err;
    }
  }
}
