import Type, { type Static } from '#typebox';
import { DateOnly, Nullable, StringEnum, Timestamp, Uuid } from './common.js';

/**
 * The metrics library: definitions, the event catalog, test queries, proposals and usage widgets.
 * The constants here are shared by the compiler (lib/metrics/), the core API and the parser.
 */

export const CALCULATIONS = ['count', 'sum', 'avg', 'max', 'distinct_count', 'last_value', 'exists'] as const;
export type Calculation = (typeof CALCULATIONS)[number];
/** Calculations that read a property's value and so need `target_property`. */
export const NEEDS_TARGET: ReadonlySet<Calculation> = new Set(['sum', 'avg', 'max', 'distinct_count']);
export const FILTER_OPS = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'contains', 'in'] as const;
/** An event's own fields a filter may name besides `properties.<name>`. */
export const EVENT_FIELDS = ['user_id', 'product_id', 'product_code', 'external_source'] as const;
export const CALENDAR_UNITS = ['day', 'week', 'month', 'quarter'] as const;
export const GRAINS = ['customer', 'portfolio'] as const;
export const MAX_WINDOW_DAYS = 365;
export const MAX_FILTERS = 20;
export const MAX_IN_VALUES = 100;
export const MAX_PROPERTY_KEYS = 200;
export const MAX_TEST_CUSTOMERS = 10;
export const MAX_WIDGETS = 8;
export const WIDGET_AGGREGATIONS = ['count', 'unique_users', 'trend_pct', 'frequency'] as const;
export const WIDGET_PERIODS = ['7d', '30d', '90d'] as const;
export const SLUG_PATTERN = '^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$';

const doc = (...parts: string[]) => parts.join(' ');

/** Characters of one string value, alone or as an item of an `in` list. */
export const MAX_FILTER_VALUE_LENGTH = 1000;
/** Characters of every string value of a definition's filter together: its query must fit ClickHouse's. */
export const MAX_FILTER_CHARS = 20_000;

const FilterString = Type.String({ maxLength: MAX_FILTER_VALUE_LENGTH });
const FilterValue = Type.Union(
  [FilterString, Type.Number(), Type.Boolean(), Type.Array(Type.Union([FilterString, Type.Number()]))],
  {
    description:
      'A string, number or boolean; an array of strings or numbers for `in`. A string (alone or in a list) ' +
      `holds at most ${MAX_FILTER_VALUE_LENGTH} characters, and the strings of a filter at most ${MAX_FILTER_CHARS} ` +
      'in all.',
  },
);

export const MetricFilter = Type.Object(
  {
    field: Type.String({
      minLength: 1,
      maxLength: 300,
      description:
        '`properties.<name>` (a top-level property) or one of user_id, product_id, product_code, external_source.',
    }),
    op: StringEnum(FILTER_OPS),
    value: FilterValue,
  },
  { additionalProperties: false },
);
export type MetricFilter = Static<typeof MetricFilter>;

export const MetricWindow = Type.Object(
  {
    type: StringEnum(['rolling', 'calendar'] as const),
    days: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_WINDOW_DAYS, description: 'rolling only' })),
    unit: Type.Optional(StringEnum(CALENDAR_UNITS, { description: 'calendar only' })),
  },
  {
    additionalProperties: false,
    description: doc(
      '`{type: "rolling", days: 1..365}`: the N×24 hours ending now.',
      '`{type: "calendar", unit: "day"|"week"|"month"|"quarter"}`: the current UTC day, ISO week (from Monday),',
      'month or quarter so far.',
    ),
  },
);
export type MetricWindow = Static<typeof MetricWindow>;

/** What a metric computes: the part of a definition the compiler reads. */
export const DefinitionFields = {
  source_event: Type.String({ minLength: 1, maxLength: 255, description: 'An event name of the workspace catalog.' }),
  calculation: StringEnum(CALCULATIONS),
  target_property: Type.Optional(
    Nullable(
      Type.String({
        minLength: 1,
        maxLength: 255,
        description: 'Bare top-level property key (`amount`); required for sum, avg, max, distinct_count.',
      }),
    ),
  ),
  filter: Type.Optional(Type.Array(MetricFilter, { maxItems: MAX_FILTERS })),
  window: MetricWindow,
  grain: StringEnum(GRAINS),
};

export const MetricDefinition = Type.Object(DefinitionFields, { additionalProperties: false });
export type MetricDefinition = Static<typeof MetricDefinition>;

/** A definition as the metrics table stores it: the window in `window_def`. */
export type DefinitionRow = Omit<MetricDefinition, 'window'> & { window_def: MetricWindow };

export const definitionOfRow = (r: DefinitionRow): MetricDefinition => ({
  source_event: r.source_event,
  calculation: r.calculation,
  target_property: r.target_property,
  filter: r.filter,
  window: r.window_def,
  grain: r.grain,
});

const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' });
const Description = Nullable(Type.String({ maxLength: 2000 }));
const Unit = Nullable(Type.String({ maxLength: 32, description: 'Display unit, e.g. `USD` or `reports`.' }));

export const MetricCreate = Type.Object(
  {
    name: Name,
    slug: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        pattern: SLUG_PATTERN,
        description: 'snake_case; generated from `name` when absent; unique in the workspace; fixed.',
      }),
    ),
    description: Type.Optional(Description),
    ...DefinitionFields,
    unit: Type.Optional(Unit),
  },
  { additionalProperties: false },
);
export type MetricCreate = Static<typeof MetricCreate>;

/** PATCH names only the mutable fields; others are refused by the handler (immutable_field), not here. */
export const MetricPatch = Type.Object(
  {
    name: Type.Optional(Name),
    description: Type.Optional(Description),
    unit: Type.Optional(Unit),
  },
  { additionalProperties: true, minProperties: 1 },
);

export const Metric = Type.Object({
  id: Uuid,
  slug: Type.String(),
  name: Type.String(),
  description: Nullable(Type.String()),
  ...DefinitionFields,
  target_property: Nullable(Type.String()),
  filter: Type.Array(MetricFilter),
  unit: Nullable(Type.String()),
  status: StringEnum(['active', 'deleted'] as const),
  created_at: Timestamp,
  updated_at: Timestamp,
  consumers: Type.Object({
    objectives: Type.Integer(),
    health_drivers: Type.Integer(),
    playbook_triggers: Type.Integer(),
  }),
});

export const MetricListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
    include_deleted: Type.Optional(Type.Boolean({ default: false })),
  },
  { additionalProperties: false },
);

export const TestQueryBody = Type.Object(
  {
    definition: Type.Unknown({ description: 'A metric definition as POST /v1/metrics takes (name optional).' }),
    customer_ids: Type.Optional(Type.Array(Uuid, { minItems: 1, maxItems: MAX_TEST_CUSTOMERS, uniqueItems: true })),
    sample_size: Type.Optional(Type.Integer({ minimum: 5, maximum: 10 })),
  },
  { additionalProperties: false },
);

export const TestQueryResult = Type.Object({
  results: Type.Array(
    Type.Object({
      customer_id: Nullable(Uuid),
      value: Nullable(Type.Number()),
      period: Type.Object({ from: Timestamp, to: Timestamp }),
    }),
  ),
  sampled: Type.Boolean({ description: 'True when the customers were sampled (no customer_ids sent).' }),
  elapsed_ms: Type.Number(),
});

export const CatalogEntry = Type.Object({
  event_name: Type.String(),
  first_seen_at: Timestamp,
  last_seen_at: Nullable(Timestamp),
  property_keys: Type.Array(Type.String()),
});

export const CatalogQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
  },
  { additionalProperties: false },
);

export const WidgetCreate = Type.Object(
  {
    name: Name,
    event_name: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 255 }))),
    aggregation: StringEnum(WIDGET_AGGREGATIONS),
    period: StringEnum(WIDGET_PERIODS),
  },
  { additionalProperties: false },
);
export type WidgetCreate = Static<typeof WidgetCreate>;

export const Widget = Type.Object({
  id: Uuid,
  name: Type.String(),
  event_name: Nullable(Type.String()),
  aggregation: StringEnum(WIDGET_AGGREGATIONS),
  period: StringEnum(WIDGET_PERIODS),
  created_at: Timestamp,
});

// customer_id is checked by the handler after the widget: another workspace's widget answers 404 first.
export const WidgetValueQuery = Type.Object(
  { customer_id: Type.Optional(Type.String({ description: 'Required: the customer (UUID).' })) },
  { additionalProperties: false },
);

export const WidgetValue = Type.Object({
  widget_id: Uuid,
  customer_id: Uuid,
  value: Nullable(Type.Number({ description: 'trend_pct: null when the previous period has no event.' })),
  period: Type.Object({ from: Timestamp, to: Timestamp }),
  previous: Type.Optional(
    Type.Object({ count: Type.Number(), from: Timestamp, to: Timestamp }, { description: 'trend_pct only' }),
  ),
});

export const ProposalCreate = Type.Object(
  { description: Type.String({ minLength: 1, maxLength: 1000, pattern: '\\S' }) },
  { additionalProperties: false },
);

export const ProposalAccept = Type.Object(
  {
    name: Type.Optional(Name),
    slug: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: SLUG_PATTERN })),
    description: Type.Optional(Description),
    unit: Type.Optional(Unit),
    source_event: Type.Optional(DefinitionFields.source_event),
    calculation: Type.Optional(DefinitionFields.calculation),
    target_property: DefinitionFields.target_property,
    filter: DefinitionFields.filter,
    window: Type.Optional(MetricWindow),
    grain: Type.Optional(DefinitionFields.grain),
  },
  { additionalProperties: false },
);

export const Proposal = Type.Object({
  id: Uuid,
  status: StringEnum(['proposed', 'accepted', 'rejected'] as const),
  description: Type.String(),
  proposal: Type.Object({
    name: Type.String(),
    source_event: Nullable(Type.String()),
    calculation: StringEnum(CALCULATIONS),
    target_property: Nullable(Type.String()),
    filter: Type.Array(MetricFilter),
    window: MetricWindow,
    grain: StringEnum(GRAINS),
    rationale: Type.String(),
    confidence: Type.Number({ minimum: 0, maximum: 1 }),
  }),
  validation: Type.Object({
    valid: Type.Boolean(),
    errors: Type.Array(Type.Object({ field: Type.String(), code: Type.String(), message: Type.String() })),
  }),
  metric_id: Nullable(Uuid),
  created_at: Timestamp,
});

export const MAX_VALUES = 10_000;

export const MetricValuesQuery = Type.Object(
  {
    customer_id: Type.Optional(Uuid),
    from: Type.Optional(Timestamp),
    to: Type.Optional(Timestamp),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_VALUES, default: 1000 })),
  },
  { additionalProperties: false },
);

export const MetricValue = Type.Object({
  customer_id: Nullable(Uuid),
  value: Nullable(Type.Number()),
  period_start: Timestamp,
  period_end: Timestamp,
  computed_at: Timestamp,
});

export const MetricValues = Type.Object({ data: Type.Array(MetricValue) });

export const MaterializeResult = Type.Object({
  metric_id: Uuid,
  customers: Type.Integer({ description: 'Customers a value was stored for (1 for a portfolio metric).' }),
  period_start: Timestamp,
  period_end: Timestamp,
  computed_at: Timestamp,
});

export const ObjectiveCreate = Type.Object(
  {
    name: Name,
    metric_id: Uuid,
    target_value: Type.Number(),
    due_date: Type.Optional(DateOnly),
  },
  { additionalProperties: false },
);
export type ObjectiveCreate = Static<typeof ObjectiveCreate>;

export const Objective = Type.Object({
  id: Uuid,
  customer_id: Uuid,
  metric_id: Uuid,
  name: Type.String(),
  target_value: Type.Number(),
  due_date: Nullable(DateOnly),
  created_at: Timestamp,
  current_value: Nullable(
    Type.Number({ description: 'The latest materialized value of the metric for the customer.' }),
  ),
  value_computed_at: Nullable(Timestamp),
  progress: Nullable(Type.Number({ description: 'current_value / target_value; null without a value or a 0 target.' })),
});

export const ObjectiveList = Type.Object({ data: Type.Array(Objective) });
