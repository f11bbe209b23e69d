import { SegmentRef } from './segments.js';
import { Task } from './tasks.js';
import Type from '#typebox';
import { CurrentHealth } from './health.js';
import { DateOnly, Limit, Cursor, Nullable, Page, StringEnum, Timestamp, Uuid } from './common.js';

export const CUSTOMER_STATUSES = ['active', 'trial', 'churned', 'paused'] as const;
export const HEALTH_STATUSES = ['healthy', 'neutral', 'at_risk'] as const;
export const MAX_BULK_IMPORT = 1000;

const name = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' });
const emailDomain = Type.String({
  format: 'hostname',
  minLength: 1,
  maxLength: 253,
  description: 'Domain of the customer, e.g. `acme.com`; full-text searchable.',
});
const arr = Type.Number({
  exclusiveMinimum: 0,
  maximum: 1e13,
  format: 'positive-cents',
  description: 'Annual recurring revenue; must be positive. Stored with 2 decimals: at least 0.005 (rounds to 0.01).',
});
const ownerEmail = Type.String({ format: 'email', maxLength: 320 });
const status = StringEnum(CUSTOMER_STATUSES);
const renewalDate = Type.String({
  format: 'date',
  description: 'YYYY-MM-DD; a date before today (UTC) is rejected with 422.',
});
const customFields = Type.Object(
  {},
  {
    additionalProperties: true,
    maxProperties: 100,
    propertyNames: { minLength: 1 },
    description:
      'Free-form key/value map; keys are not empty, and the request body nests at most 32 levels of objects and ' +
      'arrays. PATCH merges the keys sent; a key sent as null is removed.',
  },
);
const externalId = Type.String({
  minLength: 1,
  maxLength: 128,
  description: "Identifier in the workspace's own system.",
});
const externalSource = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: '^[a-z0-9][a-z0-9_.-]*$',
  description: 'Source system of external_id; default `internal`. Each source keeps its own id space.',
});

export const CustomerCreate = Type.Object(
  {
    name,
    email_domain: Type.Optional(emailDomain),
    arr: Type.Optional(arr),
    owner_email: Type.Optional(ownerEmail),
    status: Type.Optional({ ...status, default: 'active' }),
    renewal_date: Type.Optional(renewalDate),
    custom_fields: Type.Optional(customFields),
    external_id: Type.Optional(externalId),
    external_source: Type.Optional(externalSource),
  },
  { additionalProperties: false },
);

export const CustomerPatch = Type.Object(
  {
    name: Type.Optional(name),
    email_domain: Type.Optional(Nullable(emailDomain)),
    arr: Type.Optional(Nullable(arr)),
    owner_email: Type.Optional(Nullable(ownerEmail)),
    status: Type.Optional(status),
    renewal_date: Type.Optional(Nullable(renewalDate)),
    custom_fields: Type.Optional(customFields),
    external_id: Type.Optional(Nullable(externalId)),
    external_source: Type.Optional(externalSource),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const Customer = Type.Object({
  id: Uuid,
  tenant_id: Uuid,
  name: Type.String(),
  email_domain: Nullable(Type.String()),
  arr: Nullable(Type.Number()),
  owner_email: Nullable(Type.String()),
  status,
  renewal_date: Nullable(DateOnly),
  custom_fields: Type.Object({}, { additionalProperties: true }),
  external_id: Nullable(Type.String()),
  external_source: Type.String(),
  health_status: Nullable(
    StringEnum(HEALTH_STATUSES, {
      description: 'Status of the current health score; null until the customer is first scored.',
    }),
  ),
  created_at: Timestamp,
  updated_at: Timestamp,
  deleted_at: Type.Optional(Nullable(Timestamp)),
});

export const CustomerDetail = Type.Intersect([
  Customer,
  Type.Object({
    health: CurrentHealth,
    renewal: Type.Object({
      renewal_date: Nullable(DateOnly),
      days_until_renewal: Nullable(Type.Integer()),
      arr: Nullable(Type.Number()),
    }),
    segments: Type.Array(SegmentRef, {
      description: 'The segments the customer is in now, by name (their rules evaluated at this request).',
    }),
    pending_tasks: Type.Array(Task, {
      description:
        'The pending and in_progress tasks of this customer, soonest due first (no due date last), at most 20.',
    }),
  }),
]);

export const CustomerList = Page(Customer);

export const CustomerListQuery = Type.Object(
  {
    status: Type.Optional(
      Type.String({
        pattern: '^(active|trial|churned|paused)(,(active|trial|churned|paused))*$',
        description: 'One or more of active, trial, churned, paused, comma-separated.',
      }),
    ),
    owner_id: Type.Optional(Uuid),
    segment_id: Type.Optional(
      Type.String({
        format: 'uuid',
        description:
          'Members of the segment (GET /v1/segments), its rules evaluated now. A segment the workspace does not have ' +
          '→ 400 `validation_failed` naming `segment_id`.',
      }),
    ),
    health_status: Type.Optional(
      Type.String({
        pattern: '^(healthy|neutral|at_risk)(,(healthy|neutral|at_risk))*$',
        description:
          'One or more of healthy, neutral, at_risk, comma-separated, matched against the current health ' +
          'score; customers never scored match none.',
      }),
    ),
    min_arr: Type.Optional(Type.Number({ minimum: 0 })),
    max_arr: Type.Optional(Type.Number({ minimum: 0 })),
    renewal_within_days: Type.Optional(Type.Integer({ enum: [30, 60, 90] })),
    q: Type.Optional(
      Type.String({ minLength: 1, maxLength: 200, description: 'Full-text (prefix) search on name and email_domain.' }),
    ),
    limit: Type.Optional(Limit),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);

export const DeleteQuery = Type.Object(
  {
    hard: Type.Optional(Type.Boolean({ description: 'Permanent removal; requires `admin:*`.' })),
  },
  { additionalProperties: false },
);

// Contacts
const e164 = Type.String({
  pattern: '^\\+[1-9][0-9]{6,14}$',
  description: 'International format E.164, e.g. +4915112345678.',
});
export const ContactCreate = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' }),
    email: Type.Optional(Type.String({ format: 'email', maxLength: 320 })),
    title: Type.Optional(Type.String({ maxLength: 200 })),
    is_champion: Type.Optional(Type.Boolean({ default: false })),
    whatsapp_number: Type.Optional(e164),
  },
  { additionalProperties: false },
);

export const Contact = Type.Object({
  id: Uuid,
  customer_id: Uuid,
  name: Type.String(),
  email: Nullable(Type.String()),
  title: Nullable(Type.String()),
  is_champion: Type.Boolean(),
  whatsapp_number: Nullable(Type.String()),
  created_at: Timestamp,
});
export const ContactList = Page(Contact);

// Bulk import and jobs
export const IMPORT_MODES = ['create_or_update', 'create_only', 'update_only'] as const;
export const CONFLICT_RESOLUTIONS = ['skip', 'abort'] as const;

export const BulkImportRow = Type.Object(
  {},
  {
    additionalProperties: true,
    description: 'A customer as in POST /v1/customers; validated row by row, errors reported in the job.',
  },
);
export const BulkImport = Type.Object(
  {
    customers: Type.Array(BulkImportRow, { minItems: 1, maxItems: MAX_BULK_IMPORT }),
    mode: Type.Optional(
      StringEnum(IMPORT_MODES, {
        default: 'create_or_update',
        description:
          'create_or_update: a row whose (external_source, external_id) exists updates it, others are created; ' +
          'create_only: existing matches are conflicts; update_only: rows without a match are conflicts.',
      }),
    ),
    conflict_resolution: Type.Optional(
      StringEnum(CONFLICT_RESOLUTIONS, {
        default: 'skip',
        description:
          'skip: a row that is invalid or conflicts is recorded in the job errors and the rest proceed; abort: the ' +
          'first such row fails the job and nothing is written.',
      }),
    ),
  },
  { additionalProperties: false },
);

export const BulkImportAccepted = Type.Object({
  job_id: Uuid,
  status: Type.Literal('queued'),
  status_url: Type.String(),
});

export const JOB_STATUSES = ['queued', 'running', 'succeeded', 'failed'] as const;
export const Job = Type.Object({
  id: Uuid,
  type: Type.String({ description: '`customers.bulk_import` or `events.backfill`' }),
  status: StringEnum(JOB_STATUSES),
  progress: Type.Object({
    total: Type.Integer(),
    processed: Type.Integer(),
    percent: Type.Integer({ minimum: 0, maximum: 100 }),
  }),
  counts: Type.Record(Type.String(), Type.Integer(), {
    description:
      'Bulk import: created, updated, skipped, failed. Backfill: accepted, rejected, duplicates (silently ignored, ' +
      'counted in accepted), stored (rows written to the event store); duplicates and stored are final once the job ' +
      'has succeeded.',
  }),
  errors: Type.Array(
    Type.Object({ index: Type.Integer(), field: Nullable(Type.String()), code: Type.String(), message: Type.String() }),
    { description: 'Per-row errors (first 1000).' },
  ),
  error: Nullable(Type.String({ description: 'Why the whole job failed, if it did.' })),
  params: Type.Object(
    {
      mode: Type.Optional(StringEnum(IMPORT_MODES)),
      conflict_resolution: Type.Optional(StringEnum(CONFLICT_RESOLUTIONS)),
    },
    { description: 'Bulk import only; `{}` for a backfill.' },
  ),
  created_at: Timestamp,
  started_at: Nullable(Timestamp),
  finished_at: Nullable(Timestamp),
});
