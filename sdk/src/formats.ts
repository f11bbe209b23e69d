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

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

/** RFC 3339 with a time zone, as PostgreSQL, ClickHouse and Date.parse all read it alike. */
export function isDateTime(value: string): boolean {
  if (value.length > 40) return false;
  const m = DATE_TIME.exec(value);
  if (m === null || !validDay(Number(m[1]), Number(m[2]), Number(m[3]))) return false;
  if (Number(m[4]) > 23 || Number(m[5]) > 59 || Number(m[6]) > 59) return false;
  return m[7] === undefined || (Number(m[7]) <= 15 && Number(m[8]) <= 59);
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
