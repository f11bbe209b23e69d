import Type from '#typebox';
import { Nullable, Timestamp } from './common.js';

/** The sync status fields of GET /v1/integrations and the answer of POST /v1/integrations/{name}/sync. */

export const SyncStatusFields = {
  last_synced_at: Nullable(
    Type.String({
      format: 'date-time',
      description:
        'When the last sync of an e-mail or calendar connector completed; null before the first one and for ' +
        'the connectors that do not sync.',
    }),
  ),
  last_error: Nullable(
    Type.Object(
      {
        message: Type.String({ description: 'What failed, e.g. a scope the provider refused or a throttled sync.' }),
        at: Timestamp,
      },
      {
        description:
          "The connector's most recent failure and when it happened (a sync, or the reason of an `error` status); " +
          'kept after a later success: compare `at` with last_synced_at. Null when none.',
      },
    ),
  ),
  events_24h: Type.Record(Type.String(), Type.Integer({ minimum: 0 }), {
    description:
      'Events this connector produced in the last 24 hours, per event name (every event name of its category, ' +
      '0 when none): email_sent and email_received, meeting_held, ticket_opened and ticket_closed.',
  }),
};

export const SyncAnswer = Type.Object({
  name: Type.String(),
  requested_at: Timestamp,
  running: Type.Boolean({
    description: 'A sync of this connection was already under way: another one follows it.',
  }),
});
