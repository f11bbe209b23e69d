import zlib from 'node:zlib';
import type { BufferPool } from '../buffer-pool.js';
import {
  FRAMING_FIELDS,
  readHead,
  reply,
  type HttpRequest,
  type HttpResponse,
  type ReplyState,
  type RequestHead,
} from './uws.js';

// Request bodies on the uWS tiers: reading one with a cap, and refusing one without a reset.

export class BodyError extends Error {
  constructor(
    readonly kind: 'too_large' | 'bad_encoding' | 'aborted',
    message: string,
    /** The answer must close the connection: the body was not read to its end. */
    readonly close = false,
  ) {
    super(message);
  }
}

/**
 * A body the server does not want (over its cap, a wrong encoding, an unknown path, a framing in
 * doubt) is still read, and dropped, before the answer: an answer that closes the connection (a
 * request asking for it, a framing in doubt, a server draining) would otherwise leave bytes unread,
 * and the kernel resets a socket closed with unread bytes, so the client, busy sending, sees the
 * reset instead of the answer. The reading stops this far past the cap, or when no byte came for
 * BODY_QUIET_MS (a client waiting for the answer before it sends the rest); the answer then closes
 * the connection. A body declared larger is not read at all.
 */
export const MAX_DROPPED_BODY_BYTES = 16 * 1024 * 1024;
const BODY_QUIET_MS = 500;

/**
 * Counts the dropped rest of a body and calls `done` once: `whole` at its end, or not whole past
 * MAX_DROPPED_BODY_BYTES or after BODY_QUIET_MS without a byte.
 */
function dropper(done: (whole: boolean) => void): (bytes: number, isLast: boolean) => void {
  let seen = 0;
  let called = false;
  const finish = (whole: boolean) => {
    if (called) return;
    called = true;
    clearTimeout(timer);
    done(whole);
  };
  const timer = setTimeout(() => finish(false), BODY_QUIET_MS);
  return (bytes, isLast) => {
    if (called) return;
    seen += bytes;
    if (isLast) finish(true);
    else if (seen > MAX_DROPPED_BODY_BYTES) finish(false);
    else timer.refresh();
  };
}

/**
 * Calls `done` once the request's body is read and dropped as uWS frames it (see
 * MAX_DROPPED_BODY_BYTES); `whole` says it was read to its end, else the answer must close the
 * connection. uWS ends every request, with a body or not, with a last (maybe empty) chunk. The
 * caller has registered onAborted, and `done` replies with that state.
 */
export function afterBody(res: HttpResponse, done: (whole: boolean) => void): void {
  const feed = dropper(done);
  res.onData((ab, isLast) => feed(ab.byteLength, isLast));
}

/**
 * Answers a request whose body no handler wants (an unknown path, a wrong method) once its body is
 * read and dropped (afterBody), closing the connection when the framing is in doubt or the body was
 * not read whole.
 */
export function refuseUnread(
  res: HttpResponse,
  req: HttpRequest,
  head: boolean,
  status: string,
  headers: Array<[string, string]>,
  body: string,
): void {
  const state: ReplyState = { aborted: false, head };
  // Whether the body's length is in doubt (framingProblem): the answer must close the connection.
  const doubt = readHead(req, res, FRAMING_FIELDS).framing !== undefined;
  res.onAborted(() => {
    state.aborted = true;
  });
  afterBody(res, (whole) => reply(res, state, status, headers, body, doubt || !whole));
}

/**
 * Reads the whole request body with a hard cap (before and after gunzip). Calls back exactly once
 * unless the client aborted. The response must have had onAborted registered by the caller,
 * which also calls `state.aborted = true`. A body refused before it is all read (over the cap, an
 * unsupported encoding) is refused once the rest is dropped (MAX_DROPPED_BODY_BYTES); the error's
 * `close` says the answer must close the connection.
 */
export function readBody(
  res: HttpResponse,
  head: RequestHead,
  maxBytes: number,
  state: { aborted: boolean },
  cb: (err: BodyError | null, body: Buffer) => void,
  /** Where an identity body of a declared length up to its largest buffer is read into (lib/buffer-pool.ts). */
  pool?: BufferPool,
): void {
  const refuse = (kind: BodyError['kind'], message: string, whole: boolean) =>
    cb(new BodyError(kind, message, !whole), Buffer.alloc(0));
  const tooLarge = `request body exceeds ${maxBytes} bytes`;
  const declared = Number(head.headers['content-length']);
  if (declared > maxBytes + MAX_DROPPED_BODY_BYTES) {
    refuse('too_large', tooLarge, false);
    return;
  }
  if (declared > maxBytes) {
    afterBody(res, (whole) => refuse('too_large', tooLarge, whole));
    return;
  }
  const encoding = (head.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding !== 'identity' && encoding !== 'gzip') {
    const message = `unsupported Content-Encoding "${encoding}" (identity or gzip)`;
    afterBody(res, (whole) => refuse('bad_encoding', message, whole));
    return;
  }
  // A declared length small enough is read straight into one buffer of the pool's.
  let into =
    pool && encoding === 'identity' && declared > 0 && declared <= pool.maxBytes ? pool.take(declared) : undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  let done = false;
  // A chunked body past the cap: the rest is dropped, then the 413 goes.
  let drop: ((bytes: number, isLast: boolean) => void) | undefined;
  res.onData((ab, isLast) => {
    if (drop) return drop(ab.byteLength, isLast);
    if (done) return;
    size += ab.byteLength;
    if (size > maxBytes) {
      done = true;
      chunks.length = 0;
      if (into) pool!.give(into);
      drop = dropper((whole) => refuse('too_large', tooLarge, whole));
      return drop(0, isLast);
    }
    // The ArrayBuffer is only valid during this callback: copy it.
    if (into && size > into.length) {
      // Longer than declared (uWS ends a body at its declared length, so never): on in chunks.
      chunks.push(Buffer.from(into.subarray(0, size - ab.byteLength)));
      pool!.give(into);
      into = undefined;
    }
    if (into) into.set(new Uint8Array(ab), size - ab.byteLength);
    else chunks.push(Buffer.from(Buffer.from(ab)));
    if (!isLast) return;
    done = true;
    if (into) return cb(null, into.subarray(0, size));
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
