import Type, { type Static } from '#typebox';
import { Nullable, StringEnum, Timestamp, Uuid } from './common.js';

/**
 * Segments: a named set of customers defined by rules over customer fields. The rules' fields,
 * ops and values are checked by lib/segments/compile.ts (`segmentRuleErrors`), which names the
 * offending rule; the schema only fixes the envelope, so an unknown field or op is reported as
 * such (400 naming `rules[i].field` / `rules[i].op`) rather than as a generic schema mismatch.
 */

export const SEGMENT_MATCH = ['all', 'any'] as const;
/** Segments per workspace: each is compiled into the customer detail's one membership statement. */
export const MAX_SEGMENTS = 200;

const Name = Type.String({ minLength: 1, maxLength: 100, pattern: '\\S' });
const Description = Type.String({ maxLength: 2000 });

export const SegmentRule = Type.Object(
  {
    field: Type.String({
      description:
        'status, arr, owner_email, email_domain, renewal_date, days_to_renewal, health_score, health_status or ' +
        'custom_fields.<key>.',
    }),
    op: Type.String({ description: 'eq, neq, gt, gte, lt, lte, contains, in.' }),
    value: Type.Unknown({ description: 'A string, number, boolean or date (YYYY-MM-DD) by field; an array for `in`.' }),
  },
  { additionalProperties: false },
);

const Rules = Type.Array(SegmentRule, { maxItems: 50 });

export const Segment = Type.Object({
  id: Uuid,
  name: Type.String(),
  description: Nullable(Type.String()),
  rules: Type.Array(SegmentRule),
  match: StringEnum(SEGMENT_MATCH),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const SegmentCreate = Type.Object(
  {
    name: Name,
    description: Type.Optional(Nullable(Description)),
    rules: Rules,
    match: Type.Optional(StringEnum(SEGMENT_MATCH, { description: 'Default `all`.' })),
  },
  { additionalProperties: false },
);
export type SegmentCreate = Static<typeof SegmentCreate>;

export const SegmentPatch = Type.Object(
  {
    name: Type.Optional(Name),
    description: Type.Optional(Nullable(Description)),
    rules: Type.Optional(Rules),
    match: Type.Optional(StringEnum(SEGMENT_MATCH)),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type SegmentPatch = Static<typeof SegmentPatch>;

/** How the customer detail names the segments the customer is in. */
export const SegmentRef = Type.Object({ id: Uuid, name: Type.String() });
