import net from 'node:net';

export type Done = (err: Error | undefined, status: number, body: string) => void;

const HEAD_END = Buffer.from('\r\n\r\n');

/**
 * One keep-alive HTTP/1.1 connection sending pre-serialized requests, one at a time. On a 2-core
 * machine the load generator competes with the server for CPU, so it does the least possible per
 * request: one socket write of a prebuilt buffer, and a parse of the status line, Content-Length
 * and the small JSON reply.
 */
export class Http1Connection {
  private sock: net.Socket | undefined;
  private buf: Buffer | undefined;
  private done: Done | undefined;

  constructor(
    private readonly host: string,
    private readonly port: number,
  ) {}

  get busy(): boolean {
    return this.done !== undefined;
  }

  send(request: Buffer, done: Done): void {
    if (this.done) throw new Error('connection busy');
    this.done = done;
    (this.sock ??= this.connect()).write(request);
  }

  close(): void {
    this.sock?.destroy();
    this.sock = undefined;
  }

  private connect(): net.Socket {
    const s = net.connect({ host: this.host, port: this.port, noDelay: true });
    s.on('data', (chunk: Buffer) => this.onData(chunk));
    const lost = (err?: Error) => {
      if (this.sock !== s) return;
      this.sock = undefined;
      this.buf = undefined;
      this.finish(err ?? new Error('connection closed'), 0, '');
    };
    s.on('error', lost);
    s.on('close', () => lost());
    return s;
  }

  private finish(err: Error | undefined, status: number, body: string): void {
    const d = this.done;
    this.done = undefined;
    d?.(err, status, body);
  }

  private onData(chunk: Buffer): void {
    const b = this.buf ? Buffer.concat([this.buf, chunk]) : chunk;
    const end = b.indexOf(HEAD_END);
    if (end < 0) {
      this.buf = b;
      return;
    }
    const head = b.toString('latin1', 0, end);
    const m = /\r\ncontent-length: *(\d+)/i.exec(head);
    if (!m) {
      this.buf = undefined;
      this.sock?.destroy(new Error(`response without Content-Length: ${head.slice(0, 200)}`));
      return;
    }
    const len = Number(m[1]);
    if (b.length < end + 4 + len) {
      this.buf = b;
      return;
    }
    this.buf = undefined;
    const status = Number(head.slice(9, 12));
    const body = b.toString('utf8', end + 4, end + 4 + len);
    if (/\r\nconnection: *close/i.test(head)) {
      const s = this.sock;
      this.sock = undefined;
      s?.destroy();
    }
    this.finish(undefined, status, body);
  }
}

export function requestBuffer(
  host: string,
  port: number,
  path: string,
  headers: Record<string, string>,
  body: string,
): Buffer {
  const b = Buffer.from(body);
  let head = `POST ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\n`;
  for (const k in headers) head += `${k}: ${headers[k]}\r\n`;
  head += `Content-Length: ${b.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), b]);
}
