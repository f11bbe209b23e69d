import { connect, type NatsConnection } from 'nats';
import type { Logger } from './logger.js';
import { commaList } from './comma-list.js';
import { writeFramesUncopied } from './nats-frames.js';

/**
 * Connects with unlimited reconnects, logging connection state changes. `url` is one server or
 * several, comma-separated: the client connects to any and fails over to the others.
 * `pendingBytes`: what nats.js may hold before it writes in the middle of a turn rather than at
 * its end (its `pendingLimit`, 32 KB by default and not in its typings); the ingest tier raises
 * it so that a turn's publishes leave in one write (ingest/publisher.ts).
 */
export async function connectNats(
  url: string,
  name: string,
  log: Logger,
  opts: { pendingBytes?: number } = {},
): Promise<NatsConnection> {
  // No async stack traces: they cost an Error with a stack per publish on the hot path.
  const nc = await connect({
    servers: natsServers(url),
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    pingInterval: 10_000,
    noAsyncTraces: true,
    ...(opts.pendingBytes === undefined ? {} : { pendingLimit: opts.pendingBytes }),
  } as Parameters<typeof connect>[0]);
  if (!writeFramesUncopied(nc)) log.warn('nats.js internals changed: publishes are copied once more before writing');
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect' || s.type === 'reconnect' || s.type === 'error')
        log.warn({ nats: s.type, data: String(s.data) }, 'nats connection status');
    }
  })();
  return nc;
}

/** NATS_URL's servers: comma-separated, blanks ignored. */
export function natsServers(url: string): string[] {
  return commaList(url);
}

export const STREAM_EVENTS = 'EVENTS';
export const STREAM_DLQ = 'DLQ';
/** Webhook events (wh.event.<tenant>), relayed from webhook_outbox and fanned out to subscriptions. */
export const STREAM_WEBHOOKS = 'WEBHOOKS';

/** Subjects shared by the tiers. The tiers meet only here, in NATS and in the databases. */
export const subjects = {
  usage: (tenant: string) => `ev.usage.${tenant}`,
  billing: (tenant: string) => `ev.billing.${tenant}`,
  /** Surface B backfill: historical events, written by their own consumer so live events never wait behind them. */
  backfill: (tenant: string) => `ev.backfill.${tenant}`,
  /**
   * Surface-B events with external_id when their deduplication happens between the stream and the
   * warehouse (SURFACE_B_DEDUP=stream), on the workspace's partition: each partition has its own
   * consumer, run by one processors instance at a time, which holds its workspaces' keys
   * (processors/dedup/).
   */
  keyed: (tenant: string) => `ev.keyed.${tenant}.${keyedPartition(tenant)}`,
  /** Events the service generates itself (health_changed, task_*, …), relayed from the PostgreSQL outbox. */
  system: (tenant: string) => `ev.system.${tenant}`,
  dlq: (consumer: string, original: string) => `dlq.${consumer}.${original}`,
  /** Webhook events of a workspace (customer.created, task.completed, …), relayed from webhook_outbox. */
  webhook: (tenant: string) => `wh.event.${tenant}`,
  /** Core NATS request/reply: recalculate one customer's health now (payload: JSON RecalculateRequest). */
  healthRecalculate: 'cmd.health.recalculate',
  /** Core NATS request/reply: materialize one metric now (payload: JSON MaterializeRequest). */
  metricsMaterialize: 'cmd.metrics.materialize',
  /** Core NATS request/reply: evaluate one playbook now (payload: JSON PlaybookRunRequest). */
  playbookRun: 'cmd.playbooks.run',
  /**
   * Core NATS, no reply: work on a workspace's integration is due now (payload: JSON {tenant_id,
   * name}): a sync asked for through the API, a new connection's first sync or Zendesk backfill.
   * Every processors instance hears it (no queue group) and claims the work under its lease.
   */
  integrationWork: 'cmd.integrations.work',
  /** Core NATS: an ingestion key was regenerated (payload: tenant id). */
  ingestionKeyChanged: 'inv.ingestion-key',
  /** Core NATS: a customer of the tenant changed (payload: JSON {tenant_id, ids?}). */
  customersChanged: (tenant: string) => `inv.customers.${tenant}`,
  productsChanged: (tenant: string) => `inv.products.${tenant}`,
  /** Core NATS: an API key was revoked (payload: key id); every tier that accepts bearer credentials listens. */
  apiKeyRevoked: 'inv.api-keys',
  /** Core NATS: an OAuth refresh-token family was revoked (payload: family id). */
  familyRevoked: 'inv.oauth-families',
} as const;

/** The workspace of a per-workspace subject (`ev.<kind>.<tenant>`, `inv.customers.<tenant>`, …). */
export function tenantOfSubject(subject: string): string | undefined {
  return subject.split('.')[2] || undefined;
}

/**
 * How many partitions the keyed events are spread over: as many processors instances can land them
 * at once. Part of the subjects, so fixed: a change would move workspaces between partitions while
 * their messages are in flight.
 */
export const KEYED_PARTITIONS = 4;

/** A workspace's keyed partition: FNV-1a of its id, modulo KEYED_PARTITIONS. */
export function keyedPartition(tenant: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < tenant.length; i++) h = Math.imul(h ^ tenant.charCodeAt(i), 0x01000193);
  return (h >>> 0) % KEYED_PARTITIONS;
}

/** The consumer of keyed partition `p` (ev.keyed.*.<p>) into csp.events, each key stored once. */
export const keyedWriter = (p: number) => `clickhouse-writer-keyed-${p}`;

/** Consumers of earlier releases, deleted where they are found (infra/streams.ts). */
export const RETIRED_CONSUMERS: readonly string[] = ['clickhouse-writer-keyed'];

/** Durable consumers; infra/streams.ts creates them with the stream so no event predates its consumer. */
export const consumers = {
  usageWriter: 'clickhouse-writer-usage',
  billingWriter: 'clickhouse-writer-billing',
  catalog: 'event-catalog',
  backfillWriter: 'clickhouse-writer-backfill',
  catalogBackfill: 'event-catalog-backfill',
  catalogKeyed: 'event-catalog-keyed',
  /** Generated events (ev.system.>) into csp.events. */
  systemWriter: 'clickhouse-writer-system',
  /** Webhook events (wh.>) into webhook_deliveries, one row per matching subscription. */
  webhookFanout: 'webhook-fanout',
} as const;
