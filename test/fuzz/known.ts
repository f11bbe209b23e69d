import type { Req } from './http.js';
import type { Violation } from './properties.js';

/**
 * Failures found by fuzzing and not fixed yet. Each has its smallest reproducer as a `todo` case
 * in cases.test.ts; while it stands, a fuzz run counts the matching failures apart (reported as
 * todo, not failing the run) so the rest of the surface is still checked. A fix makes its count
 * drop to zero; then the entry goes, and its case loses the todo.
 */
export interface Known {
  id: string;
  reason: string;
  matches(r: Req, v: Violation): boolean;
  /** The server holds such a request unanswered until its idle timeout (about 10 s): wait less for it. */
  stalls?: (r: Req) => boolean;
}

const values = (r: Req, name: string) => r.headers.filter(([k]) => k.toLowerCase() === name).map(([, v]) => v);
const unanswered = (v: Violation) => v.kind === 'no_answer';
const manyFields = (r: Req) => r.headers.length + 1 > 49;
/** A C0 control character or DEL. */
export const hasControl = (s: string): boolean =>
  [...s].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f);
const controlInTarget = (r: Req) => hasControl(r.path);

export const KNOWN: Known[] = [
  {
    id: 'length-with-chunked',
    reason: 'uWS closes the connection unanswered on Transfer-Encoding together with Content-Length (400 expected)',
    matches: (r, v) =>
      unanswered(v) && values(r, 'transfer-encoding').length > 0 && values(r, 'content-length').length > 0,
  },
  {
    id: 'length-not-a-number',
    reason: 'uWS closes the connection unanswered on a Content-Length that is not a plain number (400 expected)',
    matches: (r, v) => unanswered(v) && values(r, 'content-length').some((x) => !/^\d+$/.test(x)),
  },
  {
    id: 'many-header-fields',
    reason: 'uWS closes the connection unanswered on a request with more than 49 header fields (431 expected)',
    matches: (r, v) => unanswered(v) && manyFields(r),
    stalls: manyFields,
  },
  {
    id: 'control-character-in-target',
    reason: 'uWS closes the connection unanswered on a control character in the request target (400 expected)',
    matches: (r, v) => unanswered(v) && controlInTarget(r),
    stalls: controlInTarget,
  },
  {
    id: 'lower-case-method',
    reason: 'uWS closes the connection unanswered on a method in lower case such as "post" (405 or 501 expected)',
    matches: (r, v) => unanswered(v) && r.method !== r.method.toUpperCase(),
  },
  {
    id: 'large-request-head',
    reason:
      'uWS closes the connection unanswered on a request head (request line and header fields) over 4 KiB that ' +
      'arrives in more than one read (431 or 414 expected; in one read it is taken)',
    matches: (r, v) =>
      unanswered(v) && r.path.length + r.headers.reduce((n, [k, x]) => n + k.length + x.length + 4, 0) > 4096,
  },
  {
    id: 'idempotent-answer-with-lone-surrogate',
    reason:
      'surface B with an Idempotency-Key: an event refused as invalid_unicode for a key holding an unpaired ' +
      'surrogate makes the answer unstorable: 500, and the accepted events of the batch are stored anyway',
    matches: (r, v) =>
      (v.kind === 'server_error' || v.kind === 'stored_by_rejected') &&
      values(r, 'idempotency-key').length > 0 &&
      /\\u[dD][89a-fA-F]/.test(r.body?.toString('latin1') ?? ''),
  },
  {
    id: 'events-query-store-down-500',
    reason:
      'GET /v1/events answers 500 internal_error, not 503 with Retry-After, while ClickHouse does not answer ' +
      '(seen while another test stopped it)',
    matches: (r, v) =>
      v.kind === 'server_error' && (r.method === 'GET' || r.method === 'HEAD') && /^\/v1\/events(\?|$)/.test(r.path),
  },
  {
    id: 'oversized-body-reset',
    reason:
      'a body over the cap can get a reset instead of the 413: the 413 is written and the connection closed with ' +
      'the rest of the body unread (often for 8 MiB + 1 to bulk import, now and then for smaller bodies)',
    matches: (r, v) => unanswered(v) && (r.body?.length ?? 0) > 128 * 1024,
  },
  {
    id: 'token-transport-error-without-rfc6749',
    reason:
      'POST /v1/oauth/token: errors raised before the form is read (413 body too large, 415 unsupported ' +
      'Content-Encoding or broken gzip, 400 two Content-Lengths) carry no RFC 6749 error / error_description',
    matches: (r, v) =>
      v.kind === 'wrong_shape' &&
      r.method === 'POST' &&
      r.path.startsWith('/v1/oauth/token') &&
      / is not an RFC 6749 code: (400|413|415) .*(Content-Encoding|Content-Length|Transfer-Encoding|exceeds|gzip)/.test(
        v.message,
      ),
  },
  {
    id: 'ingest-unknown-path-not-problem',
    reason:
      "the ingest tier answers an unknown path next to surface B (/v1/events/, //v1/events) with surface A's " +
      '404 {detail}, not problem+json',
    matches: (r, v) =>
      v.kind === 'wrong_shape' && / 404 \{"detail":"Not Found"\}/.test(v.message) && !r.path.startsWith('/v1/ingest/'),
  },
];

export const knownIssue = (r: Req, v: Violation): Known | undefined => KNOWN.find((k) => k.matches(r, v));
export const stalls = (r: Req): boolean => KNOWN.some((k) => k.stalls?.(r));
