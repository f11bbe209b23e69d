import {
  DIMENSION_UNITS,
  HEALTH_DIMENSIONS,
  type DimensionScore,
  type DriverDirection,
  type HealthDimension,
  type HealthDriver,
  type HealthModel,
} from '../../schemas/health.js';
import type { FieldError } from '../../lib/problem.js';

/** A PATCH body as validated by HealthModelPatch. */
export interface ModelPatch {
  weights?: Partial<Record<HealthDimension, number>>;
  thresholds?: { healthy?: number; at_risk?: number };
  active_dimensions?: HealthDimension[];
  key_events?: { positive?: string[]; negative?: string[] };
  drivers?: Array<{ metric_id: string; weight: number; target: number; direction: DriverDirection }>;
}

/**
 * One level deep: weights and thresholds key by key, active_dimensions, key_events and drivers
 * replaced (`drivers`: the patch's drivers resolved against the metrics, see repo.ts).
 */
export function mergeModel(current: HealthModel, patch: ModelPatch, drivers?: HealthDriver[]): HealthModel {
  return {
    weights: { ...current.weights, ...patch.weights },
    thresholds: { ...current.thresholds, ...patch.thresholds },
    active_dimensions: patch.active_dimensions ? [...patch.active_dimensions] : [...current.active_dimensions],
    key_events: patch.key_events
      ? { positive: patch.key_events.positive ?? [], negative: patch.key_events.negative ?? [] }
      : { positive: [...current.key_events.positive], negative: [...current.key_events.negative] },
    drivers: drivers ?? current.drivers.map((d) => ({ ...d })),
  };
}

/** Dimensions that count in the score: listed as active, and key_events only while an event is flagged. */
export function activeDimensions(m: HealthModel): HealthDimension[] {
  const flags = m.key_events.positive.length + m.key_events.negative.length > 0;
  return HEALTH_DIMENSIONS.filter((k) => m.active_dimensions.includes(k) && (k !== 'key_events' || flags));
}

/**
 * Rules the schema cannot express, checked on the merged model; each error names the field of the
 * request that breaks the rule (the one sent, when the other half of the rule is stored).
 */
export function modelErrors(m: HealthModel, patch: ModelPatch): FieldError[] {
  const errors: FieldError[] = [];
  const { healthy, at_risk } = m.thresholds;
  if (at_risk >= healthy) {
    const field = patch.thresholds?.at_risk !== undefined ? 'thresholds.at_risk' : 'thresholds.healthy';
    errors.push({
      field,
      code: 'invalid_range',
      message: `thresholds.at_risk (${at_risk}) must be below thresholds.healthy (${healthy})`,
    });
  }
  const active = activeDimensions(m);
  if (active.length === 0) {
    errors.push({
      field:
        patch.active_dimensions !== undefined || patch.key_events === undefined ? 'active_dimensions' : 'key_events',
      code: 'no_active_dimension',
      message: 'at least one dimension must be active (key_events counts only while the model flags an event)',
    });
  } else if (active.every((k) => m.weights[k] === 0)) {
    for (const k of active)
      errors.push({
        field: `weights.${k}`,
        code: 'all_active_weights_zero',
        message: `the active dimensions (${active.join(', ')}) all weigh 0; at least one must weigh more`,
      });
  }
  const positive = new Set(m.key_events.positive);
  m.key_events.negative.forEach((name, i) => {
    if (positive.has(name))
      errors.push({
        field: `key_events.negative[${i}]`,
        code: 'in_both_lists',
        message: `${name} is flagged both positive and negative`,
      });
  });
  return errors;
}

/** The breakdown of a customer not scored yet: every dimension as the model sets it, without scores. */
export function unscoredDimensions(m: HealthModel): DimensionScore[] {
  const active = new Set(activeDimensions(m));
  const builtIn = HEALTH_DIMENSIONS.map(
    (key): DimensionScore => ({
      key,
      active: active.has(key),
      weight: m.weights[key],
      score: null,
      value: null,
      unit: DIMENSION_UNITS[key],
    }),
  );
  const drivers = m.drivers.map(
    (d): DimensionScore => ({
      key: `metric:${d.slug}`,
      active: false,
      weight: d.weight,
      score: null,
      value: null,
      unit: d.unit ?? 'value',
    }),
  );
  return [...builtIn, ...drivers];
}
