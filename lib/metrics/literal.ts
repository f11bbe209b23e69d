import { isUuid } from '../ids.js';

/**
 * The only way a value reaches the SQL the metrics compiler writes. ClickHouse 18.16 has no query
 * parameters, so values are encoded as literals here and nowhere else: strings quoted with
 * backslash escapes (ClickHouse's rules: backslash and quote, plus control characters so that a
 * NUL or a newline never reaches the parser raw), numbers only when finite, UUIDs only when they
 * are UUIDs. Identifiers (tables, columns) are constants of the compiler, never user input.
 */

export class UnsafeLiteralError extends Error {
  readonly code = 'unsafe_literal';
}

const ESCAPES: Record<string, string> = {
  '\\': '\\\\',
  "'": "\\'",
  '\0': '\\0',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\b': '\\b',
  '\f': '\\f',
};

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it escapes
const SPECIAL = /[\\'\0\n\r\t\b\f\x01-\x07\x0b\x0e-\x1f\x7f]/g;

const escapeChar = (c: string): string => ESCAPES[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`;

/** A ClickHouse string literal. */
export function str(s: string): string {
  if (typeof s !== 'string') throw new UnsafeLiteralError(`not a string: ${typeof s}`);
  return `'${s.replace(SPECIAL, escapeChar)}'`;
}

/** The smallest normal double: ClickHouse 18.16's parser refuses the literal of any number nearer zero. */
const MIN_NORMAL = 2.2250738585072014e-308;
/** A power of two, so that scaling by it and back is exact. */
const SUBNORMAL_SCALE = 2 ** 600;

/**
 * A ClickHouse numeric literal of any finite number JSON can carry; NaN, ±Infinity and non-numbers
 * are refused. A subnormal number (0 < |n| < 2.2250738585072014e-308, e.g. 5e-324) has no literal
 * ClickHouse 18.16 parses: it is written as the exact product of two normal ones.
 */
export function num(n: number): string {
  if (typeof n !== 'number' || !Number.isFinite(n)) throw new UnsafeLiteralError(`not a finite number: ${String(n)}`);
  if (n !== 0 && Math.abs(n) < MIN_NORMAL) return `(${String(n * SUBNORMAL_SCALE)} * ${String(1 / SUBNORMAL_SCALE)})`;
  // Parenthesised so that a negative number after an operator never reads as `--` (a comment).
  return n < 0 ? `(${String(n)})` : String(n);
}

/** `toUUID('…')` for a checked UUID. */
export function uuid(s: string): string {
  if (!isUuid(s)) throw new UnsafeLiteralError('not a UUID');
  return `toUUID(${str(s.toLowerCase())})`;
}

/** `tenant_id = toUUID('…')`: a workspace's filter (lib/pg.ts inTenant), the id checked. */
export const chTenant = (tenantId: string): string => `tenant_id = ${uuid(tenantId)}`;

/** The filter on the workspaces a process serves; none means every workspace: `1`. */
export const chTenants = (tenantIds: readonly string[]): string =>
  tenantIds.length ? `tenant_id IN (${tenantIds.map(uuid).join(', ')})` : '1';

/** `toDateTime(<unix seconds>)`. */
export function dateTime(d: Date): string {
  const s = Math.floor(d.getTime() / 1000);
  if (!Number.isFinite(s) || s < 0) throw new UnsafeLiteralError('invalid time');
  return `toDateTime(${num(s)})`;
}

/** `toDate('YYYY-MM-DD')` of a time's UTC day. */
export function date(d: Date): string {
  if (!Number.isFinite(d.getTime())) throw new UnsafeLiteralError('invalid date');
  return `toDate(${str(d.toISOString().slice(0, 10))})`;
}
