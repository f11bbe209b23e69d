import type { MetricWindow } from '../../schemas/core/metrics.js';

const DAY_MS = 86_400_000;

export interface Period {
  from: Date;
  to: Date;
}

/**
 * The period a window covers at `now`, both ends included, UTC.
 * rolling N: [now − N×24 h, now]. calendar: from the start of the current day, ISO week (Monday),
 * month or quarter, to now.
 */
export function windowPeriod(w: MetricWindow, now: Date): Period {
  const t = now.getTime();
  if (w.type === 'rolling') return { from: new Date(t - (w.days ?? 1) * DAY_MS), to: new Date(t) };
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  const day = Date.UTC(y, m, now.getUTCDate());
  let from: number;
  switch (w.unit) {
    case 'week':
      // getUTCDay: Sunday 0 … Saturday 6; ISO weeks start on Monday.
      from = day - ((now.getUTCDay() + 6) % 7) * DAY_MS;
      break;
    case 'month':
      from = Date.UTC(y, m, 1);
      break;
    case 'quarter':
      from = Date.UTC(y, m - (m % 3), 1);
      break;
    default:
      from = day;
  }
  return { from: new Date(from), to: new Date(t) };
}

/** True when the period starts at a UTC midnight, so whole-day rollups cover it exactly. */
export const startsAtMidnight = (p: Period): boolean => p.from.getTime() % DAY_MS === 0;
