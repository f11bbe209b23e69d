import type { Logger } from '../logger.js';
import type { Sql } from '../pg.js';

interface Entry {
  tenant_id: string;
  actor_kind: string;
  actor_id: string;
  trace_id: string;
  method: string;
  endpoint: string;
  status: number;
  ip: string;
  at: Date;
}

/**
 * Every authenticated request is recorded, but never on the request's path: entries are buffered
 * and written in one INSERT per second (or per 1000 entries). A crash can lose at most the last
 * second; a database outage keeps up to 100k entries in memory and retries.
 */
export class AuditLog {
  private buf: Entry[] = [];
  private timer: NodeJS.Timeout;
  private flushing?: Promise<void>;

  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
    intervalMs = 1000,
  ) {
    this.timer = setInterval(() => void this.flush(), intervalMs);
    this.timer.unref();
  }

  record(e: Entry): void {
    if (this.buf.length >= 100_000) this.buf.shift();
    this.buf.push(e);
    if (this.buf.length >= 1000) void this.flush();
  }

  flush(): Promise<void> {
    if (this.flushing || this.buf.length === 0) return this.flushing ?? Promise.resolve();
    const batch = this.buf;
    this.buf = [];
    this.flushing = this.sql`
      INSERT INTO credential_audit (tenant_id, actor_kind, actor_id, trace_id, method, endpoint, status, ip, at)
      SELECT * FROM unnest(
        ${batch.map((e) => e.tenant_id)}::uuid[], ${batch.map((e) => e.actor_kind)}::text[],
        ${batch.map((e) => e.actor_id)}::uuid[], ${batch.map((e) => e.trace_id)}::text[],
        ${batch.map((e) => e.method)}::text[], ${batch.map((e) => e.endpoint)}::text[],
        ${batch.map((e) => e.status)}::int[], ${batch.map((e) => e.ip)}::text[],
        ${batch.map((e) => e.at.toISOString())}::timestamptz[]
      )`
      .then(
        () => undefined,
        (err: unknown) => {
          this.log.warn({ err, entries: batch.length }, 'audit log write failed; will retry');
          this.buf = batch.concat(this.buf).slice(-100_000);
        },
      )
      .finally(() => {
        this.flushing = undefined;
      });
    return this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flushing;
    await this.flush();
  }
}
