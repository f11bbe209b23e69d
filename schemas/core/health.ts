import Type from '#typebox';
import {
  DEFAULT_HEALTH_MODEL,
  DRIVER_DIRECTIONS,
  DimensionSchema,
  HEALTH_DIMENSIONS,
  HEALTH_STATUS_VALUES,
  type HealthDimension,
} from '../health.js';
import { SNAKE_CASE } from '../ingest.js';
import { DateOnly, Nullable, StringEnum, Timestamp, Uuid } from './common.js';

/**
 * Health endpoints of the core API. The descriptions here are the public documentation of the
 * scoring (they become the OpenAPI document), so they carry the curves and the decisions.
 */

export const HISTORY_GRANULARITIES = ['daily', 'weekly'] as const;
export type HistoryGranularity = (typeof HISTORY_GRANULARITIES)[number];
/** Longest history range, both ends included: two years. */
export const MAX_HISTORY_DAYS = 731;
/** Default history range: the 90 days ending today (UTC). */
export const DEFAULT_HISTORY_DAYS = 90;
export const MAX_KEY_EVENTS = 100;
export const MAX_WEIGHT = 1000;
export const MAX_DRIVERS = 20;
/** Seconds a client should wait after `scorer_unavailable`. */
export const RECALC_RETRY_AFTER_S = 10;

const d = DEFAULT_HEALTH_MODEL;

/** Long documentation strings, written in pieces of readable length. */
const doc = (...parts: string[]) => parts.join(' ');

/** What each dimension measures and its curve from the raw value to the 0–100 score. */
export const DIMENSION_DOCS: Record<HealthDimension, string> = {
  usage_frequency: doc(
    '`usage_frequency` (unit `days_per_week`): value = distinct UTC days with at least one event in the last',
    '28 days ÷ 4, rounded to 2 decimals; score = min(100, round(value ÷ 5 × 100)),',
    'so 5 or more days a week = 100 and no usage = 0.',
  ),
  breadth: doc(
    '`breadth` (unit `distinct_events`): value = distinct event names in the last 30 days;',
    'score = min(100, round(value ÷ 10 × 100)), so 10 or more names = 100.',
  ),
  active_users: doc(
    '`active_users` (unit `dau_mau_ratio`): over the last 30 days, DAU = Σ distinct users per day ÷ 30',
    '(days without events count 0), MAU = distinct users in the 30 days; value = DAU ÷ MAU rounded to',
    '4 decimals (0 without users); score = min(100, round(value ÷ 0.4 × 100)), so 0.4 or more = 100.',
    'Users are non-empty `user_id` values.',
  ),
  key_events: doc(
    '`key_events` (unit `net_key_events`): value = events of the last 30 days named in `key_events.positive`',
    'minus those named in `key_events.negative`; score = clamp(50 + 10 × value, 0, 100). Inactive (reported',
    'with `active: false`, score and value null, left out of the weighted score) while the model flags no',
    'event, even when listed in `active_dimensions`.',
  ),
  payment_health: doc(
    '`payment_health` (unit `unresolved_billing_issues`): billing events of the last 90 days. Penalties:',
    '`payment_failed` 25, `invoice_disputed` 30, `dunning_attempt` 15, `refund_issued` 10; one counts when',
    'its status is not `resolved` and it came after the latest `payment_succeeded` of the window (a success',
    'restores the score); a counted one older than 30 days costs half. value = number of counted events;',
    'score = max(0, round(100 − Σ penalties)). No billing events = 100; two unresolved `payment_failed`',
    'in 30 days = 50.',
  ),
};

export const SCORING_DOC = [
  doc(
    'Score = round(Σ wᵢ·sᵢ ÷ Σ wᵢ) over the active dimensions (in `active_dimensions`, and for `key_events`',
    'only while the model flags an event), an integer 0–100. Status: `healthy` when score ≥',
    '`thresholds.healthy`, `at_risk` when score < `thresholds.at_risk`, else `neutral`.',
  ),
  doc(
    'Days are UTC dates; "the last N days" are the N days ending today. Only the workspace\'s own events',
    'count (surfaces A and B and backfill), never the events the service generates (`health_changed`,',
    '`task_*`, integration activity).',
  ),
  doc(
    'Every non-deleted customer is recalculated every hour (processors, `HEALTH_RECALC_INTERVAL_MS`) and on',
    'demand (POST …/health/recalculate). A customer without events scores 0 on the usage dimensions and 100',
    'on payment health.',
  ),
].join('\n\n');

const dimensionList = HEALTH_DIMENSIONS.map((k) => `- ${DIMENSION_DOCS[k]}`).join('\n');

const CALCULATED_AT_DOC = doc(
  'Time of the last calculation of this customer, scheduled or on demand, also when it found the same score.',
  'It moves with every scheduled run that covers the customer; a customer in the trash is not covered, so once',
  'restored it shows its last calculation until the next run.',
);

const score = Type.Integer({ minimum: 0, maximum: 100 });
const status = StringEnum(HEALTH_STATUS_VALUES);
const dimensionKey = StringEnum(HEALTH_DIMENSIONS);
const eventName = Type.String({ minLength: 1, maxLength: 255, pattern: SNAKE_CASE });

export const CustomerHealth = Type.Object(
  {
    customer_id: Uuid,
    score: Nullable(score),
    status: Nullable(status),
    calculated_at: Nullable(Type.String({ format: 'date-time', description: CALCULATED_AT_DOC })),
    dimensions: Type.Array(DimensionSchema, {
      description: doc(
        'All five dimensions in this order, each with its model weight as configured (the score normalises',
        `over the active ones), its 0–100 score and its raw value:\n${dimensionList}`,
      ),
    }),
  },
  {
    description: doc(
      'The current score. A customer never scored yet has score, status and calculated_at null and the',
      'dimensions listed from the current model (active per the model, weights as configured, score and',
      'value null).',
    ),
  },
);

export const CurrentHealth = Nullable(
  Type.Object(
    { score, status, calculated_at: Type.String({ format: 'date-time', description: CALCULATED_AT_DOC }) },
    { description: 'The stored health score; null until the customer is first scored (within the hour).' },
  ),
);

export const HistoryQuery = Type.Object(
  {
    from: Type.Optional(
      Type.String({
        maxLength: 64,
        description: doc(
          'First day, ISO 8601 date (`2026-01-31`) or date-time (its UTC date; without an offset it is read',
          `as UTC). Default: ${DEFAULT_HISTORY_DAYS - 1} days before \`to\`, not before 1970-01-01.`,
        ),
      }),
    ),
    to: Type.Optional(
      Type.String({
        maxLength: 64,
        description: 'Last day (included), ISO 8601 date or date-time as for `from`. Default: today (UTC).',
      }),
    ),
    granularity: Type.Optional(
      StringEnum(HISTORY_GRANULARITIES, {
        default: 'daily',
        description: doc(
          '`daily`: the last score of each day. `weekly`: ISO weeks starting Monday, `date` = the Monday,',
          'the last score of the week.',
        ),
      }),
    ),
  },
  { additionalProperties: false },
);

export const HistoryPoint = Type.Object({ date: DateOnly, score, status });

export const CustomerHealthHistory = Type.Object({
  customer_id: Uuid,
  granularity: StringEnum(HISTORY_GRANULARITIES),
  from: DateOnly,
  to: DateOnly,
  data: Type.Array(HistoryPoint, {
    description: doc(
      'Oldest first; only days (weeks) with a calculation appear, nothing is interpolated. A weekly point',
      'counts only the days inside [from, to], so the first week may start before `from`.',
    ),
  }),
});

const weightsDoc = doc(
  `Weight of each dimension, ≥ 0 (at most ${MAX_WEIGHT}); only the ratios matter, the score normalises over`,
  `the active dimensions. Defaults: ${HEALTH_DIMENSIONS.map((k) => `${k} ${d.weights[k]}`).join(', ')}.`,
);
const thresholdsDoc = doc(
  'Status cut-offs on the 0–100 score: `healthy` when score ≥ healthy, `at_risk` when score < at_risk',
  `(at_risk must be below healthy). Defaults: healthy ${d.thresholds.healthy}, at_risk ${d.thresholds.at_risk}.`,
);
const activeDoc = doc(
  'Dimensions that count (default: all five). At least one must be active; `key_events` counts only while',
  'the model flags an event.',
);
const keyEventsDoc = doc(
  `Event names flagged as key positive or negative moments (snake_case, at most ${MAX_KEY_EVENTS} per list;`,
  'default none, which leaves `key_events` inactive). A name may not be in both lists. Events the service',
  'generates never count.',
);

const driversDoc = doc(
  `Metrics of the metrics library scored as health dimensions \`metric:<slug>\` (at most ${MAX_DRIVERS}):`,
  'each an active, customer-grain metric of the workspace (otherwise 400 naming `drivers[i].metric_id`),',
  'weighted like the built-in dimensions and scored against `target` (> 0) from its latest materialized value.',
  '`higher_is_better`: min(100, round(value ÷ target × 100)), below 0 → 0.',
  '`lower_is_better`: value ≤ target → 100,',
  'else max(0, round(100 − (value − target) ÷ target × 100)). No value yet: the dimension is inactive.',
  'A driver keeps its metric in use (it cannot be deleted) and has it materialized hourly for every customer.',
);

export const HealthModel = Type.Object(
  {
    weights: Type.Object(
      {
        usage_frequency: Type.Number(),
        breadth: Type.Number(),
        active_users: Type.Number(),
        key_events: Type.Number(),
        payment_health: Type.Number(),
      },
      { description: weightsDoc },
    ),
    thresholds: Type.Object(
      { healthy: Type.Number({ minimum: 0, maximum: 100 }), at_risk: Type.Number({ minimum: 0, maximum: 100 }) },
      { description: thresholdsDoc },
    ),
    active_dimensions: Type.Array(dimensionKey, { description: activeDoc }),
    key_events: Type.Object(
      { positive: Type.Array(Type.String()), negative: Type.Array(Type.String()) },
      { description: keyEventsDoc },
    ),
    drivers: Type.Array(
      Type.Object({
        metric_id: Uuid,
        slug: Type.String(),
        unit: Type.Union([Type.String(), Type.Null()]),
        weight: Type.Number(),
        target: Type.Number(),
        direction: StringEnum(DRIVER_DIRECTIONS),
      }),
      { description: driversDoc },
    ),
    updated_at: Type.Union([Timestamp, Type.Null()], {
      description: 'Time of the last PATCH; null while the workspace uses the defaults.',
    }),
  },
  { description: `The workspace health model.\n\n${SCORING_DOC}` },
);

const weight = Type.Number({ minimum: 0, maximum: MAX_WEIGHT });
const threshold = Type.Number({ minimum: 0, maximum: 100 });
const keyEventList = Type.Array(eventName, { maxItems: MAX_KEY_EVENTS, uniqueItems: true });

export const HealthModelPatch = Type.Object(
  {
    drivers: Type.Optional(
      Type.Array(
        Type.Object(
          {
            metric_id: Uuid,
            weight,
            target: Type.Number({ exclusiveMinimum: 0 }),
            direction: StringEnum(DRIVER_DIRECTIONS),
          },
          { additionalProperties: false },
        ),
        { maxItems: MAX_DRIVERS, description: `Replaced as sent. ${driversDoc}` },
      ),
    ),
    weights: Type.Optional(
      Type.Object(
        {
          usage_frequency: Type.Optional(weight),
          breadth: Type.Optional(weight),
          active_users: Type.Optional(weight),
          key_events: Type.Optional(weight),
          payment_health: Type.Optional(weight),
        },
        { additionalProperties: false, description: `Merged key by key. ${weightsDoc}` },
      ),
    ),
    thresholds: Type.Optional(
      Type.Object(
        { healthy: Type.Optional(threshold), at_risk: Type.Optional(threshold) },
        { additionalProperties: false, description: `Merged key by key. ${thresholdsDoc}` },
      ),
    ),
    active_dimensions: Type.Optional(
      Type.Array(dimensionKey, {
        maxItems: HEALTH_DIMENSIONS.length,
        uniqueItems: true,
        description: `Replaced as sent. ${activeDoc}`,
      }),
    ),
    key_events: Type.Optional(
      Type.Object(
        { positive: Type.Optional(keyEventList), negative: Type.Optional(keyEventList) },
        {
          additionalProperties: false,
          description: `Replaced as sent (a list left out becomes empty). ${keyEventsDoc}`,
        },
      ),
    ),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description: doc(
      'Merges one level deep: `weights` and `thresholds` key by key, `active_dimensions`, `key_events` and',
      '`drivers` replaced as sent. The result is validated as a whole; the next calculation uses it.',
    ),
  },
);
