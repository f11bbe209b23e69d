import { header, type Answer, type Answered, type Req } from './http.js';

/**
 * What every answer of every HTTP surface must be, whatever was sent (SPEC.md "Errors", README):
 * an answer at all (no reset, no silence); no 5xx but a 503 carrying Retry-After; a status the
 * surface documents; the surface's documented body shape; X-Trace-Id; nothing stored by a request
 * that was refused; the tier still up afterwards.
 */

export const FAILURE_CLASSES = [
  'no_answer',
  'server_error',
  'undocumented_status',
  'wrong_shape',
  'no_trace_id',
  'stored_by_rejected',
  'foreign_access',
  'tier_down',
] as const;
export type FailureClass = (typeof FAILURE_CLASSES)[number];

export interface Violation {
  kind: FailureClass;
  message: string;
}

/** The error body a surface speaks: surface A's own shapes, problem+json, or the OAuth endpoints'. */
export type Contract = 'ingest-a' | 'problem' | 'oauth-token' | 'authorize-page';

export interface Rules {
  contract: Contract;
  /** Every status the surface documents for this route, errors included. */
  statuses: ReadonlySet<number>;
  /** Shape of a successful answer: a message when it is wrong. */
  success?: (a: Answered, r: Req) => string | undefined;
  /** authorize-page: what a 303's Location must be (the registered redirect URI, the state echoed). */
  redirect?: (location: URL, r: Req) => string | undefined;
  /**
   * Where the request names a resource of another workspace: `path` (refused as unknown: never
   * served, changed or told apart by a conflict with its state), `body` (never taken), or nothing.
   */
  foreign?: (r: Req) => 'path' | 'body' | undefined;
  /** Another workspace's ids a 2xx answer names that the request did not: what it must never show. */
  revealed?: (a: Answered, r: Req) => string[];
}

export const INGEST_A_STATUSES = new Set([202, 400, 401, 404, 405, 413, 422, 429, 503]);
export const EVENTS_B_STATUSES = new Set([200, 202, 400, 401, 403, 404, 405, 409, 413, 415, 422, 429, 503]);
export const CORE_STATUSES = new Set([200, 201, 202, 204, 400, 401, 403, 404, 405, 409, 413, 415, 422, 429, 503]);
export const TOKEN_STATUSES = new Set([200, 400, 401, 405, 413, 415, 429]);
/** The page's own answers, and those of the form it posts to (401 page, 415) when the fuzz changes the method. */
export const AUTHORIZE_STATUSES = new Set([200, 303, 400, 401, 405, 415, 429]);
/** Pages a browser is sent to (the sign-in form post, an integration's callback) and what their neighbours answer. */
export const PAGE_STATUSES = new Set([200, 303, 400, 401, 404, 405, 413, 415, 429]);

const RFC6749_ERRORS = new Set([
  'invalid_request',
  'invalid_client',
  'invalid_grant',
  'unauthorized_client',
  'unsupported_grant_type',
  'invalid_scope',
]);
const TRACE_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const keys = (v: Record<string, unknown>) => Object.keys(v).sort().join(',');
const short = (a: Answered) => `${a.status} ${a.text.slice(0, 300)}`;

/** Surface A's `{detail: [{type, loc, msg, input}]}`. */
function detailList(body: Record<string, unknown>): string | undefined {
  const d = body.detail;
  if (keys(body) !== 'detail' || !Array.isArray(d) || d.length === 0)
    return 'not {detail: [..]} with at least one item';
  for (const item of d) {
    if (!isObject(item) || keys(item) !== 'input,loc,msg,type')
      return 'a detail item is not exactly {type, loc, msg, input}';
    if (typeof item.type !== 'string' || typeof item.msg !== 'string') return 'detail type and msg must be strings';
    if (!Array.isArray(item.loc) || !item.loc.every((p) => typeof p === 'string' || typeof p === 'number'))
      return 'detail loc must be an array of strings and numbers';
  }
  return undefined;
}

/** The body of a surface-A answer (docs/ingestion.md, "Ingestion surface A" table). */
function ingestA(a: Answered): string | undefined {
  if (!/^application\/json/i.test(header(a, 'content-type') ?? '')) return 'Content-Type is not application/json';
  const b = a.json;
  if (!isObject(b)) return 'body is not a JSON object';
  switch (a.status) {
    case 400:
    case 401:
    case 404:
    case 405:
      return keys(b) === 'detail' && typeof b.detail === 'string' ? undefined : 'not {detail: string}';
    case 413: {
      const bad = detailList(b);
      if (bad) return bad;
      return (b.detail as Array<{ type: string }>)[0].type === 'payload_too_large'
        ? undefined
        : 'type is not payload_too_large';
    }
    case 422:
      return detailList(b);
    case 429: {
      const d = b.detail;
      if (keys(b) !== 'detail' || !isObject(d)) return 'not {detail: {...}}';
      if (keys(d) !== 'detail,retry_after,status,title,type')
        return 'detail is not {type, title, status, detail, retry_after}';
      if (d.status !== 429 || !Number.isInteger(d.retry_after))
        return 'status is not 429 or retry_after not an integer';
      return undefined;
    }
    case 503:
      if (keys(b) !== 'detail,status,title,type' || b.status !== 503) return 'not {type, title, status: 503, detail}';
      return undefined;
  }
  return undefined;
}

/** RFC 7807 as SPEC.md "Core API format" has it, with trace_id equal to X-Trace-Id. */
function problem(a: Answered): string | undefined {
  if (!/^application\/problem\+json/i.test(header(a, 'content-type') ?? ''))
    return 'Content-Type is not application/problem+json';
  const b = a.json;
  if (!isObject(b)) return 'body is not a JSON object';
  if (typeof b.type !== 'string' || !/\/errors\/[a-z_]+$/.test(b.type)) return 'type is not {base_url}/errors/<code>';
  for (const k of ['title', 'detail', 'instance', 'trace_id'])
    if (typeof b[k] !== 'string') return `${k} is not a string`;
  if (b.status !== a.status) return `status member ${String(b.status)} differs from the HTTP status`;
  if (b.trace_id !== header(a, 'x-trace-id')) return 'trace_id differs from X-Trace-Id';
  if (b.errors !== undefined) {
    if (!Array.isArray(b.errors)) return 'errors is not an array';
    for (const e of b.errors)
      if (!isObject(e) || typeof e.field !== 'string' || typeof e.code !== 'string' || typeof e.message !== 'string')
        return 'an errors[] item is not {field, code, message}';
  }
  if (b.type.endsWith('/validation_failed') && (!Array.isArray(b.errors) || b.errors.length === 0))
    return 'validation_failed without errors[]';
  if (a.status === 405 && !header(a, 'allow')) return '405 without Allow';
  return undefined;
}

/** RFC 6749 §5.2 members, carried in the problem document, on every error of a POST. */
function oauthToken(a: Answered, r: Req): string | undefined {
  const p = problem(a);
  if (p || r.method !== 'POST') return p;
  const b = a.json as Record<string, unknown>;
  if (typeof b.error !== 'string' || !RFC6749_ERRORS.has(b.error))
    return `error ${JSON.stringify(b.error)} is not an RFC 6749 code`;
  if (b.error_description !== undefined && typeof b.error_description !== 'string')
    return 'error_description is not a string';
  if (a.status === 401 && !header(a, 'www-authenticate')) return '401 without WWW-Authenticate';
  return undefined;
}

function authorizePage(a: Answered, r: Req, rules: Rules): string | undefined {
  const ct = header(a, 'content-type') ?? '';
  if (a.status === 303) {
    const loc = header(a, 'location');
    if (!loc) return '303 without Location';
    let u: URL;
    try {
      u = new URL(loc);
    } catch {
      return `Location ${loc} is not an absolute URL`;
    }
    return rules.redirect?.(u, r);
  }
  if (/^text\/html/i.test(ct)) return undefined;
  // A query the store cannot hold (a NUL) is refused before any page is drawn.
  if ([400, 404, 405, 413, 415, 429].includes(a.status)) return problem(a);
  return `Content-Type ${ct} is not text/html`;
}

/** Everything wrong with one answer. */
export function judge(rules: Rules, r: Req, a: Answer): Violation[] {
  if (!a.ok) return [{ kind: 'no_answer', message: `${a.failure}: ${a.detail}` }];
  const out: Violation[] = [];
  if (a.status >= 500 && !(a.status === 503 && header(a, 'retry-after')))
    out.push({ kind: 'server_error', message: short(a) });
  else if (!rules.statuses.has(a.status)) out.push({ kind: 'undocumented_status', message: short(a) });
  const trace = header(a, 'x-trace-id');
  if (!trace || !TRACE_RE.test(trace)) out.push({ kind: 'no_trace_id', message: `${a.status} X-Trace-Id ${trace}` });
  if ((a.status === 429 || a.status === 503) && !/^\d+$/.test(header(a, 'retry-after') ?? ''))
    out.push({ kind: 'wrong_shape', message: `${a.status} without Retry-After in seconds` });
  // Another workspace's resource is not found: never served, changed, or told apart by a conflict.
  const foreign = rules.foreign?.(r);
  // A 422 may come from the body alone, before any look-up (an immutable field): it tells nothing apart.
  if ((foreign && a.status < 300) || (foreign === 'path' && a.status === 409))
    out.push({ kind: 'foreign_access', message: `another workspace's id answered ${short(a)}` });
  const shown = a.status < 300 ? (rules.revealed?.(a, r) ?? []) : [];
  if (shown.length) out.push({ kind: 'foreign_access', message: `answer names ${shown.join(', ')}: ${short(a)}` });
  // An answer to HEAD has no content to check.
  if (r.method === 'HEAD' || out.some((v) => v.kind === 'server_error')) return out;
  let bad: string | undefined;
  if (rules.contract === 'authorize-page') bad = authorizePage(a, r, rules);
  else if (a.status < 300) bad = rules.success?.(a, r);
  else if (rules.contract === 'ingest-a') bad = ingestA(a);
  else if (rules.contract === 'problem') bad = problem(a);
  else bad = oauthToken(a, r);
  if (bad) out.push({ kind: 'wrong_shape', message: `${bad}: ${short(a)}` });
  return out;
}

/** A successful answer whose JSON body has exactly these members. */
export const exactly =
  (...members: string[]) =>
  (a: Answered): string | undefined => {
    if (!isObject(a.json)) return `2xx body is not a JSON object: ${short(a)}`;
    const got = keys(a.json);
    const want = [...members].sort().join(',');
    return got === want ? undefined : `2xx body has ${got}, not ${want}`;
  };

/** A successful answer whose JSON body has at least these members. */
export const including =
  (...members: string[]) =>
  (a: Answered): string | undefined => {
    if (!isObject(a.json)) return `2xx body is not a JSON object: ${short(a)}`;
    const missing = members.filter((m) => !(m in (a.json as object)));
    return missing.length ? `2xx body lacks ${missing.join(', ')}` : undefined;
  };

/** What differs between two snapshots: the members that changed when both are objects, else both whole. */
function changes(before: unknown, now: unknown): string {
  if (!isObject(before) || !isObject(now)) return `${JSON.stringify(before)} became ${JSON.stringify(now)}`;
  const keys = [...new Set([...Object.keys(before), ...Object.keys(now)])];
  return keys
    .filter((k) => JSON.stringify(before[k]) !== JSON.stringify(now[k]))
    .map((k) => `${k} ${JSON.stringify(before[k])} became ${JSON.stringify(now[k])}`)
    .join(', ');
}

/**
 * What a refused request must leave behind: nothing. Holds the last snapshot of what the
 * surface can write (row counts, stream messages); after each answer, a refused request
 * (no answer, or a status of 300 or more) must find it unchanged. The snapshot before is the one
 * taken after the previous answer, so a write that lands after its own answer (or after a client
 * gave up on it) is found at the next request: `previous` names that request in the message.
 */
export class Ledger<S> {
  private last: S | undefined;
  constructor(
    private readonly snapshot: () => Promise<S>,
    private readonly stores: (a: Answer) => boolean = (a) => a.ok && a.status < 300,
  ) {}

  async after(a: Answer, previous?: string): Promise<Violation[]> {
    const before = this.last ?? (await this.snapshot());
    const now = await this.snapshot();
    this.last = now;
    if (this.stores(a) || JSON.stringify(before) === JSON.stringify(now)) return [];
    const since = previous ? `; the request before it: ${previous}` : '';
    return [
      {
        kind: 'stored_by_rejected',
        message: `${a.ok ? a.status : a.failure} answer, yet ${changes(before, now)}${since}`,
      },
    ];
  }

  /** Takes the first snapshot; call before the first request. */
  async start(): Promise<void> {
    this.last = await this.snapshot();
  }
}
