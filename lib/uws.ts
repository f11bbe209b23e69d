import { createRequire } from 'node:module';
import { isUtf8 } from 'node:buffer';
import zlib from 'node:zlib';
import type * as UWS from 'uWebSockets.js';

export type HttpResponse = UWS.HttpResponse;
export type HttpRequest = UWS.HttpRequest;
export type TemplatedApp = UWS.TemplatedApp;
export type ListenSocket = UWS.us_listen_socket;

/**
 * Loads the native uWebSockets.js binary. The package silently falls back to a slow pure-JS
 * server when no binary matches this Node.js ABI; we refuse to run on that fallback.
 */
export function loadUws(): typeof UWS {
  if (/^(1|true)$/i.test(process.env.UWS_USE_FALLBACK ?? ''))
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
      `uWebSockets.js has no native binary for Node ${process.version} (ABI ${process.versions.modules}) on ${process.platform}-${process.arch}; refusing to start on its JS fallback`,
    );
  }
  return uws;
}

export class BodyError extends Error {
  constructor(
    readonly kind: 'too_large' | 'bad_encoding' | 'aborted',
    message: string,
  ) {
    super(message);
  }
}

/** What a handler copies from the request before its first await (uWS frees it after). */
export interface RequestHead {
  method: string;
  url: string;
  query: string;
  headers: Record<string, string>;
  remoteAddress: string;
}

export function readHead(req: HttpRequest, res: HttpResponse): RequestHead {
  const headers: Record<string, string> = {};
  req.forEach((k, v) => {
    headers[k] = v;
  });
  return {
    method: req.getCaseSensitiveMethod?.() ?? req.getMethod().toUpperCase(),
    url: req.getUrl(),
    query: req.getQuery() ?? '',
    headers,
    remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString(),
  };
}

/**
 * Reads the whole request body with a hard cap (before and after gunzip). Calls back exactly once
 * unless the client aborted. The response must have had onAborted registered by the caller,
 * which also calls `state.aborted = true`.
 */
export function readBody(
  res: HttpResponse,
  head: RequestHead,
  maxBytes: number,
  state: { aborted: boolean },
  cb: (err: BodyError | null, body: Buffer) => void,
): void {
  const declared = Number(head.headers['content-length']);
  if (declared > maxBytes) {
    cb(new BodyError('too_large', `request body exceeds ${maxBytes} bytes`), Buffer.alloc(0));
    return;
  }
  const encoding = (head.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding !== 'identity' && encoding !== 'gzip') {
    cb(new BodyError('bad_encoding', `unsupported Content-Encoding "${encoding}" (identity or gzip)`), Buffer.alloc(0));
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let done = false;
  res.onData((ab, isLast) => {
    if (done) return;
    size += ab.byteLength;
    if (size > maxBytes) {
      done = true;
      cb(new BodyError('too_large', `request body exceeds ${maxBytes} bytes`), Buffer.alloc(0));
      return;
    }
    // The ArrayBuffer is only valid during this callback: copy it.
    chunks.push(Buffer.from(Buffer.from(ab)));
    if (!isLast) return;
    done = true;
    const raw = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
    if (encoding === 'identity') return cb(null, raw);
    zlib.gunzip(raw, { maxOutputLength: maxBytes }, (err, out) => {
      if (state.aborted) return;
      if (!err) return cb(null, out);
      if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' || err instanceof RangeError)
        cb(new BodyError('too_large', `decompressed body exceeds ${maxBytes} bytes`), Buffer.alloc(0));
      else cb(new BodyError('bad_encoding', 'body is not valid gzip'), Buffer.alloc(0));
    });
  });
}

export { isUtf8 };

/** Writes a complete response unless the client has gone; always corked. */
export function reply(
  res: HttpResponse,
  state: { aborted: boolean },
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
    res.end(body, close);
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
