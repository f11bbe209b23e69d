import http from 'node:http';
import https from 'node:https';

/** A ClickHouse answer's status; its body text travels beside it. */
export interface ChAnswer {
  status: number;
  ok: boolean;
}

/**
 * CLICKHOUSE_URL as a list: comma-separated HTTP endpoints of the same store (the servers of a
 * cluster, each serving the Distributed tables), tried in the configured order. An endpoint that
 * cannot be reached is set aside for a while and the next one is tried; when every endpoint is set
 * aside, all are tried again in order. One URL is a list of one.
 */
export class ClickHouseEndpoints {
  readonly urls: readonly string[];
  private readonly downUntil = new Map<string, number>();
  /**
   * node:http with kept-alive connections rather than fetch: a read costs about a quarter of
   * fetch's client CPU, and a process's first read does not load undici and compile its parser.
   */
  private readonly agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

  constructor(
    list: string,
    private readonly setAsideMs = 5_000,
  ) {
    const urls = list
      .split(',')
      .map((u) => u.trim().replace(/\/+$/, ''))
      .filter(Boolean);
    if (urls.length === 0) throw new Error('CLICKHOUSE_URL names no endpoint');
    for (const u of urls) new URL(u);
    this.urls = urls;
  }

  /** The endpoints in the order to try them now: reachable ones first, in the configured order. */
  order(): string[] {
    const now = Date.now();
    const up = this.urls.filter((u) => (this.downUntil.get(u) ?? 0) <= now);
    return up.length === this.urls.length ? [...this.urls] : [...up, ...this.urls.filter((u) => !up.includes(u))];
  }

  /** Sets an endpoint aside after a connection failure. */
  failed(url: string): void {
    this.downUntil.set(url, Date.now() + this.setAsideMs);
  }

  /**
   * `attempt` on each endpoint in turn until one does not fail to connect: what an idempotent
   * request (a read, a DDL statement with IF NOT EXISTS) may do. Other errors are the answer.
   */
  async each<T>(attempt: (url: string) => Promise<T>): Promise<T> {
    let last: unknown;
    for (const url of this.order()) {
      try {
        return await attempt(url);
      } catch (err) {
        if (!isConnectionError(err)) throw err;
        last = err;
      }
      // A kept-alive connection the server had already closed fails the request sent on it
      // ("other side closed"): the same endpoint once more, on a new connection, before setting
      // it aside.
      if (isDroppedConnection(last)) {
        try {
          return await attempt(url);
        } catch (err) {
          if (!isConnectionError(err)) throw err;
          last = err;
        }
      }
      this.failed(url);
    }
    throw last;
  }

  /**
   * A request for `path` (query string included) on the first endpoint that can be reached, each
   * attempt with its own `timeoutMs`: the answer and its body text.
   */
  requestText(
    path: string,
    init: { method?: string; body?: string; timeoutMs?: number } = {},
  ): Promise<[ChAnswer, string]> {
    return this.each((url) => this.request(`${url}${path}`, init.method ?? 'GET', init.body, init.timeoutMs));
  }

  private request(url: string, method: string, body?: string, timeoutMs?: number): Promise<[ChAnswer, string]> {
    const secure = url.startsWith('https:');
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const fail = (err: Error) => {
        clearTimeout(timer);
        reject(err);
      };
      const req = (secure ? https : http).request(
        url,
        { method, agent: secure ? this.agents.https : this.agents.http },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', fail);
          res.on('end', () => {
            clearTimeout(timer);
            const status = res.statusCode ?? 0;
            resolve([{ status, ok: status >= 200 && status < 300 }, Buffer.concat(chunks).toString('utf8')]);
          });
        },
      );
      // The whole exchange's deadline, as AbortSignal.timeout would give (not an idle timeout).
      if (timeoutMs !== undefined)
        timer = setTimeout(
          () => req.destroy(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { name: 'TimeoutError' })),
          timeoutMs,
        );
      req.on('error', fail);
      req.end(body);
    });
  }

  /**
   * A read-only query: the SQL travels in a POST body, where its length is bounded by the server's
   * max_query_size rather than by the HTTP layer's limit on a request line (about 16 KB on
   * ClickHouse 18.16), so a query that grows with a workspace's data (event names, property keys,
   * ids) is answered at any size. `readonly=2` keeps the request from writing, as a GET would,
   * while its settings still apply.
   */
  read(sql: string, settings: Record<string, string | number> = {}, timeoutMs?: number): Promise<[ChAnswer, string]> {
    const params = new URLSearchParams({ readonly: '2' });
    for (const [k, v] of Object.entries(settings)) params.set(k, String(v));
    return this.requestText(`/?${params}`, { method: 'POST', body: sql, timeoutMs });
  }
}

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'ENOTFOUND']);

type Failure = { code?: string; cause?: unknown; message?: string };

/** An error and its causes, outermost first. */
function* causes(err: unknown): Generator<Failure> {
  for (let e = err as Failure | undefined; e; e = e.cause as Failure | undefined) {
    yield e;
    if (e.cause === e) return;
  }
}

/** The server closed a connection that was open (not one it refused): worth one more try. */
function isDroppedConnection(err: unknown): boolean {
  for (const e of causes(err)) {
    if (e.code === 'ECONNREFUSED' || e.code === 'EHOSTUNREACH' || e.code === 'ENETUNREACH' || e.code === 'ENOTFOUND')
      return false;
    if (e.code === 'UND_ERR_SOCKET' || e.code === 'ECONNRESET' || e.code === 'EPIPE') return true;
    if (typeof e.message === 'string' && /socket hang up|other side closed/.test(e.message)) return true;
  }
  return false;
}

/** The server could not be reached or dropped the connection (fetch's and node:http's errors). */
export function isConnectionError(err: unknown): boolean {
  for (const e of causes(err)) {
    if (e.code && CONNECTION_CODES.has(e.code)) return true;
    if (typeof e.message === 'string' && /socket hang up|other side closed|ECONNREFUSED|ECONNRESET/.test(e.message))
      return true;
  }
  return false;
}
