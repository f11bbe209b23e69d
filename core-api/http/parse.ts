import { isUtf8 } from '../../lib/http/uws.js';
import type { RequestHead } from '../../lib/http/uws.js';
import { decodeJson, type InexactNumber, inexactMessage, isJsonContentType, pathText } from '../../lib/json.js';
import { ApiError, invalid } from '../../lib/problem.js';

// Parsing of the core API's request parts: query strings, JSON bodies and OAuth forms.

const FORM_TYPE = /^application\/x-www-form-urlencoded\s*(?:;|$)/i;
const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);
/**
 * How deep a JSON body may nest objects and arrays (the body itself is level 1). Far more than any
 * resource needs, and a bound for everything that walks a body recursively afterwards.
 */
export const MAX_JSON_DEPTH = 32;

/**
 * Query parameters, first value of each. URLSearchParams turns bad UTF-8 into U+FFFD and leaves a
 * bad %-escape as it is; the one thing it yields that the store cannot hold is U+0000.
 */
export function parseQuery(qs: string): Record<string, unknown> {
  const out: Record<string, unknown> = Object.create(null);
  for (const [k, v] of new URLSearchParams(qs)) {
    if (k.includes('\u0000') || v.includes('\u0000')) {
      const field = k.replaceAll('\u0000', '\\u0000');
      throw invalid([{ field, code: 'invalid_unicode', message: `${field} contains a NUL character (%00).` }]);
    }
    if (!(k in out)) out[k] = v;
  }
  return out;
}

export function parseJson(head: RequestHead, body: Buffer): unknown {
  const ct = head.headers['content-type'];
  if (!isJsonContentType(ct))
    throw new ApiError('unsupported_media_type', `Content-Type must be application/json${ct ? `, not ${ct}` : ''}.`);
  if (body.length === 0) throw new ApiError('malformed_json', 'The request body is empty; expected a JSON object.');
  const d = decodeJson(body, { maxDepth: MAX_JSON_DEPTH, forbiddenKeys: FORBIDDEN_KEYS, exactNumbers: true });
  if (d.ok) {
    if (d.inexact) throw invalidNumber(d.inexact[0]);
    return d.value;
  }
  switch (d.reason) {
    case 'not_utf8':
      throw new ApiError('malformed_json', 'The request body is not valid UTF-8.');
    case 'syntax':
      throw new ApiError('malformed_json', `The request body is not valid JSON: ${d.message}.`);
    case 'forbidden_key': {
      const key = String(d.path[d.path.length - 1]);
      throw invalid([{ field: pathText(d.path), code: 'forbidden_key', message: `The key "${key}" is not allowed.` }]);
    }
    case 'too_deep': {
      const field = pathText(d.path);
      throw invalid([{ field, code: 'too_deep', message: `${field} ${d.message}` }]);
    }
    case 'unstorable_text': {
      const field = pathText(d.path) || 'body';
      throw invalid([{ field, code: 'invalid_unicode', message: `${field} ${d.message}` }]);
    }
  }
}

/** A number the store would not keep as written: too_large beyond a float's range, else invalid_number. */
function invalidNumber(n: InexactNumber): ApiError {
  const field = pathText(n.path) || 'body';
  const code = Number.isFinite(Number(n.text)) ? 'invalid_number' : 'too_large';
  return invalid([{ field, code, message: inexactMessage(field, n.text) }]);
}

const oauthRequestError = (description: string) =>
  new ApiError('invalid_request', `${description}.`, undefined, [], {
    error: 'invalid_request',
    error_description: description,
  });

/**
 * An application/x-www-form-urlencoded body, strictly: UTF-8, every %-escape two hex digits
 * decoding to UTF-8, no NUL, no parameter twice (RFC 6749 §3.2). A body that breaks any of it is
 * an RFC 6749 invalid_request, never a half-decoded value handed on.
 */
export function parseForm(head: RequestHead, body: Buffer): Record<string, string> {
  const ct = head.headers['content-type'];
  if (ct === undefined || !FORM_TYPE.test(ct)) {
    throw new ApiError(
      'unsupported_media_type',
      'Content-Type must be application/x-www-form-urlencoded.',
      undefined,
      [],
      { error: 'invalid_request', error_description: 'Content-Type must be application/x-www-form-urlencoded' },
    );
  }
  if (!isUtf8(body)) throw oauthRequestError('The form body is not valid UTF-8');
  const out: Record<string, string> = Object.create(null);
  for (const pair of body.toString('utf8').split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const k = formDecode(eq < 0 ? pair : pair.slice(0, eq));
    const v = formDecode(eq < 0 ? '' : pair.slice(eq + 1));
    if (k === undefined || v === undefined)
      throw oauthRequestError(
        'The form body has a malformed %-escape (each % must be followed by two hex digits of UTF-8)',
      );
    if (k.includes('\u0000') || v.includes('\u0000'))
      throw oauthRequestError(`The form parameter ${k.replaceAll('\u0000', '%00')} contains a NUL character`);
    if (k in out) throw oauthRequestError(`The parameter ${k} is repeated`);
    out[k] = v;
  }
  return out;
}

/** One form component: `+` is a space, %XX a byte of UTF-8; undefined when the escapes are malformed. */
export function formDecode(s: string): string | undefined {
  try {
    return decodeURIComponent(s.replaceAll('+', ' '));
  } catch {
    return undefined;
  }
}
