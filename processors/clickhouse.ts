import { Readable } from 'node:stream';
import { createClient, ClickHouseLogLevel, type ClickHouseClient, type ClickHouseSettings } from '@clickhouse/client';
import { ClickHouseEndpoints, isConnectionError } from '../lib/clickhouse-endpoints.js';
import { insertColumns, type RowFormat } from '../lib/row-binary.js';
import type { SinkTable } from '../schemas/rows.js';

/**
 * ClickHouse error codes that mean "this data can never be inserted": retrying cannot help, the
 * message is isolated and dead-lettered. Every other failure (connection refused, timeouts, too
 * many parts, memory) is an outage and is retried without limit.
 */
const DATA_ERROR_CODES = new Set([6, 25, 26, 27, 32, 33, 38, 41, 53, 69, 70, 72, 117, 131, 376]);

export function chErrorCode(err: unknown): number | undefined {
  const m = /Code: (\d+)/.exec(String((err as Error)?.message ?? ''));
  if (m) return Number(m[1]);
  const code = (err as { code?: string }).code;
  return code !== undefined && /^\d+$/.test(code) ? Number(code) : undefined;
}

export const isDataError = (err: unknown): boolean => {
  const code = chErrorCode(err);
  return code !== undefined && DATA_ERROR_CODES.has(code);
};

/**
 * Settings whose defaults changed after ClickHouse 18.16, sent with every request so that the
 * answers and inserts mean the same on 18.16 and on a current server (docs/clickhouse.md):
 * - 64-bit integers in JSON rows stay quoted strings, as 18.16 writes them and as the reads here
 *   type them (`n: string`, then Number()); 26 writes them as numbers by default;
 * - a JSONEachRow row with a field its table lacks fails the insert, as on 18.16, instead of
 *   losing the field silently (26 skips unknown fields by default).
 */
export const PINNED_SETTINGS: ClickHouseSettings = {
  output_format_json_quote_64bit_integers: 1,
  input_format_skip_unknown_fields: 0,
};

/**
 * The processors' ClickHouse: one server, or several endpoints of a cluster (CLICKHOUSE_URL
 * comma-separated). Reads and commands go to the first endpoint that can be reached; an insert
 * goes to the first reachable one and, when it cannot connect, fails and sets it aside, so that
 * the writer's retry (which reconciles first) goes to the next.
 * On a cluster (`cluster` set) the tables named `database`.<table> are Distributed tables and the
 * rows are stored in `database`_local (infra/apply.ts); statements that act on storage (dropping
 * partitions) go there, ON CLUSTER.
 */
export class ClickHouse {
  readonly endpoints: ClickHouseEndpoints;
  private readonly clients = new Map<string, ClickHouseClient>();

  constructor(
    url: string,
    readonly database: string,
    requestTimeoutMs: number,
    readonly cluster = '',
  ) {
    this.endpoints = new ClickHouseEndpoints(url);
    for (const u of this.endpoints.urls)
      this.clients.set(
        u,
        createClient({
          url: u,
          database,
          request_timeout: requestTimeoutMs,
          max_open_connections: 16,
          compression: { request: false, response: false },
          clickhouse_settings: PINNED_SETTINGS,
          log: { level: ClickHouseLogLevel.OFF },
        }),
      );
  }

  /** The database of the storage tables: `database` on one server, `database`_local on a cluster. */
  get storageDatabase(): string {
    return this.cluster ? `${this.database}_local` : this.database;
  }

  /** ` ON CLUSTER <name>` on a cluster, else nothing: for statements on storage tables. */
  get onCluster(): string {
    return this.cluster ? ` ON CLUSTER ${this.cluster}` : '';
  }

  private async each<T>(attempt: (c: ClickHouseClient) => Promise<T>): Promise<T> {
    return this.endpoints.each((u) => attempt(this.client(u)));
  }

  /**
   * Inserts a prebuilt body: no per-row work in this process. RowBinary names its columns (those of
   * the format's list), so a table may have more, filled with their defaults.
   */
  async insert(
    table: string,
    body: Buffer | readonly Buffer[],
    queryId: string,
    format: RowFormat = 'JSONEachRow',
  ): Promise<void> {
    const into =
      format === 'JSONEachRow'
        ? `${this.database}.${table} FORMAT JSONEachRow`
        : `${this.database}.${table} ${insertColumns(format, table as SinkTable)} FORMAT RowBinary`;
    const url = this.endpoints.order()[0];
    try {
      const res = await this.client(url).exec({
        query: `INSERT INTO ${into}`,
        values: Readable.from(Buffer.isBuffer(body) ? [body] : body),
        query_id: queryId,
      });
      res.stream.resume();
    } catch (err) {
      if (isConnectionError(err)) this.endpoints.failed(url);
      throw err;
    }
  }

  async rows<T>(query: string): Promise<T[]> {
    return this.each(async (c) => (await c.query({ query, format: 'JSONEachRow' })).json<T>());
  }

  /** The result as TabSeparated text: large aggregate reads parse it faster than JSON rows. */
  async text(query: string): Promise<string> {
    return this.each(async (c) => (await c.query({ query, format: 'TabSeparated' })).text());
  }

  /** A query's answer as it arrives (its FORMAT in the query): chunks handed to `chunk` in order. */
  async stream(query: string, chunk: (b: Buffer) => void): Promise<void> {
    await this.each(async (c) => {
      const res = await c.exec({ query });
      for await (const b of res.stream) chunk(b as Buffer);
    });
  }

  async command(query: string): Promise<void> {
    await this.each((c) => c.command({ query }));
  }

  /** Rows from one server of the list (`url` of `endpoints.urls`): what a server's system tables say. */
  async rowsAt<T>(url: string, query: string): Promise<T[]> {
    return (await this.client(url).query({ query, format: 'JSONEachRow' })).json<T>();
  }

  /** A statement on one server of the list: for what acts on that server alone. */
  async commandAt(url: string, query: string): Promise<void> {
    await this.client(url).command({ query });
  }

  private client(url: string): ClickHouseClient {
    const c = this.clients.get(url);
    if (!c) throw new Error(`${url} is not one of CLICKHOUSE_URL's endpoints`);
    return c;
  }

  async close(): Promise<void> {
    await Promise.all([...this.clients.values()].map((c) => c.close()));
  }
}
