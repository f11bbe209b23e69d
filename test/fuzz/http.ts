import net from 'node:net';

/**
 * A bare HTTP/1.1 client for fuzzing: the bytes sent are exactly the ones described (duplicate or
 * oversized headers, a Content-Length that lies, chunked bodies, HEAD on any route), and an answer
 * that never comes, or a connection closed before a complete response, is a result in itself
 * rather than an exception. One connection per request, so one case cannot poison the next.
 */

export interface Req {
  method: string;
  /** Path and query string, sent as they are (percent-encoding errors included). */
  path: string;
  /** Sent in order; a name given twice is sent twice. */
  headers: Array<[string, string]>;
  body?: Buffer;
  /** Send the body with chunked transfer coding (and no Content-Length unless a header says so). */
  chunked?: boolean;
  /** Write the request in pieces of this many bytes, each its own TCP segment, as a slow client would. */
  pieces?: number;
}

export interface Answered {
  ok: true;
  status: number;
  /** Lower-case names; every value of a repeated field. */
  headers: Map<string, string[]>;
  body: Buffer;
  text: string;
  /** The body parsed as JSON, or undefined. */
  json: unknown;
}

export interface Unanswered {
  ok: false;
  /** reset: closed before any byte; truncated: closed inside a response; timeout: nothing complete in time. */
  failure: 'reset' | 'truncated' | 'timeout';
  detail: string;
}

export type Answer = Answered | Unanswered;

export const header = (a: Answered, name: string): string | undefined => a.headers.get(name)?.[0];

const has = (headers: Array<[string, string]>, name: string) => headers.some(([k]) => k.toLowerCase() === name);

/** The header fields `encode` sends: Host, the request's own, and the framing field it adds when the request has none. */
function fields(r: Req): string[] {
  const lines = ['Host: 127.0.0.1'];
  for (const [k, v] of r.headers) lines.push(`${k}: ${v}`);
  if (r.chunked) {
    if (!has(r.headers, 'transfer-encoding')) lines.push('Transfer-Encoding: chunked');
  } else if (r.body !== undefined && !has(r.headers, 'content-length') && !has(r.headers, 'transfer-encoding')) {
    lines.push(`Content-Length: ${r.body.length}`);
  }
  return lines;
}

/** How many header fields a request is sent with, Host included. */
export const fieldCount = (r: Req): number => fields(r).length;

function encode(r: Req): Buffer {
  // The request line as UTF-8 (clients send raw UTF-8 in paths), header fields byte for byte.
  const lines = fields(r);
  let body = r.body ?? Buffer.alloc(0);
  if (r.chunked) {
    const parts: Buffer[] = [];
    // Several chunks of odd sizes: a server must reassemble them, not take the first.
    for (let i = 0; i < body.length; i += 997) {
      const c = body.subarray(i, i + 997);
      parts.push(Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n'));
    }
    parts.push(Buffer.from('0\r\n\r\n'));
    body = Buffer.concat(parts);
  }
  return Buffer.concat([
    Buffer.from(`${r.method} ${r.path} HTTP/1.1\r\n`),
    Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'),
    body,
  ]);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Decodes a complete chunked body, or returns undefined while it is incomplete. */
function dechunk(buf: Buffer): Buffer | undefined {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', at);
    if (eol < 0) return undefined;
    const size = Number.parseInt(buf.subarray(at, eol).toString('latin1'), 16);
    if (!Number.isFinite(size)) return Buffer.concat(out);
    if (size === 0) return Buffer.concat(out);
    if (buf.length < eol + 2 + size + 2) return undefined;
    out.push(buf.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

export function send(port: number, r: Req, timeoutMs = 20_000): Promise<Answer> {
  const bytes = encode(r);
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    let done = false;
    let status = 0;
    let headers = new Map<string, string[]>();
    let bodyStart = -1;
    let mode: 'none' | 'length' | 'chunked' | 'close' = 'none';
    let length = 0;
    let lastError = '';
    const finish = (a: Answer) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      resolve(a);
    };
    const answered = (body: Buffer) => {
      const text = body.toString('utf8');
      finish({ ok: true, status, headers, body, text, json: parseJson(text) });
    };
    const timer = setTimeout(
      () => finish({ ok: false, failure: 'timeout', detail: `no complete answer within ${timeoutMs} ms` }),
      timeoutMs,
    );
    const progress = () => {
      while (bodyStart < 0) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
        status = Number(lines[0].split(' ')[1]);
        headers = new Map();
        for (const line of lines.slice(1)) {
          const i = line.indexOf(':');
          const k = line.slice(0, i).trim().toLowerCase();
          headers.set(k, [...(headers.get(k) ?? []), line.slice(i + 1).trim()]);
        }
        if (status >= 100 && status < 200) {
          // An interim answer (100 Continue): the real one follows.
          buf = buf.subarray(end + 4);
          continue;
        }
        bodyStart = end + 4;
        const te = headers.get('transfer-encoding')?.join(',') ?? '';
        if (r.method === 'HEAD' || status === 204 || status === 304) mode = 'none';
        else if (/chunked/i.test(te)) mode = 'chunked';
        else if (headers.has('content-length')) {
          mode = 'length';
          length = Number(headers.get('content-length')![0]);
        } else mode = 'close';
      }
      const rest = buf.subarray(bodyStart);
      if (mode === 'none') return answered(Buffer.alloc(0));
      if (mode === 'length' && rest.length >= length) return answered(rest.subarray(0, length));
      if (mode === 'chunked') {
        const body = dechunk(rest);
        if (body) answered(body);
      }
    };
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      progress();
    });
    // A server may answer before reading the whole body and close: the write fails, the answer counts.
    s.on('error', (err) => {
      lastError = String((err as NodeJS.ErrnoException).code ?? err.message);
    });
    s.on('close', () => {
      if (done) return;
      if (bodyStart >= 0 && mode === 'close') return answered(buf.subarray(bodyStart));
      finish(
        buf.length === 0
          ? {
              ok: false,
              failure: 'reset',
              detail: `connection closed without an answer${lastError ? ` (${lastError})` : ''}`,
            }
          : {
              ok: false,
              failure: 'truncated',
              detail: `connection closed inside the answer: ${JSON.stringify(buf.subarray(0, 200).toString('latin1'))}`,
            },
      );
    });
    s.on('connect', async () => {
      if (!r.pieces) return void s.write(bytes);
      s.setNoDelay(true);
      for (let i = 0; i < bytes.length && !done; i += r.pieces) {
        s.write(bytes.subarray(i, i + r.pieces));
        await new Promise((ok) => setTimeout(ok, 2));
      }
    });
  });
}
