import http from 'node:http';
import https from 'node:https';
import { forbiddenLiteral, guardedLookup, type UrlPolicy } from '../../lib/webhooks/address.js';

export interface SendResult {
  ok: boolean;
  /** The endpoint's HTTP status, null when no response came. */
  status: number | null;
  ms: number;
  /** Why it failed (null on success): `HTTP 500`, `timeout after 10000 ms`, `ECONNREFUSED …`. */
  error: string | null;
}

/**
 * One HTTP POST of a webhook: keep-alive agents, a whole-request deadline (connect, send, response
 * head), the response body drained and ignored, addresses checked by lib/webhooks/address.ts
 * unless `policy.allowPrivate`.
 */
export class Sender {
  private readonly http: http.Agent;
  private readonly https: https.Agent;

  constructor(private readonly o: { timeoutMs: number; maxSockets: number; policy: UrlPolicy; userAgent: string }) {
    // Sockets per origin up to the dispatcher's whole concurrency: subscriptions sharing a host are
    // limited per subscription by the dispatcher, not here, so a hanging one never queues
    // another's request behind its sockets.
    const agent = { keepAlive: true, maxSockets: o.maxSockets, maxFreeSockets: 16, scheduling: 'lifo' } as const;
    this.http = new http.Agent(agent);
    this.https = new https.Agent(agent);
  }

  send(url: string, headers: Record<string, string>, body: string): Promise<SendResult> {
    const t0 = performance.now();
    const done = (ok: boolean, status: number | null, error: string | null): SendResult => ({
      ok,
      status,
      error,
      ms: Math.round(performance.now() - t0),
    });
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return Promise.resolve(done(false, null, 'invalid url'));
    }
    const tls = u.protocol === 'https:';
    if (!tls && (u.protocol !== 'http:' || !this.o.policy.allowHttp))
      return Promise.resolve(done(false, null, 'url scheme not allowed'));
    if (!this.o.policy.allowPrivate && forbiddenLiteral(u.hostname))
      return Promise.resolve(done(false, null, `forbidden destination ${u.hostname}`));
    return new Promise((resolve) => {
      let settled = false;
      const finish = (r: SendResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(r);
      };
      const req = (tls ? https : http).request(
        u,
        {
          method: 'POST',
          agent: tls ? this.https : this.http,
          headers: {
            ...headers,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            'user-agent': this.o.userAgent,
          },
          ...(this.o.policy.allowPrivate ? {} : { lookup: guardedLookup }),
        },
        (res) => {
          const status = res.statusCode ?? 0;
          res.resume();
          const ok = status >= 200 && status < 300;
          finish(done(ok, status, ok ? null : `HTTP ${status}`));
        },
      );
      const timer = setTimeout(() => {
        req.destroy();
        finish(done(false, null, `timeout after ${this.o.timeoutMs} ms`));
      }, this.o.timeoutMs);
      req.on('error', (err: NodeJS.ErrnoException) => {
        finish(done(false, null, err.code ? `${err.code}: ${err.message}`.slice(0, 500) : String(err).slice(0, 500)));
      });
      req.end(body);
    });
  }

  close(): void {
    this.http.destroy();
    this.https.destroy();
  }
}
