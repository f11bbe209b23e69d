import {
  DEFAULT_RENEWAL_MONTHS,
  FORECAST_CATEGORIES,
  MAX_RENEWAL_MONTHS,
  type CohortPeriod,
  type ForecastCategory,
} from '../../schemas/core/analytics.js';
import { invalid, type FieldError } from '../../lib/problem.js';

/**
 * The query parameters of the analytics endpoints turned into what the SQL needs, and the 400s
 * that name the parameter. Pure functions of the query and the clock, so they are unit-tested.
 */

/** A calendar month as a count of months since year 0: comparisons and arithmetic are integer. */
export type MonthIndex = number;

const MONTH_RE = /^(\d{4})-(\d{2})$/;
const DATE_RE = /^(\d{4})-(\d{2})-(\d{2})$/;

export const monthIndex = (d: Date): MonthIndex => d.getUTCFullYear() * 12 + d.getUTCMonth();
export const monthLabel = (m: MonthIndex): string =>
  `${String(Math.floor(m / 12)).padStart(4, '0')}-${String((m % 12) + 1).padStart(2, '0')}`;
/** December 9999: the last month a four-digit year names. */
export const LAST_MONTH: MonthIndex = 9999 * 12 + 11;
/** First day of the month, `YYYY-MM-DD`. */
export const monthStart = (m: MonthIndex): string => `${monthLabel(m)}-01`;

/** `YYYY-MM`, or a real date `YYYY-MM-DD` naming its month; null for anything else. */
export function parseMonth(s: string): MonthIndex | null {
  let m = MONTH_RE.exec(s);
  if (!m) {
    const d = DATE_RE.exec(s);
    if (!d) return null;
    const date = new Date(Date.UTC(+d[1], +d[2] - 1, +d[3]));
    if (Number.isNaN(date.getTime()) || date.toISOString().slice(0, 10) !== s) return null;
    m = d;
  }
  const year = +m[1];
  const month = +m[2];
  if (year < 1970 || month < 1 || month > 12) return null;
  return year * 12 + month - 1;
}

export interface RenewalRange {
  from: MonthIndex;
  to: MonthIndex;
  /** Categories counted, in the canonical order; all three when the query names none. */
  categories: ForecastCategory[];
}

/**
 * `from` defaults to the current month, `to` to 11 months after `from`. 400 naming the parameter:
 * an unparsable month, an unknown category, `from` after `to` (the one given names it when only
 * one is), more than 36 months.
 */
export function renewalRange(q: { from?: string; to?: string; forecast_category?: string }, now: Date): RenewalRange {
  const errors: FieldError[] = [];
  const month = (name: 'from' | 'to'): MonthIndex | undefined => {
    const v = q[name];
    if (v === undefined) return undefined;
    const m = parseMonth(v);
    if (m === null) {
      errors.push({
        field: name,
        code: 'invalid_date',
        message: `${name} must be a month (YYYY-MM) or a date (YYYY-MM-DD)`,
      });
      return undefined;
    }
    return m;
  };
  const from = month('from');
  const to = month('to');
  let categories: ForecastCategory[] = [...FORECAST_CATEGORIES];
  if (q.forecast_category !== undefined) {
    const asked = q.forecast_category.split(',');
    const unknown = asked.filter((c) => !(FORECAST_CATEGORIES as readonly string[]).includes(c));
    if (unknown.length)
      errors.push({
        field: 'forecast_category',
        code: 'invalid_value',
        message:
          `forecast_category must be one or more of ${FORECAST_CATEGORIES.join(', ')}, comma-separated; ` +
          `unknown: ${unknown.map((c) => JSON.stringify(c)).join(', ')}`,
      });
    else categories = FORECAST_CATEGORIES.filter((c) => asked.includes(c));
  }
  if (errors.length) throw invalid(errors, 'The query string is invalid; see errors.');
  const start = from ?? monthIndex(now);
  // A default never runs past the last month a query string can name (9999-12).
  const end = to ?? Math.min(start + DEFAULT_RENEWAL_MONTHS - 1, LAST_MONTH);
  if (start > end)
    throw invalid([
      {
        field: from === undefined ? 'to' : 'from',
        code: 'invalid_range',
        message: `from (${monthLabel(start)}) must not be after to (${monthLabel(end)})`,
      },
    ]);
  if (end - start + 1 > MAX_RENEWAL_MONTHS)
    throw invalid([
      {
        field: to === undefined ? 'from' : 'to',
        code: 'range_too_long',
        message:
          `the range from ${monthLabel(start)} to ${monthLabel(end)} covers ${end - start + 1} months; ` +
          `at most ${MAX_RENEWAL_MONTHS}`,
      },
    ]);
  return { from: start, to: end, categories };
}

export interface CohortWindow {
  period: CohortPeriod;
  /** Months per period: 1 or 3. */
  step: 1 | 3;
  /** Highest offset listed: months_out, or floor(months_out / 3) for quarters. */
  maxOffset: number;
  /** The current period, in periods since year 0. */
  current: number;
  /** The first cohort: `maxOffset` periods before the current one. */
  first: number;
  /** Start of the first cohort's period (UTC), the lower bound of created_at. */
  firstStart: Date;
}

/** months_out and cohort_period are checked by the query schema (1–36, month|quarter). */
export function cohortWindow(period: CohortPeriod, monthsOut: number, now: Date): CohortWindow {
  const step = period === 'quarter' ? 3 : 1;
  const maxOffset = Math.floor(monthsOut / step);
  const current = Math.floor(monthIndex(now) / step);
  const first = current - maxOffset;
  const m = first * step;
  return { period, step, maxOffset, current, first, firstStart: new Date(Date.UTC(Math.floor(m / 12), m % 12, 1)) };
}

/** `YYYY-MM` for a month, `YYYY-Qn` for a quarter (periods since year 0). */
export const cohortLabel = (period: CohortPeriod, p: number): string =>
  period === 'quarter' ? `${String(Math.floor(p / 4)).padStart(4, '0')}-Q${(p % 4) + 1}` : monthLabel(p);
