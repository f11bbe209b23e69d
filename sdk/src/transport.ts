import http from 'node:http';
import https from 'node:https';
import { NetworkError, RequestTimeoutError } from './errors.js';

/**
 * One POST over a keep-alive pool of `concurrency` sockets, with a deadline for the whole
 * exchange. A failure says whether the request had been written out: before that, the service
 * cannot have stored anything.
 */

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The whole request had been handed to the OS ('finish') when the answer ended: nothing reads the body any more. */
  written?: boolean;
}

export class Transport {
  private readonly agent: http.Agent;
  private readonly request: typeof http.request;
  private readonly live = new Set<http.ClientRequest>();
  private destroyed = false;

  constructor(
    private readonly base: URL,
    sockets: number,
  ) {
    const secure = base.protocol === 'https:';
    if (!secure && base.protocol !== 'http:') throw new TypeError(`url must be http: or https:, got ${base.protocol}`);
    this.request = secure ? https.request : http.request;
    this.agent = new (secure ? https.Agent : http.Agent)({ keepAlive: true, maxSockets: sockets, scheduling: 'fifo' });
  }

  post(path: string, headers: Record<string, string>, body: Buffer, timeoutMs: number): Promise<Answer> {
    if (this.destroyed) return Promise.reject(new NetworkError(new Error('client closed')));
    return new Promise<Answer>((resolve, reject) => {
      let written = false;
      let done = false;
      const fail = (err: NetworkError | RequestTimeoutError) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.live.delete(req);
        err.outcomeUnknown = written;
        reject(err);
        req.destroy();
      };
      const req = this.request(
        {
          protocol: this.base.protocol,
          hostname: this.base.hostname,
          port: this.base.port,
          path: this.base.pathname.replace(/\/$/, '') + path,
          method: 'POST',
          agent: this.agent,
          headers: { ...headers, 'Content-Length': String(body.length) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', (e) => fail(new NetworkError(e)));
          res.on('aborted', () => fail(new NetworkError(new Error('answer cut short'))));
          res.on('end', () => {
            if (done) return;
            done = true;
            clearTimeout(timer);
            this.live.delete(req);
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              body: Buffer.concat(chunks).toString('utf8'),
              written,
            });
          });
        },
      );
      const timer = setTimeout(() => fail(new RequestTimeoutError(timeoutMs)), timeoutMs);
      this.live.add(req);
      req.on('error', (e) => fail(new NetworkError(e)));
      // From here on the service may have read the whole request.
      req.on('finish', () => {
        written = true;
      });
      req.end(body);
    });
  }

  /** Every request still open fails now (close() past its deadline); idle sockets are closed. */
  destroy(): void {
    this.destroyed = true;
    for (const req of this.live) req.destroy(new Error('client closed'));
    this.live.clear();
    this.agent.destroy();
  }
}
