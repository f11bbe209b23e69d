/**
 * Reads one HTTP/1.x answer from the bytes of a connection, in whatever pieces TCP delivers them:
 * status line, headers, then a body framed by Content-Length, by chunked Transfer-Encoding, or by
 * the end of the connection (RFC 9112, section 6.3). Interim 1xx answers are skipped. Anything it
 * cannot frame for certain is a protocol error, and the connection must then be closed: bytes it
 * misread would be taken for the next answer. It copies nothing it does not have to: body pieces
 * are views of the received chunks until the answer is complete.
 */

export interface Response {
  status: number;
  /** Names in lower case; repeated headers joined with ', '. */
  headers: Record<string, string>;
  body: string;
  /** The connection may carry the next request (HTTP/1.1 without `Connection: close`, a framed body). */
  keepAlive: boolean;
  /** Bytes arrived after the answer's end: the connection is out of step and must not be reused. */
  excess: boolean;
}

/** An answer that is not HTTP/1.x or cannot be framed; `code` in the style of Node's own parser errors. */
export class HttpParseError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

enum State {
  Head,
  Length,
  ChunkSize,
  ChunkData,
  ChunkEnd,
  Trailers,
  UntilClose,
  Done,
}

const CR = 0x0d;
const LF = 0x0a;
const EMPTY = Buffer.alloc(0);

export class ResponseParser {
  private state = State.Head;
  /** Bytes of a line or head not complete yet, waiting for the next chunk. */
  private pending: Buffer = EMPTY;
  private status = 0;
  private headers: Record<string, string> = {};
  private keepAlive = true;
  private headBytes = 0;
  /** Pieces of a head that spans chunks, and where the scan for its end stands (see scanHead). */
  private headParts: Buffer[] = [];
  private nl = 0;
  private seen = false;
  /** Body bytes still expected in this Content-Length body or this chunk. */
  private left = 0;
  private parts: Buffer[] = [];
  private bodyBytes = 0;
  /** How many of `parts` and `headParts` are copies, no longer views of a caller's chunk. */
  private ownedParts = 0;
  private ownedHead = 0;

  constructor(
    private readonly maxHeadBytes = 64 * 1024,
    private readonly maxBodyBytes = 64 * 1024 * 1024,
  ) {}

  /** Whether any byte of an answer has arrived. */
  get started(): boolean {
    return this.seen;
  }

  /**
   * Takes the next bytes; the answer once it is complete (later bytes set `excess`), else undefined.
   * The caller may write over `chunk` once this returns: what is kept of it is copied.
   */
  push(chunk: Buffer): Response | undefined {
    const answer = this.feed(chunk);
    if (answer === undefined) this.detach(chunk.buffer);
    return answer;
  }

  private feed(chunk: Buffer): Response | undefined {
    if (this.state === State.Done) throw new HttpParseError('HPE_DONE', 'the answer was already complete');
    let buf = chunk;
    if (chunk.length > 0) this.seen = true;
    if (this.pending.length > 0) {
      buf = Buffer.concat([this.pending, chunk]);
      this.pending = EMPTY;
    }
    let at = 0;
    while (at < buf.length || this.state === State.Done) {
      switch (this.state) {
        case State.Head: {
          const end = this.scanHead(buf, at);
          this.headBytes += (end < 0 ? buf.length : end) - at;
          if (this.headBytes > this.maxHeadBytes)
            throw new HttpParseError('HPE_HEADER_OVERFLOW', 'the answer head is too large');
          if (end < 0) {
            this.headParts.push(buf.subarray(at));
            return undefined;
          }
          const text =
            this.headParts.length === 0
              ? buf.toString('latin1', at, end)
              : Buffer.concat([...this.headParts, buf.subarray(at, end)]).toString('latin1');
          this.headParts = [];
          this.ownedHead = 0;
          this.head(text);
          at = end;
          break;
        }
        case State.Length:
          at = this.counted(buf, at, State.Done);
          break;
        case State.ChunkSize: {
          const eol = buf.indexOf(LF, at);
          if (eol < 0) return this.keep(buf, at, 'chunk size line');
          this.left = chunkSize(buf.toString('latin1', at, eol));
          at = eol + 1;
          this.state = this.left === 0 ? State.Trailers : State.ChunkData;
          if (this.bodyBytes + this.left > this.maxBodyBytes)
            throw new HttpParseError('HPE_BODY_OVERFLOW', 'the answer body is too large');
          break;
        }
        case State.ChunkData:
          at = this.counted(buf, at, State.ChunkEnd);
          break;
        case State.ChunkEnd: {
          const eol = buf.indexOf(LF, at);
          if (eol < 0) return this.keep(buf, at, 'chunk end');
          if (eol - at > 1 || (eol - at === 1 && buf[at] !== CR))
            throw new HttpParseError('HPE_INVALID_CHUNK_SIZE', 'a chunk is longer than its size says');
          at = eol + 1;
          this.state = State.ChunkSize;
          break;
        }
        case State.Trailers: {
          // Trailer fields are read past and ignored, up to the empty line.
          const eol = buf.indexOf(LF, at);
          if (eol < 0) return this.keep(buf, at, 'trailer');
          const empty = eol === at || (eol === at + 1 && buf[at] === CR);
          this.headBytes += eol + 1 - at;
          if (this.headBytes > this.maxHeadBytes)
            throw new HttpParseError('HPE_HEADER_OVERFLOW', 'the answer trailers are too large');
          at = eol + 1;
          if (empty) this.state = State.Done;
          break;
        }
        case State.UntilClose: {
          this.take(buf, at, buf.length - at);
          at = buf.length;
          break;
        }
        case State.Done:
          return this.result(at < buf.length);
      }
    }
    return undefined;
  }

  /** The connection ended: the answer when its body runs to the end of the connection, else an error. */
  end(): Response {
    if (this.state === State.UntilClose) {
      this.state = State.Done;
      return this.result(false);
    }
    throw new HttpParseError(
      'HPE_INCOMPLETE',
      this.started ? 'the connection closed in the middle of the answer' : 'the connection closed before any answer',
    );
  }

  /** Parses the status line and the headers (`text` ends with the empty line) and picks the body's framing. */
  private head(text: string): void {
    const lines = text.split('\n');
    const first = trimCr(lines[0]);
    // HTTP/1.x 200 OK: the reason phrase may be empty or absent.
    const m = /^HTTP\/1\.([01]) (\d{3})(?: |$)/.exec(first);
    if (m === null)
      throw new HttpParseError('HPE_INVALID_CONSTANT', `not an HTTP/1.x status line: ${first.slice(0, 60)}`);
    const status = Number(m[2]);
    const headers: Record<string, string> = {};
    let last: string | undefined;
    for (let i = 1; i < lines.length; i++) {
      const line = trimCr(lines[i]);
      if (line === '') continue;
      const c0 = line.charCodeAt(0);
      if ((c0 === 0x20 || c0 === 0x09) && last !== undefined) {
        // Obsolete line folding: the value goes on.
        headers[last] = `${headers[last]} ${line.trim()}`;
        continue;
      }
      const colon = line.indexOf(':');
      if (colon <= 0) throw new HttpParseError('HPE_INVALID_HEADER_TOKEN', `not a header line: ${line.slice(0, 60)}`);
      const name = line.slice(0, colon).toLowerCase();
      if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name))
        throw new HttpParseError('HPE_INVALID_HEADER_TOKEN', `not a header name: ${name.slice(0, 60)}`);
      const value = line.slice(colon + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
      last = name;
    }
    if (status < 200) {
      // 100 Continue, 103 Early Hints: the real answer follows. 101 would switch protocols, never asked for.
      if (status === 101) throw new HttpParseError('HPE_UNEXPECTED_UPGRADE', 'the server switched protocols');
      this.headBytes = 0;
      return;
    }
    const connection = (headers.connection ?? '').toLowerCase();
    this.keepAlive = m[1] === '1' ? !/(?:^|,)\s*close\s*(?:,|$)/.test(connection) : /keep-alive/.test(connection);
    this.status = status;
    this.headers = headers;
    this.headBytes = 0;
    const te = headers['transfer-encoding'];
    const cl = headers['content-length'];
    if (status === 204 || status === 304) {
      this.state = State.Done;
    } else if (te !== undefined) {
      // With both, Transfer-Encoding wins and the connection cannot be trusted further (RFC 9112, 6.3).
      if (cl !== undefined) this.keepAlive = false;
      if (/(?:^|,)\s*chunked\s*$/i.test(te)) this.state = State.ChunkSize;
      else {
        this.keepAlive = false;
        this.state = State.UntilClose;
      }
    } else if (cl !== undefined) {
      const values = cl.split(',').map((v) => v.trim());
      if (!values.every((v) => /^\d{1,15}$/.test(v) && v === values[0]))
        throw new HttpParseError('HPE_INVALID_CONTENT_LENGTH', `invalid Content-Length: ${cl.slice(0, 60)}`);
      this.left = Number(values[0]);
      if (this.left > this.maxBodyBytes) throw new HttpParseError('HPE_BODY_OVERFLOW', 'the answer body is too large');
      this.state = this.left === 0 ? State.Done : State.Length;
    } else {
      this.keepAlive = false;
      this.state = State.UntilClose;
    }
  }

  /**
   * The offset just past the empty line that ends the head, or -1: byte by byte, with the state
   * (`nl`: 0 inside a line, 1 at a line's start, 2 after a CR there) kept across chunks, so a head
   * split into many pieces is never scanned twice. Lines may end in CRLF or a bare LF.
   */
  private scanHead(buf: Buffer, from: number): number {
    let nl = this.nl;
    for (let i = from; i < buf.length; i++) {
      const c = buf[i];
      if (c === LF) {
        if (nl !== 0) {
          this.nl = 0;
          return i + 1;
        }
        nl = 1;
      } else nl = c === CR && nl === 1 ? 2 : 0;
    }
    this.nl = nl;
    return -1;
  }

  /** Takes what `buf` holds of the `left` body bytes still due from `at`; `next` once they all came. */
  private counted(buf: Buffer, at: number, next: State): number {
    const n = Math.min(this.left, buf.length - at);
    this.take(buf, at, n);
    this.left -= n;
    if (this.left === 0) this.state = next;
    return at + n;
  }

  private take(buf: Buffer, at: number, n: number): void {
    if (n === 0) return;
    this.bodyBytes += n;
    if (this.bodyBytes > this.maxBodyBytes)
      throw new HttpParseError('HPE_BODY_OVERFLOW', 'the answer body is too large');
    this.parts.push(at === 0 && n === buf.length ? buf : buf.subarray(at, at + n));
  }

  /** Copies what is kept of a chunk that is not the parser's to keep (parts before `owned` are copies already). */
  private detach(memory: ArrayBufferLike): void {
    const own = (b: Buffer) => (b.buffer === memory ? Buffer.from(b) : b);
    this.pending = own(this.pending);
    for (let i = this.ownedParts; i < this.parts.length; i++) this.parts[i] = own(this.parts[i]);
    this.ownedParts = this.parts.length;
    for (let i = this.ownedHead; i < this.headParts.length; i++) this.headParts[i] = own(this.headParts[i]);
    this.ownedHead = this.headParts.length;
  }

  /** A line not complete yet: kept for the next chunk, within the head's bound. */
  private keep(buf: Buffer, at: number, what: string): undefined {
    if (buf.length - at > 1024) throw new HttpParseError('HPE_INVALID_CHUNK_SIZE', `${what} too long`);
    this.pending = buf.subarray(at);
    return undefined;
  }

  private result(excess: boolean): Response {
    this.state = State.Done;
    const parts = this.parts;
    const body =
      parts.length === 0
        ? ''
        : parts.length === 1
          ? parts[0].toString('utf8')
          : Buffer.concat(parts, this.bodyBytes).toString('utf8');
    this.parts = [];
    return { status: this.status, headers: this.headers, body, keepAlive: this.keepAlive && !excess, excess };
  }
}

const trimCr = (s: string) => (s.endsWith('\r') ? s.slice(0, -1) : s);

/** A chunk-size line: hexadecimal digits, then optional `;extensions`. */
function chunkSize(line: string): number {
  const s = trimCr(line);
  const semi = s.indexOf(';');
  const hex = (semi < 0 ? s : s.slice(0, semi)).trim();
  if (!/^[0-9a-fA-F]{1,12}$/.test(hex))
    throw new HttpParseError('HPE_INVALID_CHUNK_SIZE', `invalid chunk size: ${hex}`);
  return Number.parseInt(hex, 16);
}
