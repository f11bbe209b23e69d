import { connect, type NatsConnection } from 'nats';
import type { Logger } from './logger.js';

/** Connects with unlimited reconnects, logging connection state changes. */
export async function connectNats(url: string, name: string, log: Logger): Promise<NatsConnection> {
  const nc = await connect({ servers: url, name, maxReconnectAttempts: -1, reconnectTimeWait: 500, pingInterval: 10_000 });
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect' || s.type === 'reconnect' || s.type === 'error') log.warn({ nats: s.type, data: String(s.data) }, 'nats connection status');
    }
  })();
  return nc;
}

export const STREAM_EVENTS = 'EVENTS';
export const STREAM_DLQ = 'DLQ';

/** Subjects shared by the tiers. The tiers meet only here, in NATS and in the databases. */
export const subjects = {
  usage: (tenant: string) => `ev.usage.${tenant}`,
  billing: (tenant: string) => `ev.billing.${tenant}`,
  dlq: (consumer: string, original: string) => `dlq.${consumer}.${original}`,
  /** Core NATS: an ingestion key was regenerated (payload: tenant id). */
  ingestionKeyChanged: 'inv.ingestion-key',
  /** Core NATS: a customer of the tenant changed (payload: JSON {tenant_id, ids?}). */
  customersChanged: (tenant: string) => `inv.customers.${tenant}`,
  productsChanged: (tenant: string) => `inv.products.${tenant}`,
} as const;

/** Durable consumers; infra/streams.ts creates them with the stream so no event predates its consumer. */
export const consumers = {
  usageWriter: 'clickhouse-writer-usage',
  billingWriter: 'clickhouse-writer-billing',
  catalog: 'event-catalog',
} as const;
