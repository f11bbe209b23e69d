import type { ErrorObject } from 'ajv';

/** One entry of the surface-A 422 body: `{detail: [{type, loc, msg, input}]}`. */
export interface Detail {
  type: string;
  loc: Array<string | number>;
  msg: string;
  input: unknown;
}

/**
 * Surface A's error catalogue: every answer other than 202 that surface A gives, by code: its
 * status, its title and its wire shape (SPEC.md's shapes, kept byte for byte):
 * - `message`: `{"detail": "<message>"}`;
 * - `details`: `{"detail": [{type, loc, msg, input}, …]}`, Pydantic style;
 * - `nested_problem`: `{"detail": {type, title, status, detail, retry_after}}` with Retry-After;
 * - `problem`: `{type, title, status, detail}`, the detail written for the client (`clientDetail`).
 * `retryAfter` is the Retry-After sent when the error carries none; without it, no header.
 */
export const SURFACE_A_ERRORS = {
  invalid_framing: { status: 400, title: 'Bad Request', shape: 'message' },
  unauthenticated: { status: 401, title: 'Unauthorized', shape: 'message' },
  not_found: { status: 404, title: 'Not Found', shape: 'message' },
  method_not_allowed: { status: 405, title: 'Method Not Allowed', shape: 'message' },
  payload_too_large: { status: 413, title: 'Payload Too Large', shape: 'details' },
  validation_failed: { status: 422, title: 'Unprocessable Entity', shape: 'details' },
  rate_limited: { status: 429, title: 'Too Many Requests', shape: 'nested_problem', retryAfter: 0 },
  daily_quota_exceeded: { status: 429, title: 'Daily Event Quota Exceeded', shape: 'nested_problem', retryAfter: 0 },
  // The message may name internals (a NATS error): the client gets a fixed text.
  internal_error: {
    status: 500,
    title: 'Internal Server Error',
    shape: 'problem',
    clientDetail: () => 'No event of this request was stored. Retry with backoff.',
  },
  service_unavailable: {
    status: 503,
    title: 'Service Unavailable',
    shape: 'problem',
    retryAfter: 5,
    clientDetail: (message: string) => `${message}; no event of this request was stored. Retry later.`,
  },
} as const satisfies Record<string, SurfaceAError>;

interface SurfaceAError {
  status: number;
  title: string;
  shape: 'message' | 'details' | 'nested_problem' | 'problem';
  retryAfter?: number;
  clientDetail?: (message: string) => string;
}

export type SurfaceACode = keyof typeof SURFACE_A_ERRORS;

/** A failure that answers the whole request; `answer` turns it into its wire shape. */
export class IngestError extends Error {
  readonly status: number;
  constructor(
    readonly code: SurfaceACode,
    message: string,
    readonly details: Detail[] = [],
    readonly retryAfter = 0,
  ) {
    super(message);
    this.status = SURFACE_A_ERRORS[code].status;
  }
}

export interface Answer {
  status: number;
  body: unknown;
  headers: Array<[string, string]>;
}

/** The one place a surface-A error becomes what the client reads. */
export function answer(code: SurfaceACode, message: string, details: Detail[] = [], retryAfter = 0): Answer {
  const e: SurfaceAError = SURFACE_A_ERRORS[code];
  const headers: Array<[string, string]> =
    e.retryAfter === undefined ? [] : [['Retry-After', String(retryAfter || e.retryAfter)]];
  switch (e.shape) {
    case 'message':
      return { status: e.status, body: { detail: message }, headers };
    case 'details':
      return { status: e.status, body: { detail: details }, headers };
    case 'nested_problem':
      return {
        status: e.status,
        body: { detail: { type: code, title: e.title, status: e.status, detail: message, retry_after: retryAfter } },
        headers,
      };
    case 'problem':
      return {
        status: e.status,
        body: { type: code, title: e.title, status: e.status, detail: e.clientDetail?.(message) ?? message },
        headers,
      };
  }
}

export const answerError = (err: IngestError): Answer => answer(err.code, err.message, err.details, err.retryAfter);

export const unprocessable = (details: Detail[]) =>
  new IngestError('validation_failed', details[0]?.msg ?? 'invalid request', details);
export const bodyProblem = (type: string, msg: string, loc: Array<string | number> = ['body']) =>
  unprocessable([{ type, loc, msg, input: null }]);

/** Keeps error bodies small: large inputs are described, not echoed. */
export function summarize(value: unknown): unknown {
  if (value === undefined) return null;
  if (typeof value === 'string') return value.length > 256 ? `${value.slice(0, 256)}…` : value;
  if (value === null || typeof value !== 'object') return value;
  let json: string;
  try {
    json = JSON.stringify(value);
  } catch {
    // Nesting deeper than the stack: still a 422 for the client, never a 500.
    return Array.isArray(value) ? `<array of ${value.length} items>` : '<object nested too deeply to echo>';
  }
  if (json.length <= 512) return value;
  return Array.isArray(value) ? `<array of ${value.length} items>` : `<object of ${json.length} bytes>`;
}

function at(root: unknown, path: Array<string | number>): unknown {
  let v = root as Record<string | number, unknown> | undefined;
  for (const p of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = v[p] as Record<string | number, unknown> | undefined;
  }
  return v;
}

const FORMAT_TYPE: Record<string, [string, string]> = {
  uuid: ['uuid_parsing', 'Input should be a valid UUID'],
  'date-time': [
    'datetime_parsing',
    'Input should be an ISO 8601 date-time with a time zone, e.g. 2026-05-01T12:00:00Z',
  ],
};

const PATTERN_MSG: Record<string, string> = {
  event_name:
    'event_name must be snake_case: lowercase letters and digits in words joined by single underscores, starting ' +
    'with a letter',
};

/** Ajv errors → Pydantic-style details with `loc` = ["body", "events", 3, "event_name"]. */
export function fromAjv(errors: ErrorObject[], body: unknown): Detail[] {
  const out: Detail[] = [];
  const seen = new Set<string>();
  for (const e of errors) {
    const path: Array<string | number> = e.instancePath
      .split('/')
      .slice(1)
      .map((s) => {
        const u = s.replace(/~1/g, '/').replace(/~0/g, '~');
        return /^\d+$/.test(u) ? Number(u) : u;
      });
    const input = at(body, path);
    const field = String(path[path.length - 1] ?? 'body');
    let d: Detail;
    switch (e.keyword) {
      case 'required': {
        const missing = String(e.params.missingProperty);
        d = { type: 'missing', loc: ['body', ...path, missing], msg: 'Field required', input: summarize(input) };
        break;
      }
      case 'type':
        d = {
          type: `${e.params.type}_type`,
          loc: ['body', ...path],
          msg: `Input should be a valid ${e.params.type === 'integer' ? 'integer' : e.params.type}`,
          input: summarize(input),
        };
        break;
      case 'minLength':
        d = {
          type: 'string_too_short',
          loc: ['body', ...path],
          msg: `String should have at least ${e.params.limit} character${e.params.limit === 1 ? '' : 's'}`,
          input: summarize(input),
        };
        break;
      case 'maxLength':
        d = {
          type: 'string_too_long',
          loc: ['body', ...path],
          msg: `String should have at most ${e.params.limit} characters`,
          input: summarize(input),
        };
        break;
      case 'minItems':
        d = {
          type: 'too_short',
          loc: ['body', ...path],
          msg:
            `List should have at least ${e.params.limit} item${e.params.limit === 1 ? '' : 's'} after validation, ` +
            `not ${(input as unknown[]).length}`,
          input: summarize(input),
        };
        break;
      case 'maxItems':
        d = {
          type: 'too_long',
          loc: ['body', ...path],
          msg: `List should have at most ${e.params.limit} items after validation, not ${(input as unknown[]).length}`,
          input: summarize(input),
        };
        break;
      case 'pattern':
        d = {
          type: 'string_pattern_mismatch',
          loc: ['body', ...path],
          msg: PATTERN_MSG[field] ?? `String should match pattern '${e.params.pattern}'`,
          input: summarize(input),
        };
        break;
      case 'enum': {
        const allowed = e.params.allowedValues as unknown[];
        const list =
          allowed.length <= 12
            ? allowed.map((v) => `'${String(v)}'`).join(', ')
            : `a ${field === 'currency' ? '3-letter ISO 4217 code in upper case' : 'known value'}`;
        d = { type: 'enum', loc: ['body', ...path], msg: `Input should be ${list}`, input: summarize(input) };
        break;
      }
      case 'format': {
        const [type, msg] = FORMAT_TYPE[e.params.format as string] ?? [
          'value_error',
          `Input should match format ${e.params.format}`,
        ];
        d = { type, loc: ['body', ...path], msg, input: summarize(input) };
        break;
      }
      case 'minimum':
        d = {
          type: 'greater_than_equal',
          loc: ['body', ...path],
          msg: `Input should be greater than or equal to ${e.params.limit}`,
          input: summarize(input),
        };
        break;
      default:
        d = { type: 'value_error', loc: ['body', ...path], msg: e.message ?? 'invalid value', input: summarize(input) };
    }
    const k = JSON.stringify(d.loc) + d.type;
    if (!seen.has(k)) {
      seen.add(k);
      out.push(d);
    }
  }
  return out;
}
