import type { ErrorObject } from 'ajv';

/** One entry of the surface-A 422 body: `{detail: [{type, loc, msg, input}]}`. */
export interface Detail {
  type: string;
  loc: Array<string | number>;
  msg: string;
  input: unknown;
}

/** A failure that answers the whole request; turned into SPEC.md's surface-A shapes in one place (app.ts). */
export class IngestError extends Error {
  constructor(
    readonly status: 401 | 413 | 422 | 429 | 500 | 503,
    message: string,
    readonly details: Detail[] = [],
    readonly retryAfter = 0,
    readonly code?: 'daily_quota_exceeded',
  ) {
    super(message);
  }
}

export const unprocessable = (details: Detail[]) => new IngestError(422, details[0]?.msg ?? 'invalid request', details);
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
    'event_name must be snake_case: lowercase letters and digits in words joined by single underscores, starting with a letter',
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
          msg: `List should have at least ${e.params.limit} item${e.params.limit === 1 ? '' : 's'} after validation, not ${(input as unknown[]).length}`,
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
