import type { JetStreamClient, JsMsg } from 'nats';
import { isUuid } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { STREAM_WEBHOOKS } from '../../lib/nats.js';
import type { Sql } from '../../lib/pg.js';
import { BatchedConsumer } from '../batched-consumer.js';
import type { WebhookMessage } from './outbox.js';

/**
 * The fan-out: each webhook event of the WEBHOOKS stream becomes one delivery row per enabled
 * subscription of its workspace that subscribes to its type (or to `*`; never `ping`, which only
 * its own subscription's test sends) and existed when the event occurred. A batch of messages is
 * one INSERT … SELECT; (subscription, message) is unique, so a message delivered again (a crash
 * before the ack) adds nothing. Messages are acked once their rows are committed.
 */
export class WebhookFanout {
  private readonly loop: BatchedConsumer;

  constructor(
    js: JetStreamClient,
    private readonly sql: Sql,
    consumer: string,
    private readonly log: Logger,
    /** Told when deliveries were written (the dispatcher of this process claims them at once). */
    private readonly onDeliveries: () => void,
  ) {
    this.loop = new BatchedConsumer(js, STREAM_WEBHOOKS, consumer, { maxMessages: 500, kickMs: 20, log }, (b) =>
      this.write(b),
    );
  }

  start(): Promise<void> {
    return this.loop.start();
  }

  private async write(batch: JsMsg[]): Promise<void> {
    const tenants: string[] = [];
    const ids: string[] = [];
    const types: string[] = [];
    const times: string[] = [];
    const bodies: string[] = [];
    for (const m of batch) {
      let w: WebhookMessage;
      try {
        w = m.json<WebhookMessage>();
      } catch {
        w = {} as WebhookMessage;
      }
      if (!isUuid(w.tenant_id ?? '') || !isUuid(w.id ?? '') || typeof w.type !== 'string') {
        this.log.error({ subject: m.subject, seq: m.seq }, 'malformed webhook message dropped');
        continue;
      }
      tenants.push(w.tenant_id);
      ids.push(w.id);
      types.push(w.type);
      times.push(w.occurred_at);
      bodies.push(JSON.stringify({ type: w.type, timestamp: w.occurred_at, data: w.data }));
    }
    let written = 0;
    await this.loop.retryThenAck(batch, 'webhook fan-out failed', async () => {
      if (!ids.length) return;
      const r = await this.sql`
        INSERT INTO webhook_deliveries (tenant_id, subscription_id, message_id, event_type, body, next_attempt_at)
        SELECT m.tenant_id, s.id, m.message_id, m.type, m.body, now()
        FROM unnest(
          ${tenants}::uuid[], ${ids}::uuid[], ${types}::text[], ${times}::timestamptz[], ${bodies}::text[]
        )
          AS m (tenant_id, message_id, type, occurred_at, body)
        JOIN webhook_subscriptions s ON s.tenant_id = m.tenant_id AND s.enabled
          AND s.created_at <= m.occurred_at
          AND (m.type = ANY(s.events) OR ('*' = ANY(s.events) AND m.type <> 'ping'))
        ORDER BY s.id, m.message_id
        ON CONFLICT (subscription_id, message_id) DO NOTHING`;
      written = r.count;
    });
    if (written) this.onDeliveries();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }
}
