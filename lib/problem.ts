import type { ErrorObject } from '../schemas/core/validate.js';

export interface FieldError {
  field: string;
  code: string;
  message: string;
}

/**
 * Every problem+json error code of the bearer-authenticated surfaces (the core API and ingestion
 * surface B): status and title. The wire shape is made in one place (problemBody below).
 */
export const ERRORS = {
  validation_failed: [400, 'Validation failed'],
  malformed_json: [400, 'Malformed JSON'],
  invalid_cursor: [400, 'Invalid cursor'],
  invalid_request: [400, 'Invalid request'],
  invalid_grant: [400, 'Invalid grant'],
  invalid_scope: [400, 'Invalid scope'],
  unsupported_grant_type: [400, 'Unsupported grant type'],
  unauthenticated: [401, 'Unauthenticated'],
  invalid_client: [401, 'Invalid client'],
  token_expired: [401, 'Token expired'],
  token_revoked: [401, 'Token revoked'],
  insufficient_scope: [403, 'Insufficient scope'],
  insufficient_role: [403, 'Insufficient role'],
  ip_not_allowed: [403, 'IP address not allowed'],
  not_found: [404, 'Not found'],
  method_not_allowed: [405, 'Method not allowed'],
  conflict: [409, 'Conflict'],
  last_admin: [409, 'Last admin'],
  payload_too_large: [413, 'Payload too large'],
  unsupported_media_type: [415, 'Unsupported media type'],
  renewal_date_in_past: [422, 'Renewal date in the past'],
  idempotency_key_reused: [422, 'Idempotency key reused with a different request'],
  idempotency_key_in_use: [409, 'Idempotency key in use'],
  unprocessable: [422, 'Unprocessable request'],
  rate_limited: [429, 'Too many requests'],
  daily_quota_exceeded: [429, 'Daily event quota exceeded'],
  internal_error: [500, 'Internal server error'],
  service_unavailable: [503, 'Service unavailable'],
  scorer_unavailable: [503, 'Health scorer unavailable'],
  unknown_event: [422, 'Unknown event'],
  immutable_field: [422, 'Immutable field'],
  slug_taken: [409, 'Slug taken'],
  metric_in_use: [409, 'Metric in use'],
  widget_limit_reached: [409, 'Widget limit reached'],
  proposal_closed: [409, 'Proposal closed'],
} as const satisfies Record<string, readonly [number, string]>;

export type ErrorCode = keyof typeof ERRORS;

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly errors?: FieldError[],
    readonly headers: Array<[string, string]> = [],
    /** Extra members of the problem document (e.g. OAuth's `error`). */
    readonly extra?: Record<string, unknown>,
  ) {
    super(message);
    this.status = ERRORS[code][0];
  }
}

export const notFound = (what = 'Resource') => new ApiError('not_found', `${what} not found`);
export const invalid = (errors: FieldError[], message = 'The request is invalid; see errors.') =>
  new ApiError('validation_failed', message, errors);

function pointer(instancePath: string, prefix: string): string {
  const parts = instancePath
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  let out = prefix;
  for (const p of parts) out += /^\d+$/.test(p) ? `[${p}]` : out === '' ? p : `.${p}`;
  return out;
}

/** Ajv errors → `errors[]` items; `prefix` names the root (empty for a body, the parameter for a query). */
export function fieldErrors(errors: ErrorObject[] | null | undefined, prefix = ''): FieldError[] {
  const out: FieldError[] = [];
  const seen = new Set<string>();
  for (const e of errors ?? []) {
    // The failing key's own errors: the propertyNames error that follows names the key.
    if ((e as { propertyName?: string }).propertyName !== undefined) continue;
    let field = pointer(e.instancePath, prefix);
    let code: string;
    let message: string;
    switch (e.keyword) {
      case 'required':
        field = field ? `${field}.${e.params.missingProperty}` : String(e.params.missingProperty);
        code = 'required';
        message = `${field} is required`;
        break;
      case 'additionalProperties':
        field = field ? `${field}.${e.params.additionalProperty}` : String(e.params.additionalProperty);
        code = 'unknown_field';
        message = `${field} is not a known field`;
        break;
      case 'type':
        code = 'invalid_type';
        message = `${field || 'body'} must be ${/^[aeiou]/.test(String(e.params.type)) ? 'an' : 'a'} ${e.params.type}`;
        break;
      case 'exclusiveMinimum':
        code = e.params.limit === 0 ? 'must_be_positive' : 'too_small';
        message =
          e.params.limit === 0 ? `${field} must be positive` : `${field} must be greater than ${e.params.limit}`;
        break;
      case 'minimum':
        code = 'too_small';
        message = `${field} must be at least ${e.params.limit}`;
        break;
      case 'maximum':
        code = 'too_large';
        message = `${field} must be at most ${e.params.limit}`;
        break;
      case 'minLength':
        code = e.params.limit === 1 ? 'required' : 'too_short';
        message =
          e.params.limit === 1
            ? `${field} must not be empty`
            : `${field} must have at least ${e.params.limit} characters`;
        break;
      case 'maxLength':
        code = 'too_long';
        message = `${field} must have at most ${e.params.limit} characters`;
        break;
      case 'minItems':
        code = 'too_few_items';
        message = `${field} must have at least ${e.params.limit} item(s)`;
        break;
      case 'maxItems':
        code = 'too_many_items';
        message = `${field} must have at most ${e.params.limit} items`;
        break;
      case 'maxProperties':
        code = 'too_many_properties';
        message = `${field} must have at most ${e.params.limit} keys`;
        break;
      case 'minProperties':
        code = 'empty';
        message = `${field || 'body'} must have at least one field`;
        break;
      case 'uniqueItems':
        code = 'duplicate_items';
        message = `${field} must not contain duplicates`;
        break;
      case 'enum':
        code = 'invalid_value';
        message = `${field} must be one of ${(e.params.allowedValues as unknown[]).map(String).join(', ')}`;
        break;
      case 'const':
        code = 'invalid_value';
        message = `${field} must be ${String(e.params.allowedValue)}`;
        break;
      case 'format':
        if (e.params.format === 'positive-cents') {
          // Stored as numeric(16,2) with CHECK (> 0): what rounds to 0.00 is not positive.
          code = 'must_be_positive';
          message = `${field} must be positive: at least 0.005, which is stored rounded to 0.01`;
          break;
        }
        code = `invalid_${String(e.params.format).replace(/-/g, '_')}`;
        message = `${field} must be a valid ${FORMAT_NAMES[e.params.format as string] ?? e.params.format}`;
        break;
      case 'propertyNames':
        code = 'invalid_key';
        message =
          e.params.propertyName === ''
            ? `${field} must not have an empty key`
            : `${field} has a key that is not allowed: ${JSON.stringify(e.params.propertyName)}`;
        break;
      case 'pattern':
        code = 'invalid_format';
        message = PATTERN_MESSAGES[field.replace(/^.*[.\]]/, '')] ?? `${field} has an invalid format`;
        break;
      case 'anyOf':
      case 'oneOf':
        continue;
      default:
        code = 'invalid_value';
        message = `${field} ${e.message ?? 'is invalid'}`;
    }
    const k = `${field}|${code}`;
    if (seen.has(k)) continue;
    seen.add(k);
    out.push({ field, code, message });
  }
  return out;
}

const FORMAT_NAMES: Record<string, string> = {
  email: 'e-mail address',
  date: 'date (YYYY-MM-DD)',
  'date-time': 'ISO 8601 date-time with time zone',
  uuid: 'UUID',
  uri: 'absolute URI',
  hostname: 'domain name',
};
const PATTERN_MESSAGES: Record<string, string> = {
  whatsapp_number: 'whatsapp_number must be an international phone number in E.164 format, e.g. +4915112345678',
  name: 'name must contain a non-space character',
  status: 'status must be one or more of the allowed values, comma-separated',
  health_status: 'health_status must be one or more of healthy, neutral, at_risk, comma-separated',
  locale: 'locale must be a BCP 47 language tag such as en or pt-BR',
  external_source: 'external_source must be lowercase letters, digits, _, . or -',
};

/** The single place an error becomes `application/problem+json`. */
export function problemBody(
  baseUrl: string,
  err: ApiError,
  instance: string,
  traceId: string,
): Record<string, unknown> {
  const body: Record<string, unknown> = {
    type: `${baseUrl}/errors/${err.code}`,
    title: ERRORS[err.code][1],
    status: err.status,
    detail: err.message,
    instance,
    trace_id: traceId,
  };
  if (err.errors) body.errors = err.errors;
  if (err.extra) Object.assign(body, err.extra);
  return body;
}

export const ERROR_DOCS: Record<ErrorCode, string> = {
  validation_failed:
    'The body, query or path failed validation; `errors[]` lists each field with a code and message, e.g. `must_be_positive`, `invalid_unicode` (a NUL character or an unpaired surrogate, which cannot be stored), `too_deep` (JSON bodies nest at most 32 levels of objects and arrays).',
  malformed_json: 'The body is not valid JSON (or not UTF-8).',
  invalid_cursor: 'The `cursor` query parameter was not produced by this API.',
  invalid_request: 'The request is malformed in a way not tied to one field.',
  invalid_grant:
    'OAuth token endpoint: the code or refresh token is unknown, used, expired, revoked, issued to another client, or the PKCE verifier or redirect_uri does not match.',
  invalid_scope: 'OAuth token endpoint: the requested scope exceeds the grant.',
  unsupported_grant_type: 'OAuth token endpoint: grant_type must be authorization_code or refresh_token.',
  invalid_client: 'OAuth token endpoint: client authentication failed.',
  unauthenticated: 'No bearer credential, or it is malformed or unknown.',
  token_expired: 'The access token or API key has expired; refresh the token or use a new key.',
  token_revoked: 'The API key or OAuth grant was revoked.',
  insufficient_scope: 'The credential is valid but lacks the scope; `detail` names the required and the held scopes.',
  insufficient_role: 'The credential is valid but its role may not do this (admin-only endpoints).',
  ip_not_allowed: "The API key has an IP allowlist and the caller's address is outside it.",
  not_found: 'No such resource in this workspace (resources of other workspaces answer the same).',
  method_not_allowed: 'The path exists but not with this method; see the Allow header.',
  conflict: 'The request conflicts with the current state (duplicate external_id or e-mail).',
  last_admin: 'The change would leave the workspace without an admin.',
  payload_too_large: 'The body exceeds the size limit of the endpoint.',
  unsupported_media_type:
    'The body must be `application/json` (the token endpoint: `application/x-www-form-urlencoded`).',
  renewal_date_in_past: 'renewal_date is before today (UTC).',
  idempotency_key_reused: 'The Idempotency-Key was used in the last 24 hours with a different request body.',
  idempotency_key_in_use:
    'Another request with this Idempotency-Key is still being processed; retry shortly to get its response.',
  unprocessable: 'The request is well-formed but semantically invalid (for example an expiry in the past).',
  rate_limited: 'The workspace exceeded a rate limit; retry after `Retry-After` seconds.',
  daily_quota_exceeded:
    'The workspace reached the daily event volume of its plan (both ingestion surfaces count); `Retry-After` points at the next UTC day.',
  internal_error: 'An unexpected error; quote trace_id to support.',
  service_unavailable: 'A dependency is unavailable; retry later.',
  scorer_unavailable:
    'POST /v1/customers/{id}/health/recalculate: no health scorer answered in time (10 s by default) or it ' +
    'could not recalculate; the stored score is unchanged. Retry after `Retry-After` seconds.',
  unknown_event:
    "A metric's `source_event` is not in the workspace's event catalog (GET /v1/event-catalog); `errors[]` names it.",
  immutable_field:
    'PATCH /v1/metrics/{id} changes only name, description and unit; `errors[]` names each other field sent.',
  slug_taken: 'Another metric of the workspace (deleted ones included) has this slug; choose another `slug`.',
  metric_in_use:
    'The metric is used by objectives, health drivers or playbook triggers (`consumers`); remove them first.',
  widget_limit_reached: 'The workspace has 8 usage widgets, the most it can have; delete one first.',
  proposal_closed: 'The proposal was already accepted or rejected.',
};
