import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  RetentionPolicy,
  StorageType,
  nanos,
  type JetStreamManager,
  type StreamConfig,
  type ConsumerConfig,
} from 'nats';
import {
  KEYED_PARTITIONS,
  RETIRED_CONSUMERS,
  STREAM_DLQ,
  STREAM_EVENTS,
  STREAM_WEBHOOKS,
  consumers,
  keyedWriter,
} from '../lib/nats.js';

export interface StreamOptions {
  /**
   * Cap on the bytes the EVENTS stream holds; past it publishes fail (ingest answers 503) instead of dropping events.
   */
  maxBytes: number;
  replicas: number;
}

/**
 * EVENTS keeps a message until every consumer whose filter matches it has acknowledged it, and
 * refuses new messages when full (discard new): an accepted event can never be aged or pushed out
 * before it is in ClickHouse. The streams are kept with limits retention and no age limit, and
 * the processors purge the prefix every consumer has acknowledged (processors/stream-trimmer.ts):
 * nats-server 2.9's own interest retention lost unreceived messages on replicated streams. A
 * stream created earlier with interest retention keeps it (retention cannot be changed in place;
 * on one server it is correct).
 */
export function streamConfigs(o: StreamOptions): Array<Partial<StreamConfig> & { name: string }> {
  // Every stream: limits retention (the processors trim), on disk.
  const every = { retention: RetentionPolicy.Limits, storage: StorageType.File, num_replicas: o.replicas };
  // Full, EVENTS and WEBHOOKS refuse new messages; a message published twice within 2 minutes is stored once.
  const refusing = {
    ...every,
    discard: DiscardPolicy.New,
    max_msg_size: 8 * 1024 * 1024,
    duplicate_window: nanos(2 * 60_000),
  };
  return [
    { ...refusing, name: STREAM_EVENTS, subjects: ['ev.>'], max_bytes: o.maxBytes },
    // Webhook events until the fan-out has written their deliveries; full → the relay leaves
    // them in webhook_outbox (nothing is lost, they wait).
    { ...refusing, name: STREAM_WEBHOOKS, subjects: ['wh.>'], max_bytes: Math.min(o.maxBytes, 1024 ** 3) },
    { ...every, name: STREAM_DLQ, subjects: ['dlq.>'], max_age: nanos(30 * 24 * 3600_000) },
  ];
}

export const ACK_WAIT_MS = 10_000;

const writer = (durable: string, filter: string): Partial<ConsumerConfig> & { durable_name: string } => ({
  durable_name: durable,
  filter_subject: filter,
  ack_policy: AckPolicy.Explicit,
  deliver_policy: DeliverPolicy.All,
  // How soon a crashed writer's messages go to another: short, because live writers extend it
  // with in-progress acks (every ACK_WAIT/3) while ClickHouse is slow or down.
  ack_wait: nanos(ACK_WAIT_MS),
  max_deliver: -1,
  // Bounds what a writer can hold un-acked: 20k requests of up to 100 events.
  max_ack_pending: 20_000,
  max_waiting: 64,
});

export const consumerConfigs = [
  { stream: STREAM_EVENTS, config: writer(consumers.usageWriter, 'ev.usage.>') },
  { stream: STREAM_EVENTS, config: writer(consumers.billingWriter, 'ev.billing.>') },
  // The catalog needs only the Cs-Names header: do not ship it the payloads.
  { stream: STREAM_EVENTS, config: { ...writer(consumers.catalog, 'ev.usage.>'), headers_only: true } },
  // Backfill has its own writer so a large backfill never delays live events, and its own catalog
  // consumer because nats-server 2.9 takes one filter subject per consumer.
  { stream: STREAM_EVENTS, config: { ...writer(consumers.backfillWriter, 'ev.backfill.>'), max_ack_pending: 2_000 } },
  { stream: STREAM_EVENTS, config: { ...writer(consumers.catalogBackfill, 'ev.backfill.>'), headers_only: true } },
  // Keyed surface-B events (SURFACE_B_DEDUP=stream), live and backfilled in one stream order, one
  // consumer per partition of the workspaces.
  ...Array.from({ length: KEYED_PARTITIONS }, (_, p) => ({
    stream: STREAM_EVENTS,
    config: writer(keyedWriter(p), `ev.keyed.*.${p}`),
  })),
  { stream: STREAM_EVENTS, config: { ...writer(consumers.catalogKeyed, 'ev.keyed.>'), headers_only: true } },
  // Events the service generates (health_changed, task_*): few, so a small ack-pending bound.
  { stream: STREAM_EVENTS, config: { ...writer(consumers.systemWriter, 'ev.system.>'), max_ack_pending: 1_000 } },
  { stream: STREAM_WEBHOOKS, config: { ...writer(consumers.webhookFanout, 'wh.>'), max_ack_pending: 5_000 } },
];

export async function applyStreams(jsm: JetStreamManager, o: StreamOptions): Promise<void> {
  for (const cfg of streamConfigs(o)) {
    const existing = await jsm.streams.info(cfg.name).catch(() => undefined);
    if (!existing) await jsm.streams.add(cfg);
    else {
      const { retention: _r, storage: _s, ...mutable } = cfg;
      await jsm.streams.update(cfg.name, mutable);
    }
  }
  // Retired consumers would hold the stream's trim floor for ever (nobody acknowledges for them).
  for (const name of RETIRED_CONSUMERS)
    if (await jsm.consumers.info(STREAM_EVENTS, name).catch(() => undefined))
      await jsm.consumers.delete(STREAM_EVENTS, name);
  for (const { stream, config } of consumerConfigs) {
    const existing = await jsm.consumers.info(stream, config.durable_name).catch(() => undefined);
    if (!existing) await jsm.consumers.add(stream, config);
    else
      await jsm.consumers.update(stream, config.durable_name, {
        ack_wait: config.ack_wait,
        max_ack_pending: config.max_ack_pending,
      });
  }
}
