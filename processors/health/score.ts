import {
  DIMENSION_UNITS,
  HEALTH_DIMENSIONS,
  type DimensionScore,
  type DriverDirection,
  type HealthDimension,
  type HealthModel,
  type HealthStatus,
} from '../../schemas/health.js';

/**
 * The arithmetic of a health score, from per-customer aggregates to the stored breakdown. Pure and
 * columnar (one array per aggregate, index-aligned with the customer ids), so a large workspace
 * is scored in chunks in worker threads with plain data in and out.
 *
 * Curves (each dimension 0–100, integer):
 * - usage_frequency: days per week with an event over the last 28 days; 5 days/week = 100, linear.
 * - breadth: distinct event names over 30 days; 10 = 100, linear.
 * - active_users: DAU / MAU over 30 days; 0.4 = 100, linear; no users = 0.
 * - key_events: 50 + 10 × (positive − negative) over 30 days, clamped; inactive while the model
 *   flags no event.
 * - payment_health: 100 minus the penalties of unresolved negatives of 90 days that came after the
 *   latest payment_succeeded (half penalty past 30 days); no billing events = 100.
 * - metric:<slug> (a driver of the model): the metric's latest materialized value against the
 *   driver's target (driverScore); inactive while the metric has no value for the customer.
 */

/** Penalty per unresolved billing event; one older than 30 days costs half. */
export const PAYMENT_PENALTIES: Record<string, number> = {
  payment_failed: 25,
  invoice_disputed: 30,
  dunning_attempt: 15,
  refund_issued: 10,
};

/** Per-customer aggregates as the rollup queries return them, one array each. */
export interface Aggregates {
  /** Days with at least one event among the last 28. */
  activeDays: Float64Array;
  /** Σ over the last 30 days of the distinct users of each day. */
  userDays: Float64Array;
  /** Distinct users over the last 30 days. */
  mau: Float64Array;
  /** Distinct event names over the last 30 days. */
  names: Float64Array;
  /** Events of the last 30 days whose name the model flags positive / negative. */
  positive: Float64Array;
  negative: Float64Array;
  /** Billing events of the last 90 days (0: the customer has no billing history). */
  billing: Float64Array;
  /** Unresolved negative billing events after the latest payment_succeeded, and their penalty. */
  negatives: Float64Array;
  penalty: Float64Array;
  /** One array per driver of the model, in its order: the latest materialized value, NaN for none. */
  drivers: Float64Array[];
}

export const AGGREGATE_KEYS = [
  'activeDays',
  'userDays',
  'mau',
  'names',
  'positive',
  'negative',
  'billing',
  'negatives',
  'penalty',
] as const satisfies ReadonlyArray<keyof Aggregates>;

export function emptyAggregates(n: number, drivers = 0): Aggregates {
  const a = {} as Aggregates;
  for (const k of AGGREGATE_KEYS) a[k] = new Float64Array(n);
  a.drivers = Array.from({ length: drivers }, () => new Float64Array(n).fill(Number.NaN));
  return a;
}

/** Copies of rows [from, to): a subarray would carry its whole buffer to a worker. */
export function sliceAggregates(a: Aggregates, from: number, to: number): Aggregates {
  const out = {} as Aggregates;
  for (const k of AGGREGATE_KEYS) out[k] = a[k].slice(from, to);
  out.drivers = (a.drivers ?? []).map((d) => d.slice(from, to));
  return out;
}

/**
 * Scored customers, index-aligned with the aggregates; dimensions as the JSON text of
 * DimensionScore[] in PostgreSQL's jsonb output form (see jsonbText).
 */
export interface Scored {
  score: Uint8Array;
  status: HealthStatus[];
  dimensions: string[];
}

const round = (x: number, digits: number) => {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
};
const cap = (x: number) => Math.min(100, Math.max(0, Math.round(x)));

export function keyEventsActive(model: HealthModel): boolean {
  return (
    model.active_dimensions.includes('key_events') &&
    model.key_events.positive.length + model.key_events.negative.length > 0
  );
}

export function statusOf(score: number, model: HealthModel): HealthStatus {
  if (score >= model.thresholds.healthy) return 'healthy';
  if (score < model.thresholds.at_risk) return 'at_risk';
  return 'neutral';
}

/**
 * A driver's score, 0–100: higher_is_better min(100, round(value / target × 100)) (0 below 0);
 * lower_is_better 100 up to the target, then max(0, round(100 − (value − target) / target × 100)).
 */
export function driverScore(value: number, target: number, direction: DriverDirection): number {
  if (direction === 'higher_is_better') return cap((value / target) * 100);
  return value <= target ? 100 : cap(100 - ((value - target) / target) * 100);
}

/** The five dimensions of customer `i`, in HEALTH_DIMENSIONS order, then the model's drivers. */
export function dimensionsOf(model: HealthModel, a: Aggregates, i: number): DimensionScore[] {
  const drivers = (model.drivers ?? []).map((dr, k): DimensionScore => {
    const v = a.drivers?.[k]?.[i];
    const known = v !== undefined && !Number.isNaN(v);
    return {
      key: `metric:${dr.slug}`,
      active: known,
      weight: dr.weight,
      score: known ? driverScore(v, dr.target, dr.direction) : null,
      value: known ? v : null,
      unit: dr.unit ?? 'value',
    };
  });
  return [...builtInDimensions(model, a, i), ...drivers];
}

function builtInDimensions(model: HealthModel, a: Aggregates, i: number): DimensionScore[] {
  const active = new Set<HealthDimension>(model.active_dimensions);
  const keyActive = keyEventsActive(model);
  return HEALTH_DIMENSIONS.map((key): DimensionScore => {
    const on = key === 'key_events' ? keyActive : active.has(key);
    const d: DimensionScore = {
      key,
      active: on,
      weight: model.weights[key],
      score: null,
      value: null,
      unit: DIMENSION_UNITS[key],
    };
    if (!on) return d;
    let value: number;
    let score: number;
    switch (key) {
      case 'usage_frequency':
        value = round(a.activeDays[i] / 4, 2);
        score = cap((value * 100) / 5);
        break;
      case 'breadth':
        value = a.names[i];
        score = cap((value * 100) / 10);
        break;
      case 'active_users':
        value = a.mau[i] > 0 ? round(a.userDays[i] / 30 / a.mau[i], 4) : 0;
        score = cap((value * 100) / 0.4);
        break;
      case 'key_events':
        value = a.positive[i] - a.negative[i];
        score = cap(50 + 10 * value);
        break;
      case 'payment_health':
        value = a.billing[i] > 0 ? a.negatives[i] : 0;
        score = a.billing[i] > 0 ? cap(100 - a.penalty[i]) : 100;
        break;
    }
    d.value = value;
    d.score = score;
    return d;
  });
}

/**
 * Weighted mean of the active dimensions' scores, weights normalised over the active ones. A model
 * the API would refuse (no active dimension, all active weights 0) falls back to the plain mean
 * rather than dividing by zero.
 */
export function overallScore(dims: DimensionScore[]): number {
  let sum = 0;
  let weights = 0;
  let plain = 0;
  let n = 0;
  for (const d of dims) {
    if (!d.active || d.score === null) continue;
    sum += d.weight * d.score;
    weights += d.weight;
    plain += d.score;
    n++;
  }
  if (weights > 0) return cap(sum / weights);
  return n ? cap(plain / n) : 0;
}

export function scoreAggregates(model: HealthModel, a: Aggregates): Scored {
  const n = a.activeDays.length;
  const out: Scored = { score: new Uint8Array(n), status: new Array(n), dimensions: new Array(n) };
  for (let i = 0; i < n; i++) {
    const dims = dimensionsOf(model, a, i);
    const score = overallScore(dims);
    out.score[i] = score;
    out.status[i] = statusOf(score, model);
    out.dimensions[i] = jsonbText(dims);
  }
  return out;
}

/**
 * The breakdown as PostgreSQL prints a jsonb value (keys by length then bytes, ", " and ": "), so
 * the store can tell an unchanged breakdown by comparing text with `dimensions::text` instead of
 * having PostgreSQL parse every row's JSON. A number printed differently by the two (an exponent)
 * only makes the row look changed and be written again.
 */
export function jsonbText(dims: DimensionScore[]): string {
  const parts = dims.map(
    (d) =>
      `{"key": "${d.key}", "unit": ${JSON.stringify(d.unit)}, "score": ${d.score}, "value": ${d.value}, ` +
      `"active": ${d.active}, "weight": ${d.weight}}`,
  );
  return `[${parts.join(', ')}]`;
}
