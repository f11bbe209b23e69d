import Type, { type Static, type TObject, type TSchema } from '#typebox';
import { Cursor, Nullable, StringEnum, Timestamp, Uuid } from './common.js';

/**
 * Playbooks: a trigger plus actions, and the record of each run. A trigger or an action is one
 * object whose `type` selects its fields: validated with if/then per type, so a client is told
 * about the fields of the type it sent, not of every other type. docs/playbooks.md has the rules.
 */

export const TRIGGER_TYPES = ['condition', 'metric_threshold', 'event'] as const;
export const THRESHOLD_OPERATORS = ['gt', 'gte', 'lt', 'lte'] as const;
export const NOTIFY_CHANNELS = ['slack', 'teams', 'email', 'webhook'] as const;
export const TRIGGER_SOURCES = ['schedule', 'health', 'metrics', 'event', 'manual'] as const;
export const MAX_ACTIONS = 20;
/** How many customer ids (and action entries) a run record carries; `matched_count` is the total. */
export const RUN_LIST_CAP = 1000;

const doc = (...parts: string[]) => parts.join(' ');

export const ConditionTrigger = Type.Object(
  {
    type: Type.Literal('condition'),
    expression: Type.String({
      minLength: 1,
      maxLength: 4000,
      description: doc(
        'A condition in the playbook condition language, e.g.',
        '`health_score < 40 and segment == "Enterprise"` (grammar and variables: docs/playbooks.md).',
      ),
    }),
  },
  { additionalProperties: false },
);

export const MetricThresholdTrigger = Type.Object(
  {
    type: Type.Literal('metric_threshold'),
    metric_id: Uuid,
    operator: StringEnum(THRESHOLD_OPERATORS),
    value: Type.Number(),
  },
  {
    additionalProperties: false,
    description: 'Fires when the latest materialized value of the metric crosses `operator value` for a customer.',
  },
);

export const EventTrigger = Type.Object(
  {
    type: Type.Literal('event'),
    event_name: Type.String({ minLength: 1, maxLength: 255 }),
    count: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000, description: 'Default 1.' })),
    within_days: Type.Optional(Type.Integer({ minimum: 1, maximum: 365, description: 'Default 1.' })),
  },
  {
    additionalProperties: false,
    description: 'Fires when the customer has at least `count` such events within the last `within_days` days.',
  },
);

export const CreateTaskAction = Type.Object(
  {
    type: Type.Literal('create_task'),
    title: Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' }),
    assignee: Type.String({
      minLength: 1,
      maxLength: 320,
      description: "`owner` (the user whose e-mail is the customer's owner_email), a user id or a user's e-mail.",
    }),
    due_in_days: Type.Optional(Type.Integer({ minimum: 0, maximum: 3650 })),
    description: Type.Optional(Type.String({ maxLength: 5000 })),
  },
  { additionalProperties: false },
);

export const NotifyAction = Type.Object(
  {
    type: Type.Literal('notify'),
    channel: StringEnum(NOTIFY_CHANNELS),
    target: Type.String({ minLength: 1, maxLength: 2000, description: 'Channel name, address or URL.' }),
    message: Type.Optional(Type.String({ maxLength: 5000 })),
  },
  { additionalProperties: false },
);

/** One object whose `type` picks one of `variants` (each with a `type` literal). */
function tagged<T extends TObject[]>(types: readonly string[], variants: T, description: string) {
  return Type.Unsafe<Static<T[number]>>({
    type: 'object',
    required: ['type'],
    properties: { type: { type: 'string', enum: [...types] } },
    allOf: variants.map((v, i) => ({
      if: { properties: { type: { const: types[i] } }, required: ['type'] },
      // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then, never awaited
      then: JSON.parse(JSON.stringify(v)) as TSchema,
    })),
    description,
  });
}

export const Trigger = tagged(
  TRIGGER_TYPES,
  [ConditionTrigger, MetricThresholdTrigger, EventTrigger],
  doc(
    '`{type: "condition", expression}` | `{type: "metric_threshold", metric_id, operator: gt|gte|lt|lte, value}` |',
    '`{type: "event", event_name, count?: 1, within_days?: 1}`.',
  ),
);
export type Trigger = Static<typeof Trigger>;

export const Action = tagged(
  ['create_task', 'notify'],
  [CreateTaskAction, NotifyAction],
  doc(
    '`{type: "create_task", title, assignee: "owner"|<user id>|<user e-mail>, due_in_days?, description?}` |',
    '`{type: "notify", channel: slack|teams|email|webhook, target, message?}`.',
  ),
);
export type Action = Static<typeof Action>;

/** A playbook as PostgreSQL stores it; segment_ids and metric_ids are resolved when it is saved. */
export interface StoredPlaybook {
  id: string;
  name: string;
  trigger: Trigger;
  actions: Action[];
  enabled: boolean;
  segment_ids: string[];
  metric_ids: string[];
}

const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' });
const Actions = Type.Array(Action, { minItems: 1, maxItems: MAX_ACTIONS });

export const PlaybookCreate = Type.Object(
  {
    name: Name,
    trigger: Trigger,
    actions: Actions,
    enabled: Type.Optional(Type.Boolean({ default: true })),
  },
  { additionalProperties: false },
);
export type PlaybookCreate = Static<typeof PlaybookCreate>;

export const PlaybookPatch = Type.Object(
  {
    name: Type.Optional(Name),
    trigger: Type.Optional(Trigger),
    actions: Type.Optional(Actions),
    enabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type PlaybookPatch = Static<typeof PlaybookPatch>;

export const Playbook = Type.Object({
  id: Uuid,
  name: Type.String(),
  trigger: Trigger,
  actions: Type.Array(Action),
  enabled: Type.Boolean(),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const RunAction = Type.Object({
  customer_id: Uuid,
  type: StringEnum(['create_task', 'notify'] as const),
  status: StringEnum(['succeeded', 'failed', 'skipped'] as const),
  task_id: Type.Optional(Uuid),
  reason: Type.Optional(Type.String({ description: 'e.g. owner_not_found, integration_not_connected' })),
});

export const PlaybookRun = Type.Object({
  id: Uuid,
  playbook_id: Uuid,
  trigger_source: StringEnum(TRIGGER_SOURCES),
  dry_run: Type.Boolean(),
  started_at: Timestamp,
  finished_at: Nullable(Timestamp),
  evaluated: Type.Integer({ description: 'Live customers the trigger was evaluated for.' }),
  matched: Type.Array(Uuid, {
    description: `Customers for which the trigger held, in id order: the first ${RUN_LIST_CAP} (see matched_count).`,
  }),
  matched_count: Type.Integer({ description: 'How many customers matched in all.' }),
  actions: Type.Array(RunAction, {
    description: doc(
      'One entry per action per customer that fired (started matching), by customer id then action order:',
      `the first ${RUN_LIST_CAP} (see actions_count). Empty for a dry run.`,
    ),
  }),
  actions_count: Type.Integer({ description: 'How many action entries the run recorded in all.' }),
});

export const RunBody = Type.Object(
  { dry_run: Type.Optional(Type.Boolean({ default: false, description: 'Report matches, fire nothing.' })) },
  { additionalProperties: false },
);

export const RunListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);
