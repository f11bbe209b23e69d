import { isUuid } from '../../lib/ids.js';
import { isDateTime } from '../../schemas/formats.js';
import { ApiError } from './errors.js';

/** Keyset position `(created_at, id)`, opaque to clients (base64url JSON). */
export interface Position {
  t: string;
  id: string;
}

export const encodeCursor = (p: Position): string => Buffer.from(JSON.stringify([p.t, p.id])).toString('base64url');

/** timestamptz as PostgreSQL prints it (`2026-05-01 12:00:00.123456+00`), the form a cursor carries. */
const PG_TIMESTAMPTZ = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)([+-]\d{2})(?::(\d{2}))?$/;

/** True when `t` is a timestamp PostgreSQL printed and takes back: checked as the date-time format is. */
function isPgTimestamp(t: string): boolean {
  const m = PG_TIMESTAMPTZ.exec(t);
  return m !== null && isDateTime(`${m[1]}T${m[2]}${m[3]}:${m[4] ?? '00'}`);
}

/** The cursor's position, checked to the types its SQL casts need, or 400 invalid_cursor. */
export function decodeCursor(cursor: string | undefined): Position | null {
  if (cursor === undefined) return null;
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (
      Array.isArray(v) &&
      v.length === 2 &&
      typeof v[0] === 'string' &&
      typeof v[1] === 'string' &&
      isPgTimestamp(v[0]) &&
      isUuid(v[1])
    ) {
      return { t: v[0], id: v[1] };
    }
  } catch {
    /* falls through */
  }
  throw new ApiError('invalid_cursor', 'The cursor is not valid; pass next_cursor from a previous page unchanged.', [
    { field: 'cursor', code: 'invalid_cursor', message: 'cursor was not produced by this API' },
  ]);
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
