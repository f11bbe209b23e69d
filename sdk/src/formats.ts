/**
 * The string formats of the service's validators (schemas/formats.ts and ajv-formats' `email`),
 * written again here because the client may not import them. test/unit/sdk-validate.test.ts
 * holds each one equal to the service's own on generated inputs.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return value.length === 36 && UUID.test(value);
}

const DAYS = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function validDay(year: number, month: number, day: number): boolean {
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return day <= (month === 2 && leap ? 29 : DAYS[month]);
}

/** The two ASCII digits at `i` as a number, or -1 (NaN past the end compares false too). */
function twoDigits(s: string, i: number): number {
  const a = s.charCodeAt(i) - 48;
  const b = s.charCodeAt(i + 1) - 48;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : -1;
}

/**
 * RFC 3339 with a time zone, as PostgreSQL, ClickHouse and Date.parse all read it alike:
 * `YYYY-MM-DD[Tt ]hh:mm:ss(.d{1,9})?([Zz]|[+-]hh:mm)`, at most 40 characters, a real calendar day,
 * hours to 23, minutes and seconds to 59, offsets to 15:59. Read character by character rather
 * than by a regular expression: it runs for every event's timestamp, and a match allocates.
 */
export function isDateTime(value: string): boolean {
  const n = value.length;
  if (n < 20 || n > 40) return false;
  const century = twoDigits(value, 0);
  const yy = twoDigits(value, 2);
  const month = twoDigits(value, 5);
  const day = twoDigits(value, 8);
  const hour = twoDigits(value, 11);
  const minute = twoDigits(value, 14);
  const second = twoDigits(value, 17);
  if (century < 0 || yy < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0) return false;
  if (
    value.charCodeAt(4) !== 0x2d ||
    value.charCodeAt(7) !== 0x2d ||
    value.charCodeAt(13) !== 0x3a ||
    value.charCodeAt(16) !== 0x3a
  )
    return false;
  const sep = value.charCodeAt(10);
  if (sep !== 0x54 && sep !== 0x74 && sep !== 0x20) return false;
  if (hour > 23 || minute > 59 || second > 59 || !validDay(century * 100 + yy, month, day)) return false;
  let i = 19;
  if (value.charCodeAt(i) === 0x2e) {
    const from = ++i;
    while (i < n && value.charCodeAt(i) >= 0x30 && value.charCodeAt(i) <= 0x39) i++;
    if (i === from || i - from > 9) return false;
  }
  const z = value.charCodeAt(i);
  if (z === 0x5a || z === 0x7a) return i + 1 === n;
  if (z !== 0x2b && z !== 0x2d) return false;
  if (i + 6 !== n || value.charCodeAt(i + 3) !== 0x3a) return false;
  const oh = twoDigits(value, i + 1);
  const om = twoDigits(value, i + 4);
  return oh >= 0 && oh <= 15 && om >= 0 && om <= 59;
}

// An e-mail address: dot-separated atoms of the local part, @, dot-separated host labels.
const ATOM = "[a-z0-9!#$%&'*+/=?^_`{|}~-]+";
const LABEL = '[a-z0-9](?:[a-z0-9-]*[a-z0-9])?';
const EMAIL = new RegExp(`^${ATOM}(?:\\.${ATOM})*@(?:${LABEL}\\.)+${LABEL}$`, 'i');

export function isEmail(value: string): boolean {
  return EMAIL.test(value);
}

export const FORMATS: Readonly<Record<string, (value: string) => boolean>> = {
  uuid: isUuid,
  'date-time': isDateTime,
  email: isEmail,
};
