import { fieldCount, type Req } from './http.js';
import type { Violation } from './properties.js';

/**
 * Failures found by fuzzing and not fixed. Each has its smallest reproducer as a `todo` case in
 * cases.test.ts; while it stands, a fuzz run counts the matching failures apart (reported as todo,
 * not failing the run) so the rest of the surface is still checked. A fix makes its count drop to
 * zero; then the entry goes, and its case loses the todo. What is left happens inside the HTTP
 * parser of uWebSockets.js, out of our code's reach (docs/reliability.md, "Limits of the HTTP parser").
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
/** uWS takes 48 header fields at most (measured: 48 with Host answered, 49 dropped). */
const manyFields = (r: Req) => fieldCount(r) > 48;
/** A C0 control character or DEL. */
export const hasControl = (s: string): boolean =>
  [...s].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f);
const controlInTarget = (r: Req) => hasControl(r.path);

/** Where the entries below happen (docs/reliability.md, "Limits of the HTTP parser"). */
const PARSER =
  'uWebSockets.js drops the request while parsing it, before any code of ours runs, so nothing can answer: ';
/** A body length in doubt: uWS calls the handler, which refuses the request before any step, then closes unanswered. */
const FRAMING =
  'uWebSockets.js closes the connection itself, dropping the 400 our handler gives before any step of the route: ';

export const KNOWN: Known[] = [
  {
    id: 'length-with-chunked',
    reason: FRAMING + 'Transfer-Encoding together with Content-Length closes the connection at once (400 expected)',
    matches: (r, v) =>
      unanswered(v) && values(r, 'transfer-encoding').length > 0 && values(r, 'content-length').length > 0,
  },
  {
    id: 'length-not-a-number',
    reason:
      FRAMING +
      'a Content-Length that is not a plain number of at most 9 digits closes the connection at once (400 expected)',
    // uWS takes 1 to 9 digits (lib/http/uws.ts framingProblem).
    matches: (r, v) => unanswered(v) && values(r, 'content-length').some((x) => !/^\d{1,9}$/.test(x)),
  },
  {
    id: 'many-header-fields',
    reason:
      PARSER +
      'more than 48 header fields (the Host line included) leave the request unanswered until the idle timeout ' +
      'closes the connection (431 expected)',
    matches: (r, v) => unanswered(v) && manyFields(r),
    stalls: manyFields,
  },
  {
    id: 'control-character-in-target',
    reason:
      PARSER +
      'a control character in the request target leaves the request unanswered until the idle timeout closes ' +
      'the connection (400 expected)',
    matches: (r, v) => unanswered(v) && controlInTarget(r),
    stalls: controlInTarget,
  },
  {
    id: 'lower-case-method',
    reason: PARSER + 'a method in lower case such as "post" closes the connection at once (405 or 501 expected)',
    matches: (r, v) => unanswered(v) && r.method !== r.method.toUpperCase(),
  },
  {
    id: 'large-request-head',
    reason:
      PARSER +
      'a request head (request line and header fields) over 4 KiB that arrives in more than one read closes ' +
      'the connection at once (431 or 414 expected; in one read it is taken)',
    matches: (r, v) =>
      unanswered(v) && r.path.length + r.headers.reduce((n, [k, x]) => n + k.length + x.length + 4, 0) > 4096,
  },
];

export const knownIssue = (r: Req, v: Violation): Known | undefined => KNOWN.find((k) => k.matches(r, v));
export const stalls = (r: Req): boolean => KNOWN.some((k) => k.stalls?.(r));

/** Defects the fuzz suite found and that were fixed, each kept as a plain case in cases.test.ts and a regression test. */
export const FIXED: Array<{ id: string; fix: string }> = [
  {
    id: 'api-key-allowlist-zone-500',
    fix:
      'an IPv6 zone in `ip_allowlist` (`fe80::1%eth0`) answered 500 (PostgreSQL `inet` refuses it); now 400 ' +
      '`validation_failed` with `invalid_cidr` at `ip_allowlist[i]` (test/hardening/core-api.test.ts)',
  },
  {
    id: 'idempotent-answer-with-lone-surrogate',
    fix:
      'surface B with an Idempotency-Key and a property key holding an unpaired surrogate answered 500 after the ' +
      "batch's good events were stored: the answer named the key raw and could not be recorded as jsonb. Field " +
      'names now write such keys as their escape (`properties.\\ud800`), and the answer is recorded before the ' +
      'publish, so nothing that can fail in PostgreSQL runs after events are stored (test/hardening/ingest.test.ts)',
  },
  {
    id: 'events-query-store-down-500',
    fix:
      'GET /v1/events answered 500 while ClickHouse did not answer; now 503 `service_unavailable` with ' +
      'Retry-After, like the core API for its stores (test/hardening/ingest.test.ts)',
  },
  {
    id: 'token-transport-error-without-rfc6749',
    fix:
      'POST /v1/oauth/token: 413, 415 and the 400 for two Content-Lengths lacked RFC 6749 `error` / ' +
      '`error_description`; every error of the endpoint now carries them (test/hardening/credentials.test.ts)',
  },
  {
    id: 'ingest-unknown-path-not-problem',
    fix:
      "unknown paths under /v1/events (`/v1/events/`, `//v1/events`) answered surface A's 404 `{detail}`; now " +
      "surface B's problem+json 404 `not_found` (test/hardening/ingest.test.ts)",
  },
  {
    id: 'metric-values-range-outside-datetime-500',
    fix:
      'GET /v1/metrics/{id}/values with `from` or `to` before 1970 answered 500 (no ClickHouse DateTime literal ' +
      "for it), and a `from` past 2106-02-07 wrapped around and listed every period; a bound outside DateTime's " +
      'range now holds for every stored period or for none (test/hardening/derived-values.test.ts)',
  },
  {
    id: 'proposal-name-split-surrogate-500',
    fix:
      'POST /v1/metrics/proposals with a description of more than 80 characters outside the BMP (emoji) answered ' +
      '500: the proposed name was cut inside a surrogate pair and PostgreSQL refused the jsonb; names are now cut ' +
      'by code points (test/unit/metrics-proposal.test.ts)',
  },
  {
    id: 'oversized-body-reset',
    fix:
      'a body over the cap, or sent to an unknown path, with a wrong method or with its length in doubt, was ' +
      'answered and the connection closed with the body unread, which the kernel turns into a reset the client ' +
      'often saw instead of the answer; such a body is now read and dropped before the answer (up to 16 MiB, or ' +
      'until it pauses for half a second), and the connection kept when it was read whole ' +
      '(test/hardening/oversized.test.ts)',
  },
  {
    id: 'dropped-request-acted-on',
    fix:
      'a request that uWS closes unanswered for its Content-Length (`2abc`, `-2`, `2, 2`, ten digits) was still ' +
      'carried out by a route that reads no body: the client saw a reset while a customer was restored or ' +
      'soft-deleted (seen by the records surface as the customers table changed under the next, refused request). ' +
      'uWS calls the handler before it closes; such a request is now refused before any step runs ' +
      '(test/hardening/length-in-doubt.test.ts)',
  },
  {
    id: 'infinite-number-stored',
    fix:
      'a number beyond a 64-bit float in a core API body (`1E400`), which JSON.parse reads as Infinity, was ' +
      "stored: an objective with target_value Infinity made every later list of the customer's objectives answer " +
      'null where a number is documented, and JSON columns kept null for it. Such a number is now 400 ' +
      '`too_large` naming its field, and migration 0090 clamps stored infinite targets ' +
      '(test/metrics/materialize.test.ts, test/unit/json.test.ts)',
  },
];
