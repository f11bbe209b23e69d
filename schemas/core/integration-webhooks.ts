import Type, { type Static } from '#typebox';
import { Uuid } from './common.js';

/**
 * What the ticketing providers deliver to their webhooks, in their own documented shapes
 * (docs/integrations.md): only the members the service reads are described; the rest is allowed
 * and ignored, as providers add members over time.
 */

export const ConnectQuery = Type.Object(
  {
    subdomain: Type.Optional(
      Type.String({
        maxLength: 63,
        description: 'zendesk: the account, as in https://{subdomain}.zendesk.com (required for zendesk).',
      }),
    ),
  },
  // Other parameters were ignored before this one existed; they still are.
  { additionalProperties: true },
);

export const WebhookParams = Type.Object({ connection_id: Uuid });

const Loose = { additionalProperties: true } as const;

/** A Zendesk event webhook request (ticket events: `zen:event-type:ticket.created`, `….status_changed`). */
export const ZendeskEvent = Type.Object(
  {
    type: Type.String({ maxLength: 200, description: 'e.g. zen:event-type:ticket.created' }),
    id: Type.String({ minLength: 1, maxLength: 200, description: "The event's id." }),
    time: Type.Optional(Type.String({ maxLength: 64 })),
    account_id: Type.Optional(Type.Integer()),
    subject: Type.Optional(Type.String({ maxLength: 200, description: 'zen:ticket:{id}' })),
    detail: Type.Optional(
      Type.Object(
        {
          id: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Integer()])),
          requester_id: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Integer()])),
          status: Type.Optional(Type.String({ maxLength: 64 })),
          created_at: Type.Optional(Type.String({ maxLength: 64 })),
          updated_at: Type.Optional(Type.String({ maxLength: 64 })),
        },
        Loose,
      ),
    ),
    event: Type.Optional(Type.Object({ current: Type.Optional(Type.Unknown()) }, Loose)),
  },
  Loose,
);
export type ZendeskEvent = Static<typeof ZendeskEvent>;

/** Intercom's notification envelope (`type: notification_event`, a topic, the object in data.item). */
export const IntercomNotification = Type.Object(
  {
    type: Type.Literal('notification_event'),
    id: Type.Optional(Type.String({ maxLength: 200 })),
    topic: Type.String({ maxLength: 200, description: 'e.g. conversation.user.created, conversation.admin.closed' }),
    app_id: Type.Optional(Type.String({ maxLength: 200 })),
    created_at: Type.Integer({ description: 'When Intercom created the notification (Unix seconds).' }),
    data: Type.Object({ item: Type.Object({}, Loose) }, Loose),
  },
  Loose,
);
export type IntercomNotification = Static<typeof IntercomNotification>;

export const WebhookAnswer = Type.Object({
  received: Type.Integer({ description: 'Ticket activities the delivery carried (0: a topic that produces none).' }),
  duplicates: Type.Integer({ description: 'Already stored from an earlier delivery or the backfill.' }),
  unmatched: Type.Integer({ description: "New activities whose requester's e-mail matched no customer." }),
  events: Type.Integer({ description: 'Events generated (ticket_opened, ticket_closed).' }),
});
