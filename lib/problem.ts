import type { ErrorObject } from '../schemas/core/validate.js';

export interface FieldError {
  field: string;
  code: string;
  message: string;
}

export interface ErrorEntry {
  status: number;
  title: string;
  /** What the code means and what a client does about it. */
  docs: string;
}

/**
 * Every problem+json error code of the bearer-authenticated surfaces (the core API and ingestion
 * surface B), one entry per code: its status, its title and what it means (served at
 * /errors/{code} and in the OpenAPI document's `x-error-codes`). The wire shape is made in one
 * place (problemBody below).
 */
export const ERRORS = {
  validation_failed: {
    status: 400,
    title: 'Validation failed',
    docs:
      'The body, query or path failed validation; `errors[]` lists each field with a code and message, e.g. ' +
      '`must_be_positive`, `invalid_unicode` (a NUL character or an unpaired surrogate, which cannot be stored), ' +
      '`too_deep` (JSON bodies nest at most 32 levels of objects and arrays), `too_large` (also a number beyond ' +
      'what a 64-bit float holds, such as 1e400).',
  },
  malformed_json: {
    status: 400,
    title: 'Malformed JSON',
    docs: 'The body is not valid JSON (or not UTF-8).',
  },
  invalid_cursor: {
    status: 400,
    title: 'Invalid cursor',
    docs: 'The `cursor` query parameter was not produced by this API.',
  },
  invalid_request: {
    status: 400,
    title: 'Invalid request',
    docs: 'The request is malformed in a way not tied to one field.',
  },
  invalid_grant: {
    status: 400,
    title: 'Invalid grant',
    docs:
      'OAuth token endpoint: the code or refresh token is unknown, used, expired, revoked, issued to another ' +
      'client, or the PKCE verifier or redirect_uri does not match.',
  },
  invalid_scope: {
    status: 400,
    title: 'Invalid scope',
    docs: 'OAuth token endpoint: the requested scope exceeds the grant.',
  },
  unsupported_grant_type: {
    status: 400,
    title: 'Unsupported grant type',
    docs: 'OAuth token endpoint: grant_type must be authorization_code or refresh_token.',
  },
  unauthenticated: {
    status: 401,
    title: 'Unauthenticated',
    docs: 'No bearer credential, or it is malformed or unknown.',
  },
  invalid_client: {
    status: 401,
    title: 'Invalid client',
    docs: 'OAuth token endpoint: client authentication failed.',
  },
  token_expired: {
    status: 401,
    title: 'Token expired',
    docs: 'The access token or API key has expired; refresh the token or use a new key.',
  },
  token_revoked: {
    status: 401,
    title: 'Token revoked',
    docs: 'The API key or OAuth grant was revoked.',
  },
  insufficient_scope: {
    status: 403,
    title: 'Insufficient scope',
    docs: 'The credential is valid but lacks the scope; `detail` names the required and the held scopes.',
  },
  insufficient_role: {
    status: 403,
    title: 'Insufficient role',
    docs: 'The credential is valid but its role may not do this (admin-only endpoints).',
  },
  ip_not_allowed: {
    status: 403,
    title: 'IP address not allowed',
    docs: "The API key has an IP allowlist and the caller's address is outside it.",
  },
  not_found: {
    status: 404,
    title: 'Not found',
    docs: 'No such resource in this workspace (resources of other workspaces answer the same).',
  },
  method_not_allowed: {
    status: 405,
    title: 'Method not allowed',
    docs: 'The path exists but not with this method; see the Allow header.',
  },
  conflict: {
    status: 409,
    title: 'Conflict',
    docs: 'The request conflicts with the current state (duplicate external_id or e-mail).',
  },
  last_admin: {
    status: 409,
    title: 'Last admin',
    docs: 'The change would leave the workspace without an admin.',
  },
  payload_too_large: {
    status: 413,
    title: 'Payload too large',
    docs: 'The body exceeds the size limit of the endpoint.',
  },
  unsupported_media_type: {
    status: 415,
    title: 'Unsupported media type',
    docs: 'The body must be `application/json` (the token endpoint: `application/x-www-form-urlencoded`).',
  },
  renewal_date_in_past: {
    status: 422,
    title: 'Renewal date in the past',
    docs: 'renewal_date is before today (UTC).',
  },
  idempotency_key_reused: {
    status: 422,
    title: 'Idempotency key reused with a different request',
    docs: 'The Idempotency-Key was used in the last 24 hours with a different request body.',
  },
  idempotency_key_in_use: {
    status: 409,
    title: 'Idempotency key in use',
    docs: 'Another request with this Idempotency-Key is still being processed; retry shortly to get its response.',
  },
  unprocessable: {
    status: 422,
    title: 'Unprocessable request',
    docs: 'The request is well-formed but semantically invalid (for example an expiry in the past).',
  },
  rate_limited: {
    status: 429,
    title: 'Too many requests',
    docs: 'The workspace exceeded a rate limit; retry after `Retry-After` seconds.',
  },
  daily_quota_exceeded: {
    status: 429,
    title: 'Daily event quota exceeded',
    docs:
      'The workspace reached the daily event volume of its plan (both ingestion surfaces count); ' +
      '`Retry-After` points at the next UTC day.',
  },
  internal_error: {
    status: 500,
    title: 'Internal server error',
    docs: 'An unexpected error; quote trace_id to support.',
  },
  service_unavailable: {
    status: 503,
    title: 'Service unavailable',
    docs: 'A dependency is unavailable; retry later.',
  },
  secrets_unavailable: {
    status: 503,
    title: 'Secrets unavailable',
    docs:
      'The service has no DATA_ENCRYPTION_KEY to keep a signing secret encrypted at rest, so none is created; an ' +
      'operator must configure it.',
  },
  scorer_unavailable: {
    status: 503,
    title: 'Health scorer unavailable',
    docs:
      'POST /v1/customers/{id}/health/recalculate: no health scorer answered in time (10 s by default) or it ' +
      'could not recalculate; the stored score is unchanged. Retry after `Retry-After` seconds.',
  },
  materializer_unavailable: {
    status: 503,
    title: 'Metric materializer unavailable',
    docs:
      'POST /v1/metrics/{id}/materialize: no materializer (processors) answered in time (30 s by default) or it ' +
      'could not compute the metric; stored values are unchanged. Retry after `Retry-After` seconds.',
  },
  unknown_event: {
    status: 422,
    title: 'Unknown event',
    docs:
      "A metric's `source_event` is not in the workspace's event catalog (GET /v1/event-catalog); " +
      '`errors[]` names it.',
  },
  immutable_field: {
    status: 422,
    title: 'Immutable field',
    docs: 'PATCH /v1/metrics/{id} changes only name, description and unit; `errors[]` names each other field sent.',
  },
  slug_taken: {
    status: 409,
    title: 'Slug taken',
    docs: 'Another metric of the workspace (deleted ones included) has this slug; choose another `slug`.',
  },
  metric_in_use: {
    status: 409,
    title: 'Metric in use',
    docs: 'The metric is used by objectives, health drivers or playbook triggers (`consumers`); remove them first.',
  },
  widget_limit_reached: {
    status: 409,
    title: 'Widget limit reached',
    docs: 'The workspace has 8 usage widgets, the most it can have; delete one first.',
  },
  proposal_closed: {
    status: 409,
    title: 'Proposal closed',
    docs: 'The proposal was already accepted or rejected.',
  },
  invalid_expression: {
    status: 400,
    title: 'Invalid expression',
    docs:
      'A playbook condition does not parse or compares a variable with a value of the wrong kind; `detail` and ' +
      '`errors[]` (field `trigger.expression`) say what was expected at which 1-based `position`.',
  },
  unknown_variable: {
    status: 400,
    title: 'Unknown variable',
    docs:
      'A playbook condition names a variable the language does not have, a segment or a metric (`metric.<slug>`) ' +
      'the workspace does not have (or a deleted metric); `position` points at it.',
  },
  unknown_metric: {
    status: 422,
    title: 'Unknown metric',
    docs: 'A metric_threshold trigger names a metric that is not in the workspace or is deleted.',
  },
  segment_name_taken: {
    status: 409,
    title: 'Segment name taken',
    docs: 'Another segment of the workspace has this name (names compare case-insensitively); choose another.',
  },
  segment_in_use: {
    status: 409,
    title: 'Segment in use',
    docs:
      'Playbook conditions name the segment (`used_by`): it cannot be deleted or renamed until they stop naming it. ' +
      'Its rules can change.',
  },
  segment_limit_reached: {
    status: 409,
    title: 'Segment limit reached',
    docs: 'The workspace has 200 segments, the most it can have; delete one first.',
  },
  subscription_disabled: {
    status: 409,
    title: 'Subscription disabled',
    docs: 'POST /v1/webhook-subscriptions/{id}/test on a disabled subscription; enable it first (PATCH enabled: true).',
  },
  integration_not_configured: {
    status: 409,
    title: 'Integration not configured',
    docs:
      'The service has no OAuth client for this provider (INTEGRATION_<NAME>_CLIENT_ID and _CLIENT_SECRET) or no ' +
      'DATA_ENCRYPTION_KEY to keep tokens encrypted; an operator must configure it.',
  },
  integration_already_connected: {
    status: 409,
    title: 'Integration already connected',
    docs: 'The integration is connected; disconnect it (DELETE /v1/integrations/{name}) before connecting again.',
  },
  integration_not_connected: {
    status: 409,
    title: 'Integration not connected',
    docs:
      'POST /v1/integrations/{name}/sync on an integration that is not connected (disconnected, pending or in ' +
      '`error`): connect it (again) first.',
  },
  integration_not_syncable: {
    status: 409,
    title: 'Integration does not sync',
    docs:
      'POST /v1/integrations/{name}/sync: only gmail, outlook, google_calendar and outlook_calendar read from ' +
      'their provider on a schedule; the other connectors receive webhooks or only send.',
  },
  invalid_signature: {
    status: 401,
    title: 'Invalid signature',
    docs:
      'A provider delivery whose signature is missing or wrong, or whose timestamp is more than 5 minutes away ' +
      '(a replay): X-Integration-Signature on …/events/{connection_id}, X-Zendesk-Webhook-Signature on ' +
      '/v1/integrations/zendesk/webhooks/…, X-Hub-Signature on /v1/integrations/intercom/webhooks/…. Nothing ' +
      'was stored.',
  },
  playbook_disabled: {
    status: 409,
    title: 'Playbook disabled',
    docs: 'POST /v1/playbooks/{id}/run on a disabled playbook: only `{"dry_run": true}` is allowed; enable it first.',
  },
  invalid_state: {
    status: 409,
    title: 'Invalid state',
    docs: 'The task is completed or skipped, which is final: it cannot be changed or completed again.',
  },
  runner_unavailable: {
    status: 503,
    title: 'Playbook runner unavailable',
    docs:
      'POST /v1/playbooks/{id}/run: no playbook runner (processors) answered in time (30 s by default) or it could ' +
      'not evaluate the playbook; nothing was fired. Retry after `Retry-After` seconds.',
  },
} as const satisfies Record<string, ErrorEntry>;

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
    this.status = ERRORS[code].status;
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
      // if/then: the `then` branch's own errors name the fields.
      case 'if':
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
    title: ERRORS[err.code].title,
    status: err.status,
    detail: err.message,
    instance,
    trace_id: traceId,
  };
  if (err.errors) body.errors = err.errors;
  if (err.extra) Object.assign(body, err.extra);
  return body;
}
