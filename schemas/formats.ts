/**
 * The string formats every validator of the service uses, defined as what the store takes: a
 * value that passes here is one PostgreSQL accepts for its column type, so a bad value is a 400
 * or 422 naming the field and never a failed SQL cast (500). ajv-formats is looser on each:
 * `urn:uuid:` prefixes, year 0000, offsets up to ±23:59, second 60, offsets without a colon.
 * Both Ajv instances (schemas/ajv.ts, schemas/core/validate.ts) and lib/ids.ts use these.
 */

/** Canonical 8-4-4-4-12 hex, the form PostgreSQL prints and every id of ours has. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return value.length === 36 && UUID.test(value);
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DAYS = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

export function validDay(year: number, month: number, day: number): boolean {
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return day <= (month === 2 && leap ? 29 : DAYS[month]);
}

/** YYYY-MM-DD, a real calendar day of the years 0001 to 9999 (PostgreSQL has no year 0). */
export function isDate(value: string): boolean {
  const m = DATE.exec(value);
  return m !== null && validDay(Number(m[1]), Number(m[2]), Number(m[3]));
}

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

/**
 * RFC 3339 date-time with a time zone: hours 00–23, minutes and seconds 00–59 (no leap second:
 * JavaScript's Date cannot parse it), offsets within ±15:59 (PostgreSQL's limit) written with a
 * colon. Whatever passes is parsed alike by Date.parse, PostgreSQL and ClickHouse.
 */
export function isDateTime(value: string): boolean {
  if (value.length > 40) return false;
  const m = DATE_TIME.exec(value);
  if (m === null || !validDay(Number(m[1]), Number(m[2]), Number(m[3]))) return false;
  if (Number(m[4]) > 23 || Number(m[5]) > 59 || Number(m[6]) > 59) return false;
  return m[7] === undefined || (Number(m[7]) <= 15 && Number(m[8]) <= 59);
}

/**
 * A positive amount as numeric(16,2) with CHECK (> 0) stores it: PostgreSQL rounds to cents, so
 * anything below 0.005 becomes 0.00 and breaks the check; 10^14 and more overflow the column.
 */
export function isPositiveCents(value: number): boolean {
  return value >= 0.005 && value < 1e14;
}

/** Ajv format definitions, keyed by format name. */
export const STORE_FORMATS = {
  uuid: { type: 'string', validate: isUuid },
  date: { type: 'string', validate: isDate },
  'date-time': { type: 'string', validate: isDateTime },
  'positive-cents': { type: 'number', validate: isPositiveCents },
} as const;
