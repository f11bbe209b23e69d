import type { Authenticator } from '../../lib/credentials/authenticate.js';
import type { Principal } from '../../lib/credentials/principal.js';
import { requireScope } from '../../lib/credentials/scopes.js';
import { IDEMPOTENCY_KEY_RE } from '../../lib/idempotency.js';
import { decodeJson, inspect, isJsonContentType, pathText } from '../../lib/json.js';
import { ApiError, fieldErrors, invalid } from '../../lib/problem.js';
import type { Decision, SharedRateLimiter } from '../../lib/rate-limit.js';
import type { RequestHead } from '../../lib/http/uws.js';
import { compile } from '../../schemas/ajv.js';
import { compileQuery } from '../../schemas/core/validate.js';
import { BatchShapeB, EventsQuery } from '../../schemas/events.js';
import { numberRejections, type Rejection } from '../event-rules.js';

/**
 * Surface B's steps, one named function each: authenticate → rate limit → scope (admit) →
 * Idempotency-Key → decode → validate, then resolve and stamp (events.ts), quota and publish
 * (store.ts) and the answer; GET /v1/events: admit → query string → page (query.ts).
 */

export interface Admission {
  principal?: Principal;
  rate?: Decision;
}

export interface AdmitDeps {
  auth: Authenticator;
  limiter: SharedRateLimiter;
}

/** Credential, then the workspace's per-minute bucket, then the scope; what was learnt stays on `a` for the answer. */
export async function admit(
  d: AdmitDeps,
  a: Admission,
  head: RequestHead,
  ip: string,
  bucket: string,
  perMinute: number,
  scope: 'events:write' | 'events:read',
): Promise<Principal> {
  const p = await d.auth.authenticate(head.headers.authorization, ip);
  a.principal = p;
  const rate = await d.limiter.take(p.tenantId, bucket, perMinute, 60_000);
  a.rate = rate;
  if (!rate.ok)
    throw new ApiError(
      'rate_limited',
      `Rate limit of ${rate.limit} requests per minute exceeded for this workspace; retry in ${rate.retryAfter} s.`,
      undefined,
      [['Retry-After', String(rate.retryAfter)]],
    );
  requireScope(p, scope);
  return p;
}

/** The Idempotency-Key header, when sent: 1 to 255 visible ASCII characters. */
export function idempotencyKey(head: RequestHead): string | undefined {
  const key = head.headers['idempotency-key'];
  if (key !== undefined && !IDEMPOTENCY_KEY_RE.test(key)) {
    throw invalid([
      {
        field: 'Idempotency-Key',
        code: 'invalid_format',
        message: 'Idempotency-Key must be 1 to 255 visible ASCII characters',
      },
    ]);
  }
  return key;
}

const shape = compile(BatchShapeB);

export interface DecodedBatch {
  events: unknown[];
  /** Events holding text no store can hold: index → the field (each rejected alone as invalid_unicode). */
  unstorable?: Map<number, string>;
  /** Events whose properties hold a number a float would not keep: index → rejection (event-rules.ts). */
  numbers?: Map<number, Rejection>;
}

/** The parsed body, and its events holding what no store keeps (as in DecodedBatch). */
export interface DecodedBody {
  value: unknown;
  unstorable?: Map<number, string>;
  numbers?: Map<number, Rejection>;
}

/** A JSON body is there: its content type, and not empty. */
export function requireJson(head: RequestHead, body: Buffer): void {
  const ct = head.headers['content-type'];
  if (!isJsonContentType(ct))
    throw new ApiError('unsupported_media_type', `Content-Type must be application/json${ct ? `, not ${ct}` : ''}.`);
  if (body.length === 0)
    throw new ApiError('malformed_json', 'The request body is empty; expected a JSON object with "events".');
}

/** The body as JSON; text a store cannot hold costs only the event holding it, anywhere else the request. */
export function decode(head: RequestHead, body: Buffer): DecodedBody {
  requireJson(head, body);
  const decoded = decodeJson(body, { exactNumbers: true });
  if (!decoded.ok && (decoded.reason === 'not_utf8' || decoded.reason === 'syntax')) {
    throw new ApiError(
      'malformed_json',
      decoded.reason === 'not_utf8'
        ? 'The request body is not valid UTF-8.'
        : `The request body is not valid JSON: ${decoded.message}.`,
    );
  }
  const numbers = numberRejections(decoded.inexact);
  if (decoded.ok) return { value: decoded.value, numbers };
  const [top, first] = decoded.path;
  const events = (decoded.value as { events?: unknown }).events;
  if (top !== 'events' || typeof first !== 'number' || !Array.isArray(events)) {
    const field = pathText(decoded.path) || 'body';
    throw invalid([{ field, code: 'invalid_unicode', message: `${field} ${decoded.message}` }]);
  }
  const unstorable = new Map([[first, pathText(decoded.path.slice(2))]]);
  for (let i = first + 1; i < events.length; i++) {
    const found = inspect(events[i], { text: true });
    if (found) unstorable.set(i, pathText(found.path));
  }
  return { value: decoded.value, unstorable, numbers };
}

/** The batch's shape (1 to 1000 events); each event's own rules are checked per event later. */
export function validate(decoded: DecodedBody): DecodedBatch {
  if (!shape.check(decoded.value)) {
    shape.explain(decoded.value);
    throw invalid(fieldErrors(shape.explain.errors ?? shape.check.errors));
  }
  const { unstorable, numbers } = decoded;
  return { events: (decoded.value as { events: unknown[] }).events, unstorable, numbers };
}

const query = compileQuery(EventsQuery);

export interface EventsQueryParams {
  customer_id?: string;
  event_name?: string;
  from?: string;
  to?: string;
  limit?: number;
  cursor?: string;
}

/** GET /v1/events's query string, first value of each parameter. */
export function queryParams(qs: string): EventsQueryParams {
  const q: Record<string, unknown> = Object.create(null);
  for (const [k, v] of new URLSearchParams(qs)) if (!(k in q)) q[k] = v;
  if (!query(q)) throw invalid(fieldErrors(query.errors), 'The query string is invalid; see errors.');
  return q as EventsQueryParams;
}
