import { createRequire } from 'node:module';
import { isUtf8 } from 'node:buffer';
import type * as UWS from 'uWebSockets.js';
import type { Logger } from '../logger.js';

export type HttpResponse = UWS.HttpResponse;
export type HttpRequest = UWS.HttpRequest;
export type TemplatedApp = UWS.TemplatedApp;
export type ListenSocket = UWS.us_listen_socket;

/** Listens on host:port; a tier that cannot (the port taken, say) logs why and exits with status 1. */
export function listenOrExit(app: TemplatedApp, host: string, port: number, log: Logger): Promise<ListenSocket> {
  return new Promise<ListenSocket>((resolve, reject) => {
    app.listen(host, port, (s) => (s ? resolve(s) : reject(new Error(`cannot listen on ${host}:${port}`))));
  }).catch((err: Error) => {
    log.fatal(err.message);
    process.exit(1);
  });
}

/**
 * Loads the native uWebSockets.js binary. The package silently falls back to a slow pure-JS
 * server when no binary matches this Node.js ABI, or when the process's UWS_USE_FALLBACK (`env`,
 * passed in by the tier's main) asks for it; we refuse to run on that fallback.
 */
export function loadUws(env: { UWS_USE_FALLBACK?: string }): typeof UWS {
  if (/^(1|true)$/i.test(env.UWS_USE_FALLBACK ?? ''))
    throw new Error('UWS_USE_FALLBACK is set: refusing to run on the uWebSockets.js JS fallback');
  const require = createRequire(import.meta.url);
  const warn = console.warn;
  let fellBack = false;
  console.warn = (...args: unknown[]) => {
    fellBack = true;
    warn(...args);
  };
  let uws: typeof UWS;
  try {
    uws = require('uWebSockets.js') as typeof UWS;
  } finally {
    console.warn = warn;
  }
  if (fellBack || !String(uws.App).includes('[native code]')) {
    throw new Error(
      `uWebSockets.js has no native binary for Node ${process.version} (ABI ${process.versions.modules}) on ` +
        `${process.platform}-${process.arch}; refusing to start on its JS fallback`,
    );
  }
  return uws;
}

/** What a handler copies from the request before its first await (uWS frees it after). */
export interface RequestHead {
  method: string;
  url: string;
  query: string;
  headers: Record<string, string>;
  remoteAddress: string;
  /** Why the body's length is in doubt (see framingProblem); the request is answered 400 and closed. */
  framing?: string;
}

/**
 * RFC 9112 §6.3: a request whose body length is in doubt is refused with 400 and its connection
 * closed, so nothing in front of us can take the bytes after it for another request. uWS v20.30
 * itself closes the connection, unanswered (an answer written from the handler is dropped), on
 * Transfer-Encoding together with Content-Length, on a Content-Length other than 1 to 9 digits
 * (`5abc`, `-5`, `5, 6`, ten digits) and on a Transfer-Encoding whose last coding is not chunked.
 * It does so after calling the handler, so each of these is refused here too: no step of such a
 * request runs (a route that reads no body would otherwise act on a request its client never
 * hears of). Left to us besides: a second Content-Length that differs from the first (uWS frames
 * by the first), and codings before chunked.
 */
export function framingProblem(headers: Record<string, string>, k: string, v: string): string | undefined {
  // An empty value is no Content-Length to uWS: the request goes on without a body.
  if (k === 'content-length' && !/^\d{0,9}$/.test(v))
    return 'The Content-Length header is not a number of at most 9 digits.';
  if (k === 'content-length' && headers[k] !== undefined && headers[k] !== v)
    return 'The request has two Content-Length headers with different values.';
  // uWS de-chunks "gzip, chunked" and hands on the bytes still gzip-coded as if they were the body.
  if (k === 'transfer-encoding' && v.trim().toLowerCase() !== 'chunked')
    return 'Transfer-Encoding other than chunked is not supported (use Content-Encoding: gzip).';
  if (
    (k === 'transfer-encoding' && 'content-length' in headers) ||
    (k === 'content-length' && 'transfer-encoding' in headers)
  )
    return 'The request has both Transfer-Encoding and Content-Length.';
  return undefined;
}

/**
 * The method as sent. uWS's getMethod() lowercases the request's buffer in place, after which
 * getCaseSensitiveMethod() answers in lower case too: call this one only.
 */
export const methodOf = (req: HttpRequest): string => req.getCaseSensitiveMethod?.() ?? req.getMethod().toUpperCase();

/**
 * What a handler copies from the request before its first await (uWS frees it after): every header
 * field, the query string and the client's address, or only the `wanted` fields (which must hold
 * the framing ones) and neither of the others, which is what the ingestion hot path reads.
 */
export function readHead(req: HttpRequest, res: HttpResponse, wanted?: ReadonlySet<string>): RequestHead {
  const headers: Record<string, string> = {};
  let framing: string | undefined;
  req.forEach((k, v) => {
    if (wanted && !wanted.has(k)) return;
    framing ??= framingProblem(headers, k, v);
    // uWS frames the body by the first Content-Length; so do our checks of the declared size.
    if (k !== 'content-length' || headers[k] === undefined) headers[k] = v;
  });
  return {
    method: methodOf(req),
    url: req.getUrl(),
    query: wanted ? '' : (req.getQuery() ?? ''),
    headers,
    remoteAddress: wanted ? '' : Buffer.from(res.getRemoteAddressAsText()).toString(),
    framing,
  };
}

/** The header fields the body's framing and encoding are read from: every head copy holds them. */
export const FRAMING_FIELDS: ReadonlySet<string> = new Set(['content-length', 'transfer-encoding', 'content-encoding']);

/** State of one response: `aborted` once the client is gone or the answer is written; `head` for HEAD. */
export interface ReplyState {
  aborted: boolean;
  head?: boolean;
}

export { isUtf8 };

/**
 * Writes a complete response unless the client has gone; always corked. An answer to HEAD has the
 * header fields the same request with GET would get and no content (RFC 9110 §9.3.2); uWS sends
 * whatever body it is given, whatever the method, which the client then reads as the next response.
 */
export function reply(
  res: HttpResponse,
  state: ReplyState,
  status: string,
  headers: Array<[string, string]>,
  body: string | Buffer,
  close = false,
): void {
  if (state.aborted) return;
  state.aborted = true;
  res.cork(() => {
    res.writeStatus(status);
    for (const [k, v] of headers) res.writeHeader(k, v);
    if (!state.head) res.end(body, close);
    // uWS writes a Content-Length of its own only here, and a wrong one when also asked to close.
    else if (close) res.endWithoutBody(0, true);
    else if (status.startsWith('204') || status.startsWith('304')) res.endWithoutBody();
    else res.writeHeader('Content-Length', String(Buffer.byteLength(body))).endWithoutBody();
  });
}

export const STATUS_TEXT: Record<number, string> = {
  200: '200 OK',
  201: '201 Created',
  202: '202 Accepted',
  204: '204 No Content',
  302: '302 Found',
  303: '303 See Other',
  400: '400 Bad Request',
  401: '401 Unauthorized',
  403: '403 Forbidden',
  404: '404 Not Found',
  405: '405 Method Not Allowed',
  409: '409 Conflict',
  413: '413 Payload Too Large',
  415: '415 Unsupported Media Type',
  422: '422 Unprocessable Entity',
  429: '429 Too Many Requests',
  500: '500 Internal Server Error',
  503: '503 Service Unavailable',
};
