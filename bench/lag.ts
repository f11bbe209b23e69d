import { Histogram, type LatencySummary } from './histogram.js';

/**
 * Delay until accepted events are queryable. `accepted` is the load generator's cumulative count
 * of acknowledged events over time; `landed` is the count of the same events in ClickHouse over
 * time (both [epoch ms, count], counts from 0). The k-th event was accepted when `accepted` first
 * reached k and is counted as queryable when `landed` first reached k; the histogram holds that
 * difference once per event.
 */
export function lagSummary(
  accepted: Array<[number, number]>,
  landed: Array<[number, number]>,
): LatencySummary & { unmatchedEvents: number } {
  const h = new Histogram();
  let j = 0;
  let prev = 0;
  let unmatched = 0;
  for (const [t, k] of accepted) {
    if (k <= prev) continue;
    while (j < landed.length && landed[j][1] < k) j++;
    if (j === landed.length) {
      unmatched += k - prev;
    } else {
      h.recordN(Math.max(0, landed[j][0] - t) * 1000, k - prev);
    }
    prev = k;
  }
  return { ...h.summary(), unmatchedEvents: unmatched };
}
