import { ApiError, ERRORS, type ErrorCode } from './errors.js';

/** The single place an error becomes `application/problem+json`. */
export function problemBody(baseUrl: string, err: ApiError, instance: string, traceId: string): Record<string, unknown> {
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
  validation_failed: 'The body, query or path failed validation; `errors[]` lists each field with a code and message.',
  malformed_json: 'The body is not valid JSON (or not UTF-8).',
  invalid_cursor: 'The `cursor` query parameter was not produced by this API.',
  invalid_request: 'The request is malformed in a way not tied to one field.',
  invalid_grant: 'OAuth token endpoint: the code or refresh token is unknown, used, expired, revoked, issued to another client, or the PKCE verifier or redirect_uri does not match.',
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
  unsupported_media_type: 'The body must be `application/json` (the token endpoint: `application/x-www-form-urlencoded`).',
  renewal_date_in_past: 'renewal_date is before today (UTC).',
  idempotency_key_reused: 'The Idempotency-Key was used in the last 24 hours with a different request body.',
  unprocessable: 'The request is well-formed but semantically invalid (for example an expiry in the past).',
  rate_limited: 'The workspace exceeded a rate limit; retry after `Retry-After` seconds.',
  internal_error: 'An unexpected error; quote trace_id to support.',
  service_unavailable: 'A dependency is unavailable; retry later.',
};
