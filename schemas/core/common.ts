import Type, { type TSchema } from '#typebox';

/** A string enum that validates as one `enum` keyword (clear errors) and types as the union. */
export function StringEnum<T extends string>(values: readonly T[], opts: Record<string, unknown> = {}) {
  return Type.Unsafe<T>({ type: 'string', enum: [...values], ...opts });
}

export const Nullable = <T extends TSchema>(s: T) => Type.Union([s, Type.Null()]);

export const Uuid = Type.String({ format: 'uuid' });
export const Timestamp = Type.String({ format: 'date-time' });
export const DateOnly = Type.String({ format: 'date', description: 'YYYY-MM-DD' });

export const FieldError = Type.Object({
  field: Type.String({
    description: 'JSON pointer-like path of the offending field, e.g. `customers[3].arr`, or the query parameter name.',
  }),
  code: Type.String({ description: 'Machine-readable reason, e.g. `required`, `invalid_type`, `must_be_positive`.' }),
  message: Type.String(),
});

/** RFC 7807 problem document: every error of the core API. */
export const Problem = Type.Object(
  {
    type: Type.String({ format: 'uri', description: '`{base_url}/errors/<error_code>`' }),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    instance: Type.String({ description: 'Request path.' }),
    trace_id: Type.String(),
    errors: Type.Optional(Type.Array(FieldError, { description: 'Validation errors only.' })),
  },
  { additionalProperties: true },
);

export const Page = <T extends TSchema>(item: T) =>
  Type.Object({
    data: Type.Array(item),
    next_cursor: Nullable(Type.String({ description: 'Opaque; pass as `cursor` to get the next page.' })),
    has_more: Type.Boolean(),
  });

export const Limit = Type.Integer({ minimum: 1, maximum: 200, default: 50 });
export const Cursor = Type.String({ minLength: 1, maxLength: 512, description: 'Opaque cursor from `next_cursor`.' });
export const PageQuery = Type.Object(
  { limit: Type.Optional(Limit), cursor: Type.Optional(Cursor) },
  { additionalProperties: false },
);

export const IdParams = Type.Object({ id: Uuid });
