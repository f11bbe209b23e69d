import Type from '#typebox';
import { MAX_PROPERTIES_BYTES, SNAKE_CASE } from './ingest.js';

/** Ingestion surface B (`/v1/events`, bearer credentials). */
export const MAX_B_BATCH = 1000;
export const MAX_B_EVENT_NAME = 64;
export const MAX_EXTERNAL_ID = 128;
export const MAX_BACKFILL_AGE_MS = 2 * 365 * 24 * 3600_000;

/** SPEC.md "Events the service generates itself": callers may not send them on either surface. */
export const RESERVED_EVENT_NAMES: ReadonlySet<string> = new Set([
  'email_sent',
  'email_received',
  'meeting_held',
  'ticket_opened',
  'ticket_closed',
  'health_changed',
  'task_created',
  'task_completed',
]);

export const UsageEventB = Type.Object({
  customer_id: Type.String({
    minLength: 1,
    maxLength: 255,
    description: "The customer's service UUID; must exist (not deleted) in the workspace.",
  }),
  event_name: Type.String({
    minLength: 1,
    maxLength: MAX_B_EVENT_NAME,
    pattern: SNAKE_CASE,
    description:
      'snake_case, 1 to 64 characters; the names the service generates itself are refused (reserved_event_name).',
  }),
  user_email: Type.Optional(
    Type.String({ format: 'email', maxLength: 320, description: 'E-mail of the acting user.' }),
  ),
  user_external_id: Type.Optional(
    Type.String({ minLength: 1, maxLength: 255, description: "The acting user's id in the caller's system." }),
  ),
  timestamp: Type.Optional(
    Type.String({
      format: 'date-time',
      description:
        'ISO 8601 with time zone; default: time of receipt; at most 30 days old (backfill: 2 years); not in the ' +
        'future.',
    }),
  ),
  properties: Type.Optional(
    Type.Object(
      {},
      {
        additionalProperties: true,
        description: `Free-form JSON object, at most ${MAX_PROPERTIES_BYTES} bytes serialized.`,
      },
    ),
  ),
  external_id: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: MAX_EXTERNAL_ID,
      description:
        'Deduplication key: a later event with the same customer_id and external_id is silently ignored, forever.',
    }),
  ),
});

export const UsageBatchB = Type.Object({
  events: Type.Array(UsageEventB, { minItems: 1, maxItems: MAX_B_BATCH }),
});

/**
 * What fails the whole request (400): anything but 1 to 1000 items under `events`. Each item is then checked on its
 * own.
 */
export const BatchShapeB = Type.Object({
  events: Type.Array(Type.Unknown(), { minItems: 1, maxItems: MAX_B_BATCH }),
});

export const EVENT_B_ERROR_CODES = [
  'unknown_customer',
  'invalid_customer_id',
  'invalid_event_name',
  'reserved_event_name',
  'invalid_timestamp',
  'invalid_properties',
  'properties_too_large',
  'invalid_number',
  'invalid_external_id',
  'invalid_user_email',
  'invalid_user_external_id',
  'invalid_unicode',
  'invalid_event',
] as const;
export type EventBErrorCode = (typeof EVENT_B_ERROR_CODES)[number];

export const EventErrorB = Type.Object({
  index: Type.Integer({ minimum: 0, description: '0-based position in `events`.' }),
  code: Type.Unsafe<EventBErrorCode>({ type: 'string', enum: [...EVENT_B_ERROR_CODES] }),
  message: Type.String(),
});

export const EventsAccepted = Type.Object({
  accepted: Type.Integer({
    minimum: 0,
    description: 'Events taken, including duplicates of already recorded events (silently ignored, not stored again).',
  }),
  rejected: Type.Integer({ minimum: 0 }),
  errors: Type.Array(EventErrorB),
});

export const BackfillAccepted = Type.Object({
  job_id: Type.String({ format: 'uuid' }),
  status: Type.String({ description: '`queued`, or `succeeded` when nothing was left to store.' }),
  status_url: Type.String(),
  accepted: Type.Integer({ minimum: 0 }),
  rejected: Type.Integer({ minimum: 0 }),
  errors: Type.Array(EventErrorB),
});

export const EventsQuery = Type.Object(
  {
    customer_id: Type.Optional(Type.String({ format: 'uuid' })),
    event_name: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: SNAKE_CASE })),
    from: Type.Optional(Type.String({ format: 'date-time', description: 'Inclusive; default 7 days before `to`.' })),
    to: Type.Optional(Type.String({ format: 'date-time', description: 'Exclusive; default now.' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
  },
  { additionalProperties: false },
);

export const StoredEvent = Type.Object({
  event_id: Type.String({ format: 'uuid' }),
  customer_id: Type.String({ format: 'uuid' }),
  event_name: Type.String(),
  timestamp: Type.String({ format: 'date-time' }),
  received_at: Type.String({ format: 'date-time' }),
  surface: Type.String({ description: '`a` (/v1/ingest/events) or `b` (/v1/events and backfill).' }),
  external_id: Type.Union([Type.String(), Type.Null()]),
  user_id: Type.Union([Type.String(), Type.Null()]),
  user_email: Type.Union([Type.String(), Type.Null()]),
  user_external_id: Type.Union([Type.String(), Type.Null()]),
  properties: Type.Object({}, { additionalProperties: true }),
});

export const EventsPage = Type.Object({
  data: Type.Array(StoredEvent),
  next_cursor: Type.Union([Type.String(), Type.Null()]),
  has_more: Type.Boolean(),
});

export type UsageEventB = Type.Static<typeof UsageEventB>;
