import Type from '#typebox';

/** snake_case: lowercase letters and digits in words joined by single underscores, starting with a letter. */
export const SNAKE_CASE = '^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$';

export const MAX_USAGE_BATCH = 100;
export const MAX_BILLING_BATCH = 50;
/** 10 KB = 10,240 bytes of the properties object serialized as JSON (UTF-8). */
export const MAX_PROPERTIES_BYTES = 10 * 1024;
export const MAX_EVENT_AGE_MS = 30 * 24 * 3600_000;

export const UsageEventA = Type.Object({
  event_name: Type.String({
    minLength: 1,
    maxLength: 255,
    pattern: SNAKE_CASE,
    description: 'snake_case, 1 to 255 characters.',
  }),
  customer_id: Type.Optional(
    Type.String({ maxLength: 255, description: "The customer's service UUID. Wins over external_customer_id." }),
  ),
  external_customer_id: Type.Optional(
    Type.String({ minLength: 1, maxLength: 255, description: "The customer's identifier in the caller's system." }),
  ),
  external_source: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 64,
      default: 'internal',
      description: 'Source system of external_customer_id.',
    }),
  ),
  user_id: Type.Optional(Type.String({ maxLength: 255 })),
  product_id: Type.Optional(
    Type.String({
      format: 'uuid',
      description: 'Product attribution; wins over product_code. Unknown products are stored as account-level.',
    }),
  ),
  product_code: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  properties: Type.Optional(
    Type.Object(
      {},
      { additionalProperties: true, description: 'Free-form JSON object, at most 10,240 bytes serialized.' },
    ),
  ),
  timestamp: Type.Optional(
    Type.String({
      format: 'date-time',
      description: 'ISO 8601 with time zone; default: time of receipt; at most 30 days old.',
    }),
  ),
});

export const UsageBatchA = Type.Object({
  events: Type.Array(UsageEventA, { minItems: 1, maxItems: MAX_USAGE_BATCH }),
});

/** A string enum that validates as one `enum` keyword (clear errors) and types as the union. */
function StringEnum<T extends string>(values: readonly T[], opts: Record<string, unknown> = {}) {
  return Type.Unsafe<T>({ type: 'string', enum: [...values], ...opts });
}

export const BILLING_EVENT_TYPES = [
  'payment_failed',
  'payment_succeeded',
  'invoice_disputed',
  'dunning_attempt',
  'refund_issued',
] as const;
export const BILLING_STATUSES = ['pending', 'resolved', 'escalated'] as const;
const CURRENCIES = (Intl as unknown as { supportedValuesOf(k: string): string[] }).supportedValuesOf('currency');

export const BillingEvent = Type.Object({
  event_type: StringEnum(BILLING_EVENT_TYPES),
  customer_id: Type.String({
    format: 'uuid',
    description: "The customer's service UUID; external identifiers are not accepted.",
  }),
  amount: Type.Optional(Type.Number({ minimum: 0 })),
  currency: Type.Optional(Type.String({ enum: CURRENCIES, default: 'USD', description: 'ISO 4217 code, upper case.' })),
  status: Type.Optional(StringEnum(BILLING_STATUSES, { default: 'pending' })),
});

export const BillingBatch = Type.Object({
  events: Type.Array(BillingEvent, { minItems: 1, maxItems: MAX_BILLING_BATCH }),
});

export const EventError = Type.Object({
  index: Type.Integer({ minimum: 0 }),
  event_name: Type.String(),
  code: StringEnum([
    'unknown_customer',
    'unknown_external_customer',
    'invalid_customer_id',
    'invalid_timestamp',
    'properties_too_large',
    'invalid_properties',
    'invalid_number',
    'reserved_event_name',
  ]),
  message: Type.String(),
});

export const UsageAccepted = Type.Object({
  accepted: Type.Integer({ minimum: 0 }),
  rejected: Type.Integer({ minimum: 0 }),
  errors: Type.Array(EventError),
  message: Type.String(),
});

export const BillingAccepted = Type.Object({
  accepted: Type.Integer({ minimum: 0 }),
  skipped: Type.Integer({ minimum: 0 }),
  message: Type.String(),
});

export const ValidationDetail = Type.Object({
  detail: Type.Array(
    Type.Object({
      type: Type.String(),
      loc: Type.Array(Type.Union([Type.String(), Type.Integer()])),
      msg: Type.String(),
      input: Type.Unknown(),
    }),
  ),
});

export const AuthFailure = Type.Object({ detail: Type.String() });

export const RateLimited = Type.Object({
  detail: Type.Object({
    type: Type.String(),
    title: Type.String(),
    status: Type.Literal(429),
    detail: Type.String(),
    retry_after: Type.Integer(),
  }),
});

export const ServerFailure = Type.Object({
  type: Type.String(),
  title: Type.String(),
  status: Type.Integer(),
  detail: Type.String(),
});

export type UsageEventA = Type.Static<typeof UsageEventA>;
export type BillingEvent = Type.Static<typeof BillingEvent>;
