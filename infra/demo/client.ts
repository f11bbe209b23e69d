/**
 * The demo loader's HTTP client: JSON in and out, one credential, and the waits a client owes the
 * product: a 429 or 503 is retried after its Retry-After (the backfill endpoint allows 10 requests
 * a minute by default), anything else that is not 2xx fails the load with the problem's detail.
 */

export interface Answer<T> {
  status: number;
  body: T;
}

export class DemoHttpError extends Error {
  constructor(
    readonly method: string,
    readonly url: string,
    readonly status: number,
    readonly text: string,
  ) {
    super(`${method} ${url} answered ${status}: ${text.slice(0, 500)}`);
  }
}

export interface ClientOptions {
  /** Header carrying the credential: `authorization` (Bearer) or `x-api-key`. */
  header: 'authorization' | 'x-api-key';
  secret: string;
  /** Told when a request waits for a rate limit, with the seconds. */
  onWait?: (what: string, seconds: number) => void;
  /** Longest single wait for Retry-After before giving up, in seconds. */
  maxWaitS?: number;
}

export class DemoClient {
  constructor(
    private readonly base: string,
    private readonly o: ClientOptions,
  ) {}

  get<T>(path: string): Promise<Answer<T>> {
    return this.send<T>('GET', path);
  }

  post<T>(path: string, body: unknown, ok: number[] = []): Promise<Answer<T>> {
    return this.send<T>('POST', path, body, ok);
  }

  /** `ok`: statuses beyond 2xx the caller handles itself (a 409 for a name taken, say). */
  async send<T>(method: string, path: string, body?: unknown, ok: number[] = []): Promise<Answer<T>> {
    const url = this.base + path;
    const headers: Record<string, string> = {
      [this.o.header]: this.o.header === 'authorization' ? `Bearer ${this.o.secret}` : this.o.secret,
    };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const payload = body === undefined ? undefined : JSON.stringify(body);
    for (let attempt = 0; ; attempt++) {
      const res = await fetch(url, { method, headers, body: payload });
      const text = await res.text();
      if ((res.status === 429 || res.status === 503) && attempt < 20) {
        const wait = Math.min(Number(res.headers.get('retry-after')) || 1, this.o.maxWaitS ?? 120);
        this.o.onWait?.(`${method} ${path.split('?')[0]}`, wait);
        await new Promise((r) => setTimeout(r, wait * 1000));
        continue;
      }
      if ((res.status < 200 || res.status > 299) && !ok.includes(res.status))
        throw new DemoHttpError(method, url, res.status, text);
      return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
    }
  }
}
