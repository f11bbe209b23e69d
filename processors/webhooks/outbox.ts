import type { JetStreamClient } from 'nats';
import type { TransactionSql } from 'postgres';
import { subjects } from '../../lib/nats.js';
import { inTenants } from '../../lib/pg.js';
import type { RelaySource } from '../outbox/relay.js';

interface WebhookOutboxRow {
  id: string;
  tenant_id: string;
  type: string;
  data: unknown;
  occurred_at: Date;
}

/** A webhook event on the wire (stream WEBHOOKS): what fanout.ts turns into deliveries. */
export interface WebhookMessage {
  id: string;
  tenant_id: string;
  type: string;
  occurred_at: string;
  data: unknown;
}

/** webhook_outbox relayed to wh.event.<tenant>, one message per event, the row id as Nats-Msg-Id. */
export class WebhookEvents implements RelaySource<WebhookOutboxRow> {
  readonly table = 'webhook_outbox';

  constructor(
    private readonly js: JetStreamClient,
    private readonly publishTimeoutMs: number,
  ) {}

  lock(tx: TransactionSql, batch: number, tenants: readonly string[]): Promise<WebhookOutboxRow[]> {
    return tx<WebhookOutboxRow[]>`
      SELECT id::text, tenant_id::text, type, data, occurred_at
      FROM webhook_outbox WHERE published_at IS NULL AND ${inTenants(tenants)}
      ORDER BY occurred_at LIMIT ${batch}
      FOR UPDATE SKIP LOCKED`;
  }

  async publish(r: WebhookOutboxRow): Promise<void> {
    const m: WebhookMessage = {
      id: r.id,
      tenant_id: r.tenant_id,
      type: r.type,
      occurred_at: r.occurred_at.toISOString(),
      data: r.data,
    };
    await this.js.publish(subjects.webhook(r.tenant_id), Buffer.from(JSON.stringify(m)), {
      msgID: r.id,
      timeout: this.publishTimeoutMs,
    });
  }
}
