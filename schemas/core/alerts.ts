import Type, { type Static } from '#typebox';
import { Cursor, Nullable, Timestamp, Uuid } from './common.js';

/** Alerts (docs/analytics.md "Alerts"): unusual API key usage and sharp usage drops. */

export const ALERT_TYPES = ['api_key_usage_spike', 'usage_drop'] as const;
export const ALERT_STATUSES = ['open', 'acknowledged', 'resolved'] as const;

export const Alert = Type.Object({
  id: Uuid,
  type: Type.Union(ALERT_TYPES.map((x) => Type.Literal(x))),
  status: Type.Union(ALERT_STATUSES.map((x) => Type.Literal(x))),
  severity: Type.Union([Type.Literal('low'), Type.Literal('medium'), Type.Literal('high')]),
  customer_id: Nullable(Uuid),
  api_key_id: Nullable(Uuid),
  summary: Type.String(),
  details: Type.Record(Type.String(), Type.Unknown()),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const AlertListQuery = Type.Object(
  {
    type: Type.Optional(
      Type.String({ pattern: `^(${ALERT_TYPES.join('|')})$`, description: ALERT_TYPES.join(' or ') }),
    ),
    status: Type.Optional(
      Type.String({
        pattern: '^(open|acknowledged|resolved)(,(open|acknowledged|resolved))*$',
        description: 'One or more of open, acknowledged, resolved, comma-separated.',
      }),
    ),
    customer_id: Type.Optional(Uuid),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);

export const AlertPatch = Type.Object(
  {
    status: Type.Union([Type.Literal('acknowledged'), Type.Literal('resolved')], {
      description: 'open → acknowledged → resolved (or open → resolved); resolved is final.',
    }),
  },
  { additionalProperties: false },
);
export type AlertPatch = Static<typeof AlertPatch>;
