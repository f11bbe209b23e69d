import { type ChType, SINK_TABLES, type SinkTable } from '../schemas/rows.js';
import type { BufferPool } from './buffer-pool.js';
import { uuidv7Into } from './ids.js';

/**
 * ClickHouse's RowBinary format for the sink tables: the rows of one JetStream message, columns
 * in the order of the row contract (schemas/rows.ts), no names, no escaping, so the writer
 * concatenates messages into one insert body as it does JSONEachRow payloads. A message says its
 * format in the `Cs-Format` header (absent: JSONEachRow rows separated by commas, the first
 * format); the value names the column list too, so a later list gets a new value and messages of
 * the previous one still in the stream after an upgrade are inserted with their own list.
 *
 * Encodings (checked against ClickHouse 18.16 and current releases):
 * - String, LowCardinality(String): LEB128 length, then the UTF-8 bytes;
 * - UUID: the 16 bytes as two little-endian UInt64, the high half (the first 8 bytes of the text
 *   form) first;
 * - DateTime: UInt32 little-endian (unix seconds); UInt16 little-endian;
 * - Array(String): LEB128 count, then each string;
 * - Nullable(Float64): one byte 1 for NULL (nothing follows), else 0 and the float64 little-endian.
 */

export const FORMAT_HEADER = 'Cs-Format';
/** The first RowBinary list: every csp.events column up to user_external_id, raw properties filled. */
export const ROW_BINARY_V1 = 'RowBinary;v=1';
/** v1 plus prop_kinds, `properties` empty but where the kinds cannot rebuild it (lib/event-properties.ts). */
export const ROW_BINARY_V2 = 'RowBinary;v=2';
/** What the producers (ingest, the outbox relay) write. */
export const ROW_FORMAT = ROW_BINARY_V2;
export type RowBinaryFormat = typeof ROW_BINARY_V1 | typeof ROW_BINARY_V2;
export type RowFormat = 'JSONEachRow' | RowBinaryFormat;

const eventColumns = Object.entries(SINK_TABLES.events);
const billingColumns = Object.entries(SINK_TABLES.billing_events);

/** The columns a RowBinary payload holds per format and table, in their order. */
const COLUMNS: Record<RowBinaryFormat, Record<SinkTable, Array<[string, ChType]>>> = {
  [ROW_BINARY_V1]: {
    events: eventColumns.filter(([c]) => c !== 'prop_kinds'),
    billing_events: billingColumns,
  },
  [ROW_BINARY_V2]: { events: eventColumns, billing_events: billingColumns },
};

/** The format a message header names; undefined for a value this build does not know. */
export function formatOf(header: string | undefined): RowFormat | undefined {
  if (header === undefined || header === '') return 'JSONEachRow';
  return header === ROW_BINARY_V2 || header === ROW_BINARY_V1 ? header : undefined;
}

/** The columns producers write today. */
export const EVENT_ROW_COLUMNS = COLUMNS[ROW_FORMAT].events;
export const BILLING_ROW_COLUMNS = COLUMNS[ROW_FORMAT].billing_events;

export function columnsOf(format: RowBinaryFormat, table: SinkTable): Array<[string, ChType]> {
  return COLUMNS[format][table];
}

/** The column list of an INSERT of such rows: `(tenant_id, customer_id, …)`. */
export function insertColumns(format: RowBinaryFormat, table: SinkTable): string {
  return `(${COLUMNS[format][table].map(([c]) => c).join(', ')})`;
}

const EMPTY = Buffer.alloc(0);
/** Bytes as 32-bit words at any offset (the writer's short copies, the JSON scanner's string skim). */
export const wordsOf = (b: Uint8Array): DataView<ArrayBufferLike> => new DataView(b.buffer, b.byteOffset, b.byteLength);
const EMPTY_WORDS = wordsOf(EMPTY);
const V7 = new Uint8Array(16);
const V7_WORDS = wordsOf(V7);
/** A hex digit's value (either case), -1 for anything else below 128. */
export const HEX_VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < 10; i++) HEX_VALUE[48 + i] = i;
for (let i = 0; i < 6; i++) {
  HEX_VALUE[97 + i] = 10 + i;
  HEX_VALUE[65 + i] = 10 + i;
}
/** Byte order of the 16 UUID bytes on the wire: each 8-byte half reversed. */
const UUID_ORDER = [7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8];
/** Offsets of the 32 hex digits in the 36-character text form. */
const HEX_AT: number[] = [];
for (let i = 0; i < 36; i++) if (i !== 8 && i !== 13 && i !== 18 && i !== 23) HEX_AT.push(i);

/** A UUID in the canonical 8-4-4-4-12 form (either case) as its 16 wire bytes, into `out` at `at`. */
export function encodeUuid(text: string, out: Uint8Array, at: number): void {
  for (let i = 0; i < 16; i++)
    out[at + UUID_ORDER[i]] =
      (HEX_VALUE[text.charCodeAt(HEX_AT[2 * i])] << 4) | HEX_VALUE[text.charCodeAt(HEX_AT[2 * i + 1])];
}

/** The 16 wire bytes of a UUID in the canonical form, to copy into many rows (`raw16`). */
export function uuidWire(text: string): Uint8Array {
  const out = new Uint8Array(16);
  encodeUuid(text, out, 0);
  return out;
}

/**
 * Rows written into one growing buffer, value by value: the ingest tier writes a request's
 * accepted events here. Strings are encoded straight into it (UTF-8); a short one's one-byte
 * length is set after its bytes are written, a longer one is measured first.
 */
export class RowBinaryWriter {
  private buf: Buffer;
  /**
   * `buf` as 32-bit words at any offset: short copies move four bytes a step (`bytes`, `uuidv7`),
   * 2 % less of surface A's per-event work each than byte by byte (bench/builds.ts).
   */
  private view: DataView<ArrayBufferLike>;
  /** The last source of `bytes` (a request's body) and its words. */
  private source: Uint8Array = EMPTY;
  private sourceView = EMPTY_WORDS;
  private at = 0;

  constructor(
    private readonly initialBytes = 64 * 1024,
    /** Where the buffers come from (lib/buffer-pool.ts); whoever takes the rows gives them back. */
    private readonly pool?: BufferPool,
  ) {
    this.buf = this.alloc(initialBytes);
    this.view = wordsOf(this.buf);
  }

  private alloc(bytes: number): Buffer {
    return this.pool ? this.pool.take(bytes) : Buffer.allocUnsafe(bytes);
  }

  get length(): number {
    return this.at;
  }

  /** What was written (not copied: the writer starts a new buffer for what comes next). */
  take(): Buffer {
    const out = this.buf.subarray(0, this.at);
    this.buf = EMPTY;
    this.view = EMPTY_WORDS;
    this.at = 0;
    return out;
  }

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const next = this.alloc(Math.max(this.buf.length * 2, this.at + n, this.initialBytes));
    this.buf.copy(next, 0, 0, this.at);
    this.pool?.give(this.buf);
    this.buf = next;
    this.view = wordsOf(next);
  }

  private varint(n: number): void {
    this.room(10);
    while (n >= 0x80) {
      this.buf[this.at++] = (n & 0x7f) | 0x80;
      n = Math.floor(n / 128);
    }
    this.buf[this.at++] = n;
  }

  /** The canonical 8-4-4-4-12 form (either case); anything else must not reach here. */
  uuid(text: string): void {
    this.room(16);
    encodeUuid(text, this.buf, this.at);
    this.at += 16;
  }

  /** A fresh UUIDv7 (lib/ids.ts), written without making its text. */
  uuidv7(now: number): void {
    this.room(16);
    uuidv7Into(V7, 0, now);
    // Each half reversed: its big-endian words written little-endian, in the other order.
    const d = this.view;
    const at = this.at;
    d.setInt32(at, V7_WORDS.getInt32(4), true);
    d.setInt32(at + 4, V7_WORDS.getInt32(0), true);
    d.setInt32(at + 8, V7_WORDS.getInt32(12), true);
    d.setInt32(at + 12, V7_WORDS.getInt32(8), true);
    this.at += 16;
  }

  string(s: string): void {
    // One byte of length covers up to 127 bytes; longer strings are measured first.
    if (s.length <= 42) {
      this.room(1 + 3 * s.length);
      const b = this.buf;
      const at = this.at;
      // Most strings here are short ASCII (names, ids, keys): copied by hand, which costs less
      // than a call into the encoder; the first other character hands the string to it.
      let i = 0;
      for (; i < s.length; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        b[at + 1 + i] = c;
      }
      const n = i === s.length ? i : b.write(s, at + 1, 'utf8');
      b[at] = n;
      this.at = at + 1 + n;
      return;
    }
    const n = Buffer.byteLength(s);
    this.varint(n);
    this.room(n);
    this.at += this.buf.write(s, this.at, n, 'utf8');
  }

  /** An Array's element count (LEB128). */
  count(n: number): void {
    this.varint(n);
  }

  /** One byte as it is (a kind character of `prop_kinds`, already counted). */
  byte(c: number): void {
    this.room(1);
    this.buf[this.at++] = c;
  }

  /** A String whose UTF-8 bytes are `src[start, end)` (a value inside a request body). */
  bytes(src: Buffer, start: number, end: number): void {
    const n = end - start;
    this.varint(n);
    this.room(n);
    const b = this.buf;
    // Spans up to 256 bytes by hand, four at a time: a call into the native copy costs more
    // (64, 256 and 1024 tried: 256 took the least, bench/builds.ts).
    if (n <= 256) {
      if (src !== this.source) {
        this.source = src;
        this.sourceView = wordsOf(src);
      }
      const d = this.view;
      const v = this.sourceView;
      let at = this.at;
      let i = start;
      for (; i + 4 <= end; i += 4, at += 4) d.setInt32(at, v.getInt32(i));
      for (; i < end; i++) b[at++] = src[i];
    } else src.copy(b, this.at, start, end);
    this.at += n;
  }

  /**
   * A String from JSON string content `src[start, end)` whose escapes are all two-byte ones
   * (`\n`, `\"`…): `unescaped[c]` is the byte `\c` stands for.
   */
  unescaped(src: Uint8Array, start: number, end: number, unescaped: Uint8Array): void {
    let n = end - start;
    for (let i = start; i < end; i++)
      if (src[i] === 0x5c) {
        n--;
        i++;
      }
    this.varint(n);
    this.room(n);
    const b = this.buf;
    let at = this.at;
    for (let i = start; i < end; i++) {
      const c = src[i];
      b[at++] = c === 0x5c ? unescaped[src[++i]] : c;
    }
    this.at = at;
  }

  /** 16 bytes already in wire order at `src[from]` (a UUID encoded once, copied into every row). */
  raw16(src: Uint8Array, from = 0): void {
    this.room(16);
    const b = this.buf;
    const at = this.at;
    for (let i = 0; i < 16; i++) b[at + i] = src[from + i];
    this.at += 16;
  }

  strings(list: readonly string[]): void {
    this.varint(list.length);
    for (const s of list) this.string(s);
  }

  uint16(n: number): void {
    this.room(2);
    this.buf.writeUInt16LE(n, this.at);
    this.at += 2;
  }

  /** Throws a RangeError for a time outside DateTime's range (fitsDateTime). */
  dateTime(unixSeconds: number): void {
    this.room(4);
    this.buf.writeUInt32LE(unixSeconds, this.at);
    this.at += 4;
  }

  /** A whole row given as an object of the row contract (JSONEachRow's values), column by column. */
  row(columns: Array<[string, ChType]>, values: Record<string, unknown>): void {
    for (const [col, type] of columns) {
      const v = values[col];
      switch (type) {
        case 'UUID':
          this.uuid(v as string);
          break;
        case 'String':
        case 'LowCardinality(String)':
          this.string(v as string);
          break;
        case 'DateTime':
          this.dateTime(v as number);
          break;
        case 'UInt16':
          this.uint16(v as number);
          break;
        case 'Array(String)':
          this.strings(v as string[]);
          break;
        case 'Nullable(Float64)':
          this.nullableFloat64((v ?? null) as number | null);
          break;
      }
    }
  }

  nullableFloat64(v: number | null): void {
    this.room(9);
    if (v === null) {
      this.buf[this.at++] = 1;
      return;
    }
    this.buf[this.at++] = 0;
    this.buf.writeDoubleLE(v, this.at);
    this.at += 8;
  }
}

const HEX: string[] = [];
for (let i = 0; i < 256; i++) HEX.push((i + 0x100).toString(16).slice(1));

/** A UUID read back from its 16 wire bytes at `at`, in the canonical lowercase text form. */
export function readUuid(b: Uint8Array, at: number): string {
  let s = '';
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) s += '-';
    s += HEX[b[at + UUID_ORDER[i]]];
  }
  return s;
}

export class RowBinaryError extends Error {
  override name = 'RowBinaryError';
}

/** One row of a payload: its byte range and the values the writer needs of it. */
export interface RowSpan {
  start: number;
  end: number;
  eventId: string;
}

/** Reads a payload value by value, refusing to run past its end (RowBinaryError names where). */
class Cursor {
  at = 0;
  row = 0;
  readonly b: Buffer;

  constructor(payload: Uint8Array) {
    this.b = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  }

  get done(): boolean {
    return this.at >= this.b.length;
  }

  /** Where `n` bytes of `col` start; the cursor moves past them. */
  take(n: number, col: string): number {
    if (this.at + n > this.b.length)
      throw new RowBinaryError(`row ${this.row}: column ${col} runs past the end of the payload`);
    const at = this.at;
    this.at += n;
    return at;
  }

  varint(col: string): number {
    let n = 0;
    let mul = 1;
    for (let i = 0; i < 9; i++) {
      const x = this.b[this.take(1, col)];
      n += (x & 0x7f) * mul;
      if (x < 0x80) return n;
      mul *= 128;
    }
    throw new RowBinaryError(`row ${this.row}: column ${col} has a malformed length`);
  }

  /** A String's byte range [start, end). */
  string(col: string): [number, number] {
    const n = this.varint(col);
    const at = this.take(n, col);
    return [at, at + n];
  }
}

/**
 * Walks a payload row by row without decoding strings: the byte range and event_id of each row,
 * for the rare paths that need them (a partly stored message, a payload ClickHouse refused).
 * Throws RowBinaryError where the bytes cannot be rows of these columns.
 */
export function rowSpans(payload: Uint8Array, columns: Array<[string, ChType]>): RowSpan[] {
  const spans: RowSpan[] = [];
  const c = new Cursor(payload);
  for (; !c.done; c.row++) {
    const start = c.at;
    let eventId = '';
    for (const [col, type] of columns) {
      const at = skip(c, col, type);
      if (col === 'event_id') eventId = readUuid(c.b, at);
    }
    spans.push({ start, end: c.at, eventId });
  }
  return spans;
}

/** Moves the cursor past one value of `type`; where the value starts. */
function skip(c: Cursor, col: string, type: ChType): number {
  const at = c.at;
  switch (type) {
    case 'UUID':
      c.take(16, col);
      break;
    case 'String':
    case 'LowCardinality(String)':
      c.string(col);
      break;
    case 'DateTime':
      c.take(4, col);
      break;
    case 'UInt16':
      c.take(2, col);
      break;
    case 'Array(String)':
      for (let n = c.varint(col); n > 0; n--) c.string(col);
      break;
    case 'Nullable(Float64)':
      if (c.b[c.take(1, col)] === 0) c.take(8, col);
      break;
  }
  return at;
}

/** UUIDs to look rows up by without building a string per row: see rowsWithout. */
export interface UuidSet {
  /** The first four wire bytes of each (a little-endian Int32), checked first: most rows miss here. */
  head: Set<number>;
  /** The 16 wire bytes of each as latin1 text. */
  keys: Set<string>;
}

export function uuidSet(ids: Iterable<string>): UuidSet {
  const out: UuidSet = { head: new Set(), keys: new Set() };
  for (const id of ids) {
    const b = Buffer.from(uuidWire(id));
    out.head.add(b.readInt32LE(0));
    out.keys.add(b.toString('latin1'));
  }
  return out;
}

/** How rowsWithout steps over a column: its width when fixed, else one of these. */
const STRING = -1;
const STRINGS = -2;
const NULLABLE_FLOAT = -3;
const WIDTH: Record<ChType, number> = {
  UUID: 16,
  String: STRING,
  'LowCardinality(String)': STRING,
  DateTime: 4,
  UInt16: 2,
  'Array(String)': STRINGS,
  'Nullable(Float64)': NULLABLE_FLOAT,
};
const widths = new WeakMap<Array<[string, ChType]>, Int8Array>();

/**
 * The rows of a payload whose UUID `column` holds none of `drop`: the byte ranges to keep (adjacent
 * rows merged into one range), how many rows they hold and how many were left out. For the
 * writer's drop of erased customers' rows, which reads every row of a workspace that has some: a
 * string is built only for a row whose value's first four bytes match. Throws RowBinaryError where
 * the bytes cannot be rows of these columns.
 */
export function rowsWithout(
  payload: Uint8Array,
  columns: Array<[string, ChType]>,
  column: string,
  drop: UuidSet,
): KeptRows {
  const target = columns.findIndex(([c]) => c === column);
  if (target < 0 || columns[target][1] !== 'UUID') throw new Error(`no UUID column ${column}`);
  return filterRows(payload, columns, target, (b, _row, value) => {
    const head = b[value] | (b[value + 1] << 8) | (b[value + 2] << 16) | (b[value + 3] << 24);
    return !(drop.head.has(head) && drop.keys.has(b.toString('latin1', value, value + 16)));
  });
}

/** What filterRows keeps of a payload: byte ranges (adjacent rows merged), rows kept, rows left out. */
export interface KeptRows {
  ranges: Array<[number, number]>;
  kept: number;
  dropped: number;
}

/**
 * Walks a payload row by row and keeps the rows `keep` accepts. `keep` gets the payload, where the
 * row starts, and where the value of column `target` starts and ends (a String's text, without its
 * length). A loop over the column widths with lengths read inline: rowSpans's walk, a call per
 * value, costs about four times as much. Throws RowBinaryError where the bytes cannot be rows of
 * these columns.
 */
export function filterRows(
  payload: Uint8Array,
  columns: Array<[string, ChType]>,
  target: number,
  keep: (b: Buffer, row: number, value: number, valueEnd: number) => boolean,
): KeptRows {
  let width = widths.get(columns);
  if (!width) widths.set(columns, (width = Int8Array.from(columns, ([, type]) => WIDTH[type])));
  const b = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  const end = b.length;
  const ranges: Array<[number, number]> = [];
  let kept = 0;
  let dropped = 0;
  let at = 0;
  // Past the end, b[at] is undefined, which ends a length; the row's end is checked once it is read.
  while (at < end) {
    const start = at;
    let value = 0;
    let valueEnd = 0;
    for (let i = 0; i < width.length; i++) {
      const w = width[i];
      if (i === target) value = at;
      if (w > 0) at += w;
      else if (w === NULLABLE_FLOAT) at += b[at] === 0 ? 9 : 1;
      else {
        let x = b[at++];
        let n = x & 0x7f;
        for (let shift = 7; x >= 0x80; shift += 7) {
          x = b[at++];
          n += (x & 0x7f) * 2 ** shift;
        }
        if (w === STRING) {
          if (i === target) value = at;
          at += n;
        } else
          for (; n > 0; n--) {
            let y = b[at++];
            let len = y & 0x7f;
            for (let shift = 7; y >= 0x80; shift += 7) {
              y = b[at++];
              len += (y & 0x7f) * 2 ** shift;
            }
            at += len;
          }
      }
      if (i === target) valueEnd = at;
    }
    if (!(at <= end)) throw new RowBinaryError(`row ${kept + dropped} runs past the end of the payload`);
    if (!keep(b, start, value, valueEnd)) {
      dropped++;
      continue;
    }
    kept++;
    const last = ranges.at(-1);
    if (last && last[1] === start) last[1] = at;
    else ranges.push([start, at]);
  }
  return { ranges, kept, dropped };
}

/**
 * The rows of a payload as objects of the row contract (the values JSONEachRow would carry): for
 * inspecting a message (tests, a dead letter), never on the normal path. Throws RowBinaryError as
 * rowSpans does.
 */
export function decodeRows(payload: Uint8Array, columns: Array<[string, ChType]>): Array<Record<string, unknown>> {
  const rows: Array<Record<string, unknown>> = [];
  const c = new Cursor(payload);
  const str = (col: string) => c.b.toString('utf8', ...c.string(col));
  for (; !c.done; c.row++) {
    const row: Record<string, unknown> = {};
    for (const [col, type] of columns) {
      switch (type) {
        case 'UUID':
          row[col] = readUuid(c.b, c.take(16, col));
          break;
        case 'String':
        case 'LowCardinality(String)':
          row[col] = str(col);
          break;
        case 'DateTime':
          row[col] = c.b.readUInt32LE(c.take(4, col));
          break;
        case 'UInt16':
          row[col] = c.b.readUInt16LE(c.take(2, col));
          break;
        case 'Array(String)':
          row[col] = Array.from({ length: c.varint(col) }, () => str(col));
          break;
        case 'Nullable(Float64)':
          row[col] = c.b[c.take(1, col)] === 0 ? c.b.readDoubleLE(c.take(8, col)) : null;
          break;
      }
    }
    rows.push(row);
  }
  return rows;
}

/** The last instant a ClickHouse DateTime holds (unsigned seconds since 1970): 2106-02-07T06:28:15Z. */
export const DATETIME_MAX_MS = 0xffff_ffff * 1000;

/** Whether csp.events' DateTime columns can hold the instant `ms` (1970-01-01 to 2106-02-07). */
export const fitsDateTime = (ms: number): boolean => ms >= 0 && ms <= DATETIME_MAX_MS;
