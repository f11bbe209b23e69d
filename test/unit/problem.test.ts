import t from '#tap';
import Type from '#typebox';
import { ApiError, ERRORS, fieldErrors, problemBody } from '../../lib/problem.js';
import { compileBody, compileQuery } from '../../schemas/core/validate.js';

// The problem+json `errors[]` of the core API and surface B: a field path a client can act on, a stable code.

const Body = Type.Object(
  {
    name: Type.String({ minLength: 1, pattern: '\\S' }),
    arr: Type.Optional(Type.Number({ exclusiveMinimum: 0, format: 'positive-cents' })),
    owner_id: Type.Optional(Type.String({ format: 'uuid' })),
    renewal_date: Type.Optional(Type.String({ format: 'date' })),
    emails: Type.Optional(Type.Array(Type.String({ format: 'email' }), { maxItems: 2 })),
    custom_fields: Type.Optional(
      Type.Object(
        { tier: Type.Optional(Type.String({ maxLength: 3 })) },
        { additionalProperties: true, propertyNames: { minLength: 1 } },
      ),
    ),
    status: Type.Optional(Type.Union([Type.Literal('active'), Type.Literal('churned')])),
  },
  { additionalProperties: false },
);
const body = compileBody(Body);

function errorsOf(value: unknown, prefix?: string) {
  if (body(value)) throw new Error(`expected ${JSON.stringify(value)} to be invalid`);
  return fieldErrors(body.errors, prefix);
}
const codes = (es: ReturnType<typeof fieldErrors>) => es.map((e) => [e.field, e.code]);

t.test('fields are named as a client writes them: dotted keys, [index] for arrays', async (t) => {
  t.same(
    codes(
      errorsOf({
        name: 'Acme',
        emails: ['a@example.com', 'nope'],
        custom_fields: { tier: 'platinum' },
        owner_id: '0190a000-0000-7000-8000-00000000000',
        renewal_date: '2026-02-30',
      }),
    ),
    [
      ['owner_id', 'invalid_uuid'],
      ['renewal_date', 'invalid_date'],
      ['emails[1]', 'invalid_email'],
      ['custom_fields.tier', 'too_long'],
    ],
  );
});

t.test('required, unknown and empty fields', async (t) => {
  const es = errorsOf({ nmae: 'Acme' });
  t.same(es, [
    { field: 'name', code: 'required', message: 'name is required' },
    { field: 'nmae', code: 'unknown_field', message: 'nmae is not a known field' },
  ]);
  t.same(
    errorsOf({ name: '' })[0],
    { field: 'name', code: 'required', message: 'name must not be empty' },
    'an empty string counts as missing',
  );
  t.same(codes(errorsOf({ name: '   ' })), [['name', 'invalid_format']]);
  t.same(codes(errorsOf({ name: 'x', custom_fields: { '': 1 } })), [['custom_fields', 'invalid_key']]);
});

t.test('amounts: what the store would round to zero is not positive', async (t) => {
  t.same(errorsOf({ name: 'x', arr: 0.001 }), [
    {
      field: 'arr',
      code: 'must_be_positive',
      message: 'arr must be positive: at least 0.005, which is stored rounded to 0.01',
    },
  ]);
  t.same(codes(errorsOf({ name: 'x', arr: -5 })), [['arr', 'must_be_positive']]);
});

t.test('the body itself: wrong type', async (t) => {
  t.same(errorsOf([1, 2]), [{ field: '', code: 'invalid_type', message: 'body must be an object' }]);
});

t.test('unions report the branch errors, not the union keyword', async (t) => {
  const es = errorsOf({ name: 'x', status: 'gone' });
  t.ok(es.length > 0);
  t.ok(
    es.every((e) => e.field === 'status' && e.code === 'invalid_value'),
    'one field, one code',
  );
  t.equal(es.length, 1, 'a field and code pair appears once');
});

t.test('a prefix names the root: query parameters and nested documents', async (t) => {
  const query = compileQuery(Type.Object({ limit: Type.Integer({ minimum: 1, maximum: 200 }) }));
  t.notOk(query({ limit: '500' }));
  t.same(fieldErrors(query.errors), [{ field: 'limit', code: 'too_large', message: 'limit must be at most 200' }]);
  t.same(codes(errorsOf({ name: 'x', custom_fields: { tier: 'gold!' } }, 'definition')), [
    ['definition.custom_fields.tier', 'too_long'],
  ]);
  t.same(fieldErrors(null), []);
});

t.test('an error becomes one problem+json document', async (t) => {
  const err = new ApiError('validation_failed', 'The request is invalid; see errors.', [
    { field: 'name', code: 'required', message: 'name is required' },
  ]);
  t.equal(err.status, 400);
  t.same(problemBody('https://api.example.com', err, '/v1/customers', 'trace-1'), {
    type: 'https://api.example.com/errors/validation_failed',
    title: ERRORS.validation_failed.title,
    status: 400,
    detail: 'The request is invalid; see errors.',
    instance: '/v1/customers',
    trace_id: 'trace-1',
    errors: [{ field: 'name', code: 'required', message: 'name is required' }],
  });
});
