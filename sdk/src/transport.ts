import net from 'node:net';
import tls from 'node:tls';
import { NetworkError, RequestTimeoutError } from './errors.js';
import { type Response, ResponseParser } from './http-response.js';

/**
 * POSTs over a pool of at most `sockets` persistent HTTP/1.1 connections (`node:net`, `node:tls`
 * for https), with a deadline for each whole exchange. One request at a time per connection, no
 * pipelining: a request goes out in one write (its head written into the free bytes a batch keeps
 * before its body, else head and body corked into one writev), its answer is read by
 * ResponseParser. Node's HTTP client did the same with a ClientRequest, an agent and two streams
 * per request, which cost more CPU than the rest of the producer's work per event.
 *
 * What a failure tells: whether the whole request had been handed to the OS (`outcomeUnknown`).
 * Before that the service cannot have read it, so it cannot have stored anything. A connection
 * is never retried here, even one that was idle and closed by the server just as the request
 * went out: that is a network error like any other, and the client's retry rules decide.
 *
 * A connection goes back to the pool only after a complete, framed answer to a request written
 * out in full; anything else (an error, a timeout, `Connection: close`, bytes past the answer)
 * closes it. An idle connection is closed when the server closes it, and is not used again past
 * the server's `Keep-Alive: timeout` (less a second) or 4 s without one, so a request is rarely
 * written into a connection the server is closing.
 */

export interface Answer {
  status: number;
  /** Names in lower case. */
  headers: Record<string, string>;
  body: string;
  /** The whole request had been handed to the OS when the answer ended: nothing reads the body any more. */
  written?: boolean;
}

/** Node's own check of header values (`ERR_INVALID_CHAR`): no CR, LF or other control characters. */
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const DEFAULT_IDLE_MS = 4000;
/** Subtracted from the server's keep-alive timeout: the server's clock starts first. */
const IDLE_MARGIN_MS = 1000;

interface Exchange {
  head: string;
  body: Buffer;
  room: number;
  resolve: (a: Answer) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout | undefined;
  written: boolean;
  done: boolean;
  conn: Connection | undefined;
}

interface Connection {
  socket: net.Socket;
  parser: ResponseParser;
  current: Exchange | undefined;
  /** When it went back to the pool, and how long the server keeps it open after that (ms). */
  idleSince: number;
  idleMs: number;
  /** The socket's last error, reported when it closes during an exchange. */
  error: Error | undefined;
  closed: boolean;
}

export class Transport {
  private readonly secure: boolean;
  private readonly host: string;
  private readonly port: number;
  private readonly hostHeader: string;
  private readonly prefix: string;
  private readonly conns = new Set<Connection>();
  private readonly idle: Connection[] = [];
  private waiting: Exchange[] = [];
  private destroyed = false;
  private readonly readBuffer = Buffer.allocUnsafe(64 * 1024);

  constructor(
    base: URL,
    private readonly sockets: number,
  ) {
    this.secure = base.protocol === 'https:';
    if (!this.secure && base.protocol !== 'http:')
      throw new TypeError(`url must be http: or https:, got ${base.protocol}`);
    // URL keeps an IPv6 literal's brackets in hostname; a socket wants it without.
    this.host = base.hostname.replace(/^\[(.*)\]$/, '$1');
    this.port = base.port === '' ? (this.secure ? 443 : 80) : Number(base.port);
    this.hostHeader = base.host;
    this.prefix = base.pathname.replace(/\/$/, '');
  }

  /**
   * `room`: bytes right before `body`, in the same memory, that are free: when the request's head
   * fits there it is written into them, and head and body leave as one buffer.
   */
  post(path: string, headers: Record<string, string>, body: Buffer, timeoutMs: number, room = 0): Promise<Answer> {
    if (this.destroyed) return Promise.reject(new NetworkError(new Error('client closed')));
    let head = `POST ${this.prefix}${path} HTTP/1.1\r\nHost: ${this.hostHeader}\r\nConnection: keep-alive\r\n`;
    for (const name in headers) {
      const value = headers[name];
      if (!TOKEN.test(name) || INVALID_VALUE.test(value))
        return Promise.reject(new NetworkError(new TypeError(`invalid header ${JSON.stringify(name)}`)));
      head += `${name}: ${value}\r\n`;
    }
    head += `Content-Length: ${body.length}\r\n\r\n`;
    return new Promise<Answer>((resolve, reject) => {
      const ex: Exchange = {
        head,
        body,
        room,
        resolve,
        reject,
        timer: undefined,
        written: false,
        done: false,
        conn: undefined,
      };
      ex.timer = setTimeout(() => this.fail(ex, new RequestTimeoutError(timeoutMs)), timeoutMs);
      this.dispatch(ex);
    });
  }

  /** Every request still open fails now (close() past its deadline); idle connections are closed. */
  destroy(): void {
    this.destroyed = true;
    const waiting = this.waiting;
    this.waiting = [];
    for (const ex of waiting) this.fail(ex, new NetworkError(new Error('client closed')));
    for (const conn of [...this.conns]) this.drop(conn, new Error('client closed'));
  }

  /** Starts an exchange on a connection, or queues it while all are busy. */
  private dispatch(ex: Exchange): void {
    let conn: Connection | undefined;
    try {
      conn = this.connection();
    } catch (err) {
      // net.connect refusing its options (a port it cannot use): nothing was sent.
      this.fail(ex, new NetworkError(err));
      return;
    }
    if (conn === undefined) this.waiting.push(ex);
    else this.start(conn, ex);
  }

  /** An idle connection still fresh, or a new one while the pool has room; undefined when it is full. */
  private connection(): Connection | undefined {
    const now = Date.now();
    for (let conn = this.idle.pop(); conn !== undefined; conn = this.idle.pop()) {
      if (now - conn.idleSince < conn.idleMs) return conn;
      this.drop(conn);
    }
    return this.conns.size < this.sockets ? this.open() : undefined;
  }

  private open(): Connection {
    // Plain TCP reads into one buffer for all connections (`onread`: no stream, no allocation per
    // read); the parser copies what it keeps. TLS sockets deliver their chunks as 'data'.
    const socket = this.secure
      ? tls.connect({
          host: this.host,
          port: this.port,
          servername: net.isIP(this.host) ? undefined : this.host,
          ALPNProtocols: ['http/1.1'],
        })
      : net.connect({
          host: this.host,
          port: this.port,
          onread: { buffer: this.readBuffer, callback: (n) => this.read(conn, n) },
        });
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 1000);
    const conn: Connection = {
      socket,
      parser: new ResponseParser(),
      current: undefined,
      idleSince: 0,
      idleMs: DEFAULT_IDLE_MS,
      error: undefined,
      closed: false,
    };
    this.conns.add(conn);
    if (this.secure) socket.on('data', (chunk: Buffer) => this.data(conn, chunk));
    socket.on('end', () => this.ended(conn));
    socket.on('error', (err) => {
      conn.error = err;
    });
    socket.on('close', () => this.drop(conn, conn.error ?? hangUp()));
    return conn;
  }

  private start(conn: Connection, ex: Exchange): void {
    ex.conn = conn;
    conn.current = ex;
    conn.socket.ref();
    const onWritten = (err: Error | null | undefined) => {
      if (err === undefined || err === null) ex.written = true;
    };
    // The head is latin1 (header values are checked), one byte a character.
    const { head, body } = ex;
    if (head.length <= ex.room) {
      const whole = Buffer.from(body.buffer, body.byteOffset - head.length, head.length + body.length);
      whole.write(head, 0, 'latin1');
      conn.socket.write(whole, onWritten);
      return;
    }
    // Head and body leave in one writev; the callback runs once the OS has both.
    conn.socket.cork();
    conn.socket.write(head, 'latin1');
    conn.socket.write(body, onWritten);
    conn.socket.uncork();
  }

  private read(conn: Connection, n: number): boolean {
    this.data(conn, this.readBuffer.subarray(0, n));
    return true;
  }

  private data(conn: Connection, chunk: Buffer): void {
    const ex = conn.current;
    if (ex === undefined) {
      // Bytes nobody asked for (a server's goodbye on an idle connection): it is out of step.
      this.drop(conn);
      return;
    }
    let answer: Response | undefined;
    try {
      answer = conn.parser.push(chunk);
    } catch (err) {
      this.drop(conn, err as Error);
      return;
    }
    if (answer !== undefined) this.complete(conn, ex, answer);
  }

  /** The server closed its side: an answer framed by the end of the connection ends here, any other fails. */
  private ended(conn: Connection): void {
    const ex = conn.current;
    if (ex === undefined) {
      this.drop(conn);
      return;
    }
    let answer: Response;
    try {
      answer = conn.parser.end();
    } catch (err) {
      this.drop(conn, conn.parser.started ? (err as Error) : hangUp());
      return;
    }
    this.complete(conn, ex, answer);
  }

  private complete(conn: Connection, ex: Exchange, answer: Response): void {
    conn.current = undefined;
    ex.conn = undefined;
    conn.parser = new ResponseParser();
    if (!ex.done) {
      ex.done = true;
      clearTimeout(ex.timer);
      ex.resolve({ status: answer.status, headers: answer.headers, body: answer.body, written: ex.written });
    }
    // An answer that came before the request was fully written leaves the rest of it in the way.
    if (!answer.keepAlive || !ex.written || this.destroyed || conn.closed) {
      this.drop(conn);
      return;
    }
    conn.idleMs = keepAliveMs(answer.headers['keep-alive']);
    const next = this.waiting.shift();
    if (next !== undefined) {
      this.start(conn, next);
      return;
    }
    conn.idleSince = Date.now();
    conn.socket.unref();
    this.idle.push(conn);
  }

  private fail(ex: Exchange, err: NetworkError | RequestTimeoutError): void {
    if (ex.done) return;
    ex.done = true;
    clearTimeout(ex.timer);
    err.outcomeUnknown = ex.written;
    ex.reject(err);
    const conn = ex.conn;
    if (conn !== undefined) this.drop(conn);
    else {
      const i = this.waiting.indexOf(ex);
      if (i >= 0) this.waiting.splice(i, 1);
    }
  }

  /** Closes a connection; its exchange, if any, fails with `err`; a request waiting gets a new connection. */
  private drop(conn: Connection, err?: Error): void {
    if (conn.closed) return;
    conn.closed = true;
    this.conns.delete(conn);
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
    conn.socket.destroy();
    const ex = conn.current;
    conn.current = undefined;
    if (ex !== undefined) {
      ex.conn = undefined;
      this.fail(ex, new NetworkError(err ?? hangUp()));
    }
    if (!this.destroyed && this.waiting.length > 0) this.dispatch(this.waiting.shift()!);
  }
}

/** What Node's HTTP client reports for a connection closed before its answer. */
function hangUp(): Error {
  return Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
}

/** How long an idle connection may be reused: `Keep-Alive: timeout=N` less a margin, else the default. */
function keepAliveMs(header: string | undefined): number {
  if (header === undefined) return DEFAULT_IDLE_MS;
  const m = /(?:^|[\s,;])timeout\s*=\s*(\d+)/i.exec(header);
  if (m === null) return DEFAULT_IDLE_MS;
  return Math.min(600_000, Math.max(0, Number(m[1]) * 1000 - IDLE_MARGIN_MS));
}
