import { type ChAnswer, ClickHouseEndpoints } from '../lib/clickhouse-endpoints.js';
import type { Logger } from '../lib/logger.js';
import { ApiError } from '../lib/problem.js';

/** ClickHouse errors that pass: overload, memory, timeouts, cancelled queries. */
const TRANSIENT_CH_CODES = new Set([159, 160, 202, 209, 210, 241, 394]);
const RETRY_AFTER_S = '5';

/**
 * The core API's read-only ClickHouse client (health history, event catalog, metric test
 * queries). Queries go read-only (lib/clickhouse-endpoints.ts `read`: the SQL in a POST body, so
 * no workspace's size can push it past a URL's limit), so nothing the core API sends can write.
 * ClickHouse 18.16 has no query parameters: callers place only checked values in the SQL (UUIDs,
 * dates, and lib/metrics/literal.ts's encodings).
 * An unreachable or overloaded server answers 503 service_unavailable with Retry-After.
 */
export class ClickHouseReader {
  private readonly endpoints: ClickHouseEndpoints;

  /** `url`: one endpoint or several, comma-separated, tried in order (lib/clickhouse-endpoints.ts). */
  constructor(
    url: string,
    readonly database: string,
    private readonly timeoutMs: number,
    private readonly log: Logger,
  ) {
    this.endpoints = new ClickHouseEndpoints(url);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(database)) throw new Error(`invalid ClickHouse database name ${database}`);
  }

  /** Rows of `query` (without FORMAT). `what` names the store in the 503 message. */
  async rows<T>(query: string, what: string, timeoutMs = this.timeoutMs): Promise<T[]> {
    const settings = {
      max_execution_time: Math.max(1, Math.ceil(timeoutMs / 1000)),
      output_format_json_quote_64bit_integers: 0,
    };
    let res: ChAnswer;
    let text: string;
    try {
      [res, text] = await this.endpoints.read(`${query}\nFORMAT JSONEachRow`, settings, timeoutMs);
    } catch (err) {
      this.log.warn({ err: String(err), what }, 'ClickHouse unreachable');
      throw unavailable(what);
    }
    if (!res.ok) {
      const code = Number(/Code: (\d+)/.exec(text)?.[1]);
      if (TRANSIENT_CH_CODES.has(code) || res.status === 503) {
        this.log.warn({ code, status: res.status, what }, 'ClickHouse busy');
        throw unavailable(what);
      }
      throw new Error(`ClickHouse answered ${res.status}: ${text.slice(0, 300)}`);
    }
    return text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as T);
  }
}

const unavailable = (what: string) =>
  new ApiError('service_unavailable', `${what} is unavailable; retry shortly.`, undefined, [
    ['Retry-After', RETRY_AFTER_S],
  ]);
