import { chTenant } from '../../lib/metrics/literal.js';
import type { HealthStatus } from '../../schemas/health.js';
import { DEFAULT_HISTORY_DAYS, MAX_HISTORY_DAYS, type HistoryGranularity } from '../../schemas/core/health.js';
import { isUuid } from '../../lib/ids.js';
import type { ClickHouseReader } from '../clickhouse.js';
import { invalid, type FieldError } from '../../lib/problem.js';

const DAY_MS = 86_400_000;
const DATE_RE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME_RE = /^(\d{4}-\d{2}-\d{2})[Tt]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?([Zz]|[+-]\d{2}:?\d{2})?$/;

const isRealDate = (date: string): boolean => {
  const m = DATE_RE.exec(date);
  if (!m || m[1] < '1970') return false;
  return new Date(Date.UTC(+m[1], +m[2] - 1, +m[3])).toISOString().slice(0, 10) === date;
};

/** An ISO 8601 date or date-time as its UTC date (YYYY-MM-DD); a date-time without offset is UTC. */
export function utcDate(s: string): string | null {
  if (DATE_RE.test(s)) return isRealDate(s) ? s : null;
  const m = DATE_TIME_RE.exec(s);
  if (!m || !isRealDate(m[1])) return null;
  const ms = Date.parse(m[2] ? s : `${s}Z`);
  if (!Number.isFinite(ms)) return null;
  const date = new Date(ms).toISOString().slice(0, 10);
  return isRealDate(date) ? date : null;
}

const EPOCH_DATE = '1970-01-01';
const maxDate = (a: string, b: string): string => (a > b ? a : b);

const addDays = (date: string, n: number): string =>
  new Date(Date.parse(`${date}T00:00:00Z`) + n * DAY_MS).toISOString().slice(0, 10);

/**
 * The history range, both ends included: `to` defaults to today, `from` to 89 days before `to`
 * (not before 1970-01-01).
 * Throws 400 naming the parameter: an unparsable date, `from` after `to`, more than 731 days.
 */
export function historyRange(q: { from?: string; to?: string }, today: string): { from: string; to: string } {
  const errors: FieldError[] = [];
  const parse = (name: 'from' | 'to', v: string | undefined) => {
    if (v === undefined) return undefined;
    const date = utcDate(v);
    if (date === null)
      errors.push({
        field: name,
        code: 'invalid_date',
        message: `${name} must be an ISO 8601 date (YYYY-MM-DD) or date-time`,
      });
    return date;
  };
  const from = parse('from', q.from);
  const to = parse('to', q.to);
  if (errors.length) throw invalid(errors, 'The query string is invalid; see errors.');
  const end = to ?? today;
  // A default never reaches before the first date both stores hold: the range then starts there.
  const start = from ?? maxDate(addDays(end, -(DEFAULT_HISTORY_DAYS - 1)), EPOCH_DATE);
  if (start > end)
    throw invalid([{ field: 'from', code: 'invalid_range', message: `from (${start}) must not be after to (${end})` }]);
  const days = (Date.parse(`${end}T00:00:00Z`) - Date.parse(`${start}T00:00:00Z`)) / DAY_MS + 1;
  if (days > MAX_HISTORY_DAYS)
    throw invalid([
      {
        field: 'from',
        code: 'range_too_long',
        message: `the range covers ${days} days; at most ${MAX_HISTORY_DAYS} (two years) are kept and served`,
      },
    ]);
  return { from: start, to: end };
}

export interface HistoryPoint {
  date: string;
  score: number;
  status: HealthStatus;
}

/** A point of csp.health_history with the time (Unix seconds) of the calculation that gave it. */
export interface StoredPoint extends HistoryPoint {
  at: number;
}

/** The Monday of a date's ISO week, as ClickHouse's toMonday. */
export const mondayOf = (date: string): string => {
  const day = new Date(`${date}T00:00:00Z`).getUTCDay();
  return addDays(date, -((day + 6) % 7));
};

/**
 * The history as served: the stored points with the customer's current score (PostgreSQL,
 * customer_health_current) as the point of its day or week when it is at least as recent as the
 * stored one. The scorer commits the score before it answers, but writes its history point after
 * (on demand: up to a second later, gathered into one ClickHouse insert; scheduled: after the whole
 * workspace), so a history read right after a recalculation would otherwise miss it.
 */
export function withCurrent(
  stored: StoredPoint[],
  current: { score: number; status: HealthStatus; calculated_at: Date } | null,
  range: { from: string; to: string },
  granularity: HistoryGranularity,
): HistoryPoint[] {
  const out = stored.map(({ date, score, status }) => ({ date, score, status }));
  if (!current) return out;
  const day = current.calculated_at.toISOString().slice(0, 10);
  if (day < range.from || day > range.to) return out;
  const date = granularity === 'weekly' ? mondayOf(day) : day;
  const at = Math.floor(current.calculated_at.getTime() / 1000);
  const point = { date, score: current.score, status: current.status };
  const i = stored.findIndex((p) => p.date >= date);
  if (i < 0) out.push(point);
  else if (stored[i].date !== date) out.splice(i, 0, point);
  else if (stored[i].at <= at) out[i] = point;
  return out;
}

/**
 * Reads csp.health_history. The table keeps one row per calculation until merges replace a day's
 * rows by its latest; argMax over calculated_at gives that same answer before the merge, without
 * FINAL. Every value placed in the SQL is a validated UUID or date.
 */
export class HealthHistory {
  constructor(private readonly ch: ClickHouseReader) {}

  async points(
    tenantId: string,
    customerId: string,
    range: { from: string; to: string },
    granularity: HistoryGranularity,
  ): Promise<StoredPoint[]> {
    if (!isUuid(tenantId) || !isUuid(customerId) || !isRealDate(range.from) || !isRealDate(range.to))
      throw new Error('unvalidated history filter value');
    const bucket = granularity === 'weekly' ? 'toMonday(day)' : 'day';
    // Aliases differ from column names: ClickHouse resolves aliases inside aggregates too.
    const query = `SELECT ${bucket} AS d, argMax(score, calculated_at) AS s, argMax(status, calculated_at) AS st,
        toUnixTimestamp(max(calculated_at)) AS t
      FROM ${this.ch.database}.health_history
      WHERE ${chTenant(tenantId)} AND customer_id = toUUID('${customerId}')
        AND day >= toDate('${range.from}') AND day <= toDate('${range.to}')
      GROUP BY d ORDER BY d`;
    const rows = await this.ch.rows<{ d: string; s: number; st: HealthStatus; t: number }>(
      query,
      'The health history store (the current score, GET …/health, does not depend on it)',
    );
    return rows.map((r) => ({ date: r.d, score: Number(r.s), status: r.st, at: Number(r.t) }));
  }
}
