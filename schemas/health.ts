import Type from '#typebox';

/**
 * The health model and score shapes shared by the scorer (processors/health/) and the core API
 * (core-api/health/). One place for the dimension keys and the defaults, so both tiers agree.
 */

export const HEALTH_DIMENSIONS = [
  'usage_frequency',
  'breadth',
  'active_users',
  'key_events',
  'payment_health',
] as const;
export type HealthDimension = (typeof HEALTH_DIMENSIONS)[number];

export const HEALTH_STATUS_VALUES = ['healthy', 'neutral', 'at_risk'] as const;
export type HealthStatus = (typeof HEALTH_STATUS_VALUES)[number];

/** What each dimension's raw `value` measures, as the breakdown reports it. */
export const DIMENSION_UNITS: Record<HealthDimension, string> = {
  usage_frequency: 'days_per_week',
  breadth: 'distinct_events',
  active_users: 'dau_mau_ratio',
  key_events: 'net_key_events',
  payment_health: 'unresolved_billing_issues',
};

export const DRIVER_DIRECTIONS = ['higher_is_better', 'lower_is_better'] as const;
export type DriverDirection = (typeof DRIVER_DIRECTIONS)[number];

/**
 * A metric of the metrics library scored as the health dimension `metric:<slug>` against `target`
 * from its latest materialized value (curves in docs/health.md). slug and unit are copied from
 * the metric when the model is PATCHed (a slug never changes).
 */
export interface HealthDriver {
  metric_id: string;
  slug: string;
  unit: string | null;
  weight: number;
  target: number;
  direction: DriverDirection;
}

/** A driver's dimension key. */
export type DriverKey = `metric:${string}`;

export interface HealthModel {
  weights: Record<HealthDimension, number>;
  thresholds: { healthy: number; at_risk: number };
  active_dimensions: HealthDimension[];
  key_events: { positive: string[]; negative: string[] };
  drivers: HealthDriver[];
}

export const DEFAULT_HEALTH_MODEL: HealthModel = {
  weights: { usage_frequency: 0.25, breadth: 0.15, active_users: 0.2, key_events: 0.15, payment_health: 0.25 },
  thresholds: { healthy: 70, at_risk: 40 },
  active_dimensions: [...HEALTH_DIMENSIONS],
  key_events: { positive: [], negative: [] },
  drivers: [],
};

/** The stored model merged over the defaults (a workspace without a row, or an older row). */
export function effectiveModel(stored: Partial<HealthModel> | null | undefined): HealthModel {
  const s = stored ?? {};
  return {
    weights: { ...DEFAULT_HEALTH_MODEL.weights, ...(s.weights ?? {}) },
    thresholds: { ...DEFAULT_HEALTH_MODEL.thresholds, ...(s.thresholds ?? {}) },
    active_dimensions: s.active_dimensions ?? [...DEFAULT_HEALTH_MODEL.active_dimensions],
    key_events: {
      positive: s.key_events?.positive ?? [],
      negative: s.key_events?.negative ?? [],
    },
    drivers: s.drivers ?? [],
  };
}

/** A dimension as stored in customer_health.dimensions and shown by GET …/health. */
export interface DimensionScore {
  key: HealthDimension | DriverKey;
  active: boolean;
  weight: number;
  score: number | null;
  value: number | null;
  unit: string;
}

export const DimensionSchema = Type.Object({
  key: Type.Unsafe<HealthDimension | DriverKey>({
    type: 'string',
    pattern: `^(${HEALTH_DIMENSIONS.join('|')}|metric:[a-z][a-z0-9_]*)$`,
    description: 'One of the five built-in dimensions, or `metric:<slug>` for a driver of the model.',
  }),
  active: Type.Boolean({ description: 'Inactive dimensions are reported but excluded from the weighted score.' }),
  weight: Type.Number({ description: 'The model weight as configured (the score normalises over active ones).' }),
  score: Type.Union([Type.Integer({ minimum: 0, maximum: 100 }), Type.Null()]),
  value: Type.Union([Type.Number(), Type.Null()], { description: 'The raw measurement, in `unit`.' }),
  unit: Type.String(),
});

/** Core NATS request of POST /v1/customers/{id}/health/recalculate, answered by the scorer. */
export interface RecalculateRequest {
  tenant_id: string;
  customer_id: string;
}
/** The customer's health as the calculation stored it: what GET …/health shows for it. */
export interface RecalculatedHealth {
  score: number;
  status: HealthStatus;
  /** ISO 8601. */
  calculated_at: string;
  dimensions: DimensionScore[];
}
/**
 * `health` is absent from a scorer older than the field: the core API then reads the stored score
 * back, as it did before.
 */
export type RecalculateReply = { ok: true; health?: RecalculatedHealth } | { ok: false; error: string };
