/**
 * The demo loader's HTTP client: JSON in and out, one credential, and the waits a client owes the
 * product: a 429 or 503 is retried after its Retry-After (the backfill endpoint allows 10 requests
 * a minute by default), anything else that is not 2xx fails the load with the problem's detail.
 * A stop signal cuts such a wait short: the refused request stored nothing.
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

/** The load was told to stop (a signal, or a test's stop point) and ended between two requests. */
export class DemoStopped extends Error {
  readonly code = 'DEMO_STOPPED';
  constructor(readonly requests?: number) {
    super(
      `the demo load stopped before its end${requests === undefined ? '' : ` after ${requests} event requests`}; ` +
        'the next load of this workspace finishes it',
    );
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
  signal?: AbortSignal;
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
        await this.sleep(wait * 1000);
        continue;
      }
      if ((res.status < 200 || res.status > 299) && !ok.includes(res.status))
        throw new DemoHttpError(method, url, res.status, text);
      return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
    }
  }

  /** setTimeout, ended early by the stop signal with DemoStopped. */
  sleep(ms: number): Promise<void> {
    const signal = this.o.signal;
    if (signal?.aborted) return Promise.reject(new DemoStopped());
    return new Promise((resolve, reject) => {
      const stop = () => {
        clearTimeout(timer);
        reject(new DemoStopped());
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', stop);
        resolve();
      }, ms);
      signal?.addEventListener('abort', stop, { once: true });
    });
  }
}
