import type { JetStreamClient, JsMsg } from 'nats';
import { isUuid } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { STREAM_EVENTS, tenantOfSubject } from '../../lib/nats.js';
import type { Sql } from '../../lib/pg.js';
import { BatchedConsumer } from '../batched-consumer.js';

/** Told the event names of every message before it is acked (playbooks/event-marks.ts). */
export interface NamesObserver {
  seen(tenantId: string, names: string): void;
  /** Resolves once what was seen is durable; the batch is acked only then. */
  flush(): Promise<void>;
}

/**
 * The workspace event catalog: every event name appears in PostgreSQL on its first ingestion.
 * Reads only message headers (Cs-Names, set by the ingest tier; the consumer is headers-only),
 * remembers what it has written, and acks after the upsert.
 */
export class EventCatalog {
  private known = new Set<string>();
  private readonly loop: BatchedConsumer;

  constructor(
    js: JetStreamClient,
    private readonly sql: Sql,
    consumer: string,
    log: Logger,
    private readonly observer?: NamesObserver,
  ) {
    this.loop = new BatchedConsumer(js, STREAM_EVENTS, consumer, { maxMessages: 1000, kickMs: 200, log }, (b) =>
      this.write(b),
    );
  }

  start(): Promise<void> {
    return this.loop.start();
  }

  private async write(batch: JsMsg[]): Promise<void> {
    const tenants: string[] = [];
    const names: string[] = [];
    for (const m of batch) {
      const tenant = tenantOfSubject(m.subject) ?? '';
      if (!isUuid(tenant)) continue;
      const header = m.headers?.get('Cs-Names') ?? '';
      this.observer?.seen(tenant, header);
      for (const name of header.split(',')) {
        const k = `${tenant}|${name}`;
        if (!name || this.known.has(k)) continue;
        this.known.add(k);
        tenants.push(tenant);
        names.push(name);
      }
    }
    const acked = await this.loop.retryThenAck(batch, 'event catalog write failed', async () => {
      if (names.length) {
        // A workspace deleted meanwhile has no catalog: its names are dropped, not retried forever.
        await this.sql`
          INSERT INTO event_catalog (tenant_id, event_name)
          SELECT u.tenant_id, u.event_name
          FROM unnest(${tenants}::uuid[], ${names}::text[]) AS u (tenant_id, event_name)
          JOIN tenants t ON t.id = u.tenant_id
          ON CONFLICT DO NOTHING`;
      }
      await this.observer?.flush();
    });
    if (acked && this.known.size > 1_000_000) this.known.clear();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }
}
