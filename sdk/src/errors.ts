/**
 * Why a batch was given up, by code (branch on `code`, never on the message). Each error carries
 * what a producer needs to act on it: the attempts made, whether the service may have stored the
 * batch anyway (`outcomeUnknown`: the last request was sent and its answer never came), and on
 * surface B the batch's Idempotency-Key, under which the same events can be sent again safely.
 */
export class IngestClientError extends Error {
  code = 'INGEST_ERROR';
  /** Requests made for the batch. */
  attempts = 0;
  /** The last request reached the service and no answer came back: it may have been stored. */
  outcomeUnknown = false;
  /** Surface B: the batch's Idempotency-Key (24 hours of validity on the service). */
  idempotencyKey?: string;
}

/** The service answered with a status that is not retried, or kept answering a retryable one. */
export class HttpStatusError extends IngestClientError {
  override code = 'INGEST_HTTP_STATUS';
  constructor(
    readonly status: number,
    /** The answer's body, as text (JSON on every ingestion surface). */
    readonly body: string,
    /** From Retry-After, in ms. */
    readonly retryAfterMs?: number,
  ) {
    super(`the service answered ${status}${summary(body)}`);
  }
}

/** No complete answer within `timeoutMs`. */
export class RequestTimeoutError extends IngestClientError {
  override code = 'INGEST_TIMEOUT';
  constructor(timeoutMs: number) {
    super(`no answer within ${timeoutMs} ms`);
  }
}

/** The connection failed (refused, reset, closed before the answer). */
export class NetworkError extends IngestClientError {
  override code = 'INGEST_NETWORK';
  constructor(cause: unknown) {
    const c = cause as { code?: string; message?: string };
    super(`network error: ${c?.code ?? c?.message ?? String(cause)}`, { cause });
  }
}

/** close() ran out of time before the batch was resolved. */
export class ClientClosedError extends IngestClientError {
  override code = 'INGEST_CLOSED';
  constructor(message = 'the client was closed before the batch was resolved') {
    super(message);
  }
}

/** A few words of the service's explanation, for the message. */
function summary(body: string): string {
  try {
    const b = JSON.parse(body) as { detail?: unknown; title?: unknown; code?: unknown };
    const d = typeof b.detail === 'string' ? b.detail : typeof b.title === 'string' ? b.title : undefined;
    if (d !== undefined) return `: ${d.slice(0, 200)}`;
    if (b.detail !== undefined) return `: ${JSON.stringify(b.detail).slice(0, 200)}`;
  } catch {
    // not JSON: the status says it
  }
  return '';
}
