import Type, { type Static } from '#typebox';
import { Nullable, Timestamp, Uuid } from './common.js';

/** Outbound webhooks (docs/webhooks.md): subscriptions, event kinds and delivery attempts. */

export const WEBHOOK_EVENT_TYPES = [
  'customer.created',
  'customer.updated',
  'customer.deleted',
  'health.changed',
  'task.created',
  'task.completed',
  'playbook.run.completed',
  'playbook.notification',
  'job.completed',
  'alert.created',
  'integration.connected',
  'integration.disconnected',
  'ping',
] as const;

const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  description:
    'Absolute https:// URL (http:// only where WEBHOOK_ALLOW_HTTP is set); hosts resolving to loopback, private, ' +
    'link-local or metadata addresses are refused unless WEBHOOK_ALLOW_PRIVATE is set.',
});
const Events = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
  minItems: 1,
  maxItems: WEBHOOK_EVENT_TYPES.length,
  uniqueItems: true,
  description: `Event kinds (${WEBHOOK_EVENT_TYPES.join(', ')}) or ["*"] for all of them (ping excepted).`,
});
const Description = Type.String({ maxLength: 500 });

export const WebhookSubscription = Type.Object({
  id: Uuid,
  url: Type.String(),
  events: Type.Array(Type.String()),
  description: Nullable(Type.String()),
  enabled: Type.Boolean(),
  disabled_reason: Nullable(
    Type.String({
      description:
        '`gone` (the endpoint answered 410) or `failing` (every attempt failed for 5 days) when the service ' +
        'disabled it; null otherwise.',
    }),
  ),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const WebhookSubscriptionCreated = Type.Intersect([
  WebhookSubscription,
  Type.Object({
    secret: Type.String({ description: 'The signing secret (`whsec_…`), shown only in this answer.' }),
  }),
]);

export const WebhookSubscriptionCreate = Type.Object(
  {
    url: Url,
    events: Events,
    description: Type.Optional(Nullable(Description)),
    enabled: Type.Optional(Type.Boolean({ description: 'Default true.' })),
  },
  { additionalProperties: false },
);
export type WebhookSubscriptionCreate = Static<typeof WebhookSubscriptionCreate>;

export const WebhookSubscriptionPatch = Type.Object(
  {
    url: Type.Optional(Url),
    events: Type.Optional(Events),
    description: Type.Optional(Nullable(Description)),
    enabled: Type.Optional(Type.Boolean({ description: 'true re-enables a subscription the service disabled.' })),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type WebhookSubscriptionPatch = Static<typeof WebhookSubscriptionPatch>;

export const WebhookSecret = Type.Object({
  secret: Type.String({
    description: 'The new signing secret; the previous one keeps signing too (a second signature) for 24 hours.',
  }),
});

export const WebhookAttempt = Type.Object({
  id: Uuid,
  message_id: Type.String({ description: 'The `webhook-id` header: the same for every attempt of a message.' }),
  event_type: Type.String(),
  attempt: Type.Integer({ minimum: 1 }),
  status: Type.Union([Type.Literal('succeeded'), Type.Literal('failed'), Type.Literal('pending')], {
    description: '`pending` only while the attempt is in flight.',
  }),
  response_status: Nullable(Type.Integer()),
  duration_ms: Nullable(Type.Integer()),
  error: Nullable(Type.String()),
  created_at: Timestamp,
  next_attempt_at: Nullable(Timestamp),
});

export const WebhookTestSent = Type.Object({
  message_id: Uuid,
  status: Type.Literal('pending'),
});
