import { Readable } from 'node:stream';
import { createClient, ClickHouseLogLevel, type ClickHouseClient } from '@clickhouse/client';
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

export class ClickHouse {
  readonly client: ClickHouseClient;

  constructor(
    url: string,
    readonly database: string,
    requestTimeoutMs: number,
  ) {
    this.client = createClient({
      url,
      database,
      request_timeout: requestTimeoutMs,
      max_open_connections: 16,
      compression: { request: false, response: false },
      log: { level: ClickHouseLogLevel.OFF },
    });
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
    const res = await this.client.exec({
      query: `INSERT INTO ${into}`,
      values: Readable.from(Buffer.isBuffer(body) ? [body] : body),
      query_id: queryId,
    });
    res.stream.resume();
  }

  async rows<T>(query: string): Promise<T[]> {
    const rs = await this.client.query({ query, format: 'JSONEachRow' });
    return rs.json<T>();
  }

  /** The result as TabSeparated text: large aggregate reads parse it faster than JSON rows. */
  async text(query: string): Promise<string> {
    const rs = await this.client.query({ query, format: 'TabSeparated' });
    return rs.text();
  }

  async command(query: string): Promise<void> {
    await this.client.command({ query });
  }

  close(): Promise<void> {
    return this.client.close();
  }
}
