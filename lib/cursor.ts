import { isDateTime } from '../schemas/formats.js';
import { isUuid } from './ids.js';
import { ApiError } from './problem.js';

/**
 * Keyset pagination cursors: the position of the last row shown, opaque to clients (a base64url
 * JSON array). A cursor comes back from the client, and its values are placed in SQL (PostgreSQL
 * casts, ClickHouse literals), so each position is decoded only when every value has the type and
 * range its query needs; anything else is 400 invalid_cursor, never a failed query (500).
 */

const encodeTuple = (values: unknown[]): string => Buffer.from(JSON.stringify(values)).toString('base64url');

/** The JSON array a cursor holds with `length` items, or undefined. */
function decodeTuple(cursor: string, length: number): unknown[] | undefined {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    return Array.isArray(v) && v.length === length ? v : undefined;
  } catch {
    return undefined;
  }
}

const invalidCursor = () =>
  new ApiError('invalid_cursor', 'The cursor is not valid; pass next_cursor from a previous page unchanged.', [
    { field: 'cursor', code: 'invalid_cursor', message: 'cursor was not produced by this API' },
  ]);

// ---- PostgreSQL lists: (created_at, id) ----

/** Keyset position `(created_at, id)` of a PostgreSQL list. */
export interface Position {
  t: string;
  id: string;
}

export const encodeCursor = (p: Position): string => encodeTuple([p.t, p.id]);

/** timestamptz as PostgreSQL prints it (`2026-05-01 12:00:00.123456+00`), the form a cursor carries. */
const PG_TIMESTAMPTZ = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)([+-]\d{2})(?::(\d{2}))?$/;

/** True when `t` is a timestamp PostgreSQL printed and takes back: checked as the date-time format is. */
function isPgTimestamp(t: string): boolean {
  const m = PG_TIMESTAMPTZ.exec(t);
  return m !== null && isDateTime(`${m[1]}T${m[2]}${m[3]}:${m[4] ?? '00'}`);
}

/** The cursor's position, checked to the types its SQL casts need (null: the first page), or 400 invalid_cursor. */
export function decodeCursor(cursor: string | undefined): Position | null {
  if (cursor === undefined) return null;
  const v = decodeTuple(cursor, 2);
  if (v && typeof v[0] === 'string' && typeof v[1] === 'string' && isPgTimestamp(v[0]) && isUuid(v[1]))
    return { t: v[0], id: v[1] };
  throw invalidCursor();
}

/** Rows fetched with limit+1: the extra row says there is a next page. */
export function page<R extends { cursor_ts: string; id: string }, T>(
  rows: R[],
  limit: number,
  map: (r: R) => T,
): { data: T[]; next_cursor: string | null; has_more: boolean } {
  const has_more = rows.length > limit;
  const shown = has_more ? rows.slice(0, limit) : rows;
  const last = shown[shown.length - 1];
  return {
    data: shown.map(map),
    next_cursor: has_more && last ? encodeCursor({ t: last.cursor_ts, id: last.id }) : null,
    has_more,
  };
}

// ---- ClickHouse events: (ts, ts_ms, event_id) ----

/** Keyset position of an event in ClickHouse: seconds, milliseconds, event id. */
export interface EventPosition {
  ts: number;
  ms: number;
  id: string;
}

/** Largest DateTime ClickHouse holds (UInt32 seconds): a cursor beyond it would fail the query. */
export const MAX_DATETIME_S = 0xffffffff;

export const encodeEventCursor = (p: EventPosition): string => encodeTuple([p.ts, p.ms, p.id]);

/**
 * The event position, or 400 invalid_cursor. Stored ids are lower case: an upper-case one would
 * compare wrongly in the keyset condition, so it is refused too.
 */
export function decodeEventCursor(cursor: string): EventPosition {
  const v = decodeTuple(cursor, 3);
  if (
    v &&
    Number.isInteger(v[0]) &&
    (v[0] as number) >= 0 &&
    (v[0] as number) <= MAX_DATETIME_S &&
    Number.isInteger(v[1]) &&
    (v[1] as number) >= 0 &&
    (v[1] as number) < 1000 &&
    typeof v[2] === 'string' &&
    isUuid(v[2]) &&
    v[2] === v[2].toLowerCase()
  ) {
    return { ts: v[0] as number, ms: v[1] as number, id: v[2] };
  }
  throw invalidCursor();
}

// ---- Lists ordered by a name (the event catalog) ----

/** Longest name a name cursor carries: longer than any stored name, short enough for any query. */
const MAX_NAME_CURSOR = 1024;

export const encodeNameCursor = (name: string): string => encodeTuple([name]);

/** The name after which the next page starts (null: the first page), or 400 invalid_cursor. */
export function decodeNameCursor(cursor: string | undefined): string | null {
  if (cursor === undefined) return null;
  const v = decodeTuple(cursor, 1);
  // A NUL cannot reach PostgreSQL text: refused here instead of failing the query.
  if (v && typeof v[0] === 'string' && v[0].length <= MAX_NAME_CURSOR && !v[0].includes('\0')) return v[0];
  throw invalidCursor();
}
