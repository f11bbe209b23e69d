import Type, { type Static } from '#typebox';
import { Nullable, Timestamp, Uuid } from './common.js';
import { SyncStatusFields } from './integration-sync.js';

/** Integrations (docs/integrations.md): the connector catalog, connections and pushed activity. */

const NAMES = ['gmail', 'outlook', 'google_calendar', 'outlook_calendar', 'slack', 'teams', 'zendesk', 'intercom'];

export const IntegrationParams = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 64, description: NAMES.join(', ') }),
});

export const Integration = Type.Object({
  name: Type.String(),
  category: Type.Union([
    Type.Literal('email'),
    Type.Literal('calendar'),
    Type.Literal('chat'),
    Type.Literal('ticketing'),
  ]),
  status: Type.Union([
    Type.Literal('disconnected'),
    Type.Literal('pending'),
    Type.Literal('connected'),
    Type.Literal('error'),
  ]),
  configured: Type.Boolean({ description: 'Whether the service has an OAuth client for this provider.' }),
  connected_at: Nullable(Timestamp),
  account: Nullable(Type.String({ description: 'The provider account, when the provider names it.' })),
  error: Nullable(
    Type.String({
      description:
        'Why the status is `error`: a denied or expired authorization, a refused code exchange, or a token ' +
        'refresh the provider refused (`token refresh failed: …`); null otherwise.',
    }),
  ),
  connection_id: Nullable(Uuid),
  activities: Type.Integer({ description: 'Pushed activities turned into events.' }),
  unmatched_activities: Type.Integer({ description: 'Pushed activities whose participants matched no customer.' }),
  ...SyncStatusFields,
});

export const IntegrationList = Type.Object({ data: Type.Array(Integration) });

export const ConnectAnswer = Type.Object({
  authorization_url: Type.String(),
  state: Type.String(),
  expires_at: Timestamp,
});

export const CallbackQuery = Type.Object(
  {
    code: Type.Optional(Type.String({ maxLength: 4096 })),
    state: Type.Optional(Type.String({ maxLength: 512 })),
    error: Type.Optional(Type.String({ maxLength: 256 })),
    error_description: Type.Optional(Type.String({ maxLength: 2048 })),
  },
  { additionalProperties: true },
);

export const EventsParams = Type.Object({ name: Type.String({ minLength: 1, maxLength: 64 }), connection_id: Uuid });

export const Activity = Type.Object(
  {
    id: Type.String({
      minLength: 1,
      maxLength: 255,
      description: "The provider's id of the activity (deduplication).",
    }),
    type: Type.String({
      description:
        'email_sent, email_received (email); meeting_held (calendar); ticket_opened, ticket_closed (ticketing).',
    }),
    occurred_at: Timestamp,
    participants: Type.Array(Type.String({ format: 'email', maxLength: 320 }), { minItems: 1, maxItems: 100 }),
    subject: Type.Optional(Nullable(Type.String({ maxLength: 1000 }))),
  },
  { additionalProperties: false },
);

export const ActivityPush = Type.Object(
  { activities: Type.Array(Activity, { minItems: 1, maxItems: 1000 }) },
  { additionalProperties: false },
);
export type ActivityPush = Static<typeof ActivityPush>;

export const ActivityAnswer = Type.Object({
  received: Type.Integer(),
  duplicates: Type.Integer({
    description: 'Activities already received (the same id, earlier or in this same request): nothing new stored.',
  }),
  unmatched: Type.Integer({ description: 'New activities whose participants matched no customer: counted, dropped.' }),
  events: Type.Integer({ description: 'Events generated: one per new activity and distinct matched customer.' }),
});
