import Type from '#typebox';
import { Cursor, Limit, Nullable, Timestamp, Uuid } from './common.js';

/** Erasure records (docs/erasure.md): the proof that a removed customer's data went from every store. */

const Counts = (store: string) =>
  Type.Object(
    {
      total: Type.Integer({ minimum: 0, description: `Rows removed from ${store}, all tables together.` }),
      tables: Type.Record(Type.String(), Type.Integer({ minimum: 0 }), {
        description: 'Rows removed per table (ClickHouse: counted before each mutation, late arrivals added).',
      }),
    },
    { additionalProperties: false },
  );

export const Erasure = Type.Object(
  {
    customer_id: Uuid,
    reason: Type.Union([Type.Literal('hard_delete'), Type.Literal('trash_purge')], {
      description: '`hard_delete`: DELETE /v1/customers/{id}?hard=true; `trash_purge`: 30 days in the trash.',
    }),
    status: Type.Union([Type.Literal('queued'), Type.Literal('running'), Type.Literal('completed')]),
    requested_at: Timestamp,
    started_at: Nullable(Timestamp),
    completed_at: Nullable(Timestamp),
    rows_removed: Type.Object(
      { clickhouse: Counts('ClickHouse'), postgres: Counts('PostgreSQL') },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

export const ErasureListQuery = Type.Object(
  {
    status: Type.Optional(
      Type.String({
        pattern: '^(queued|running|completed)(,(queued|running|completed))*$',
        description: 'One or more of queued, running, completed, comma-separated.',
      }),
    ),
    limit: Type.Optional(Limit),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);

export const ErasureParams = Type.Object({ customer_id: Uuid });
