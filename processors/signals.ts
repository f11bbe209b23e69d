import type { Gauge, Registry } from 'prom-client';
import { commaList } from '../lib/comma-list.js';
import type { Providers } from '../lib/integrations/providers.js';
import type { Logger } from '../lib/logger.js';
import { Sampler } from '../lib/sampler.js';
import { inTenants, type Sql } from '../lib/pg.js';
import { PoolProbe, gauge, watchNats } from '../lib/prometheus.js';
import { SYNC_CONNECTORS } from './integrations/sync/index.js';
import type { Job, Tier } from './jobs.js';

/** The workspaces of each job this instance serves (its *_TENANTS settings; empty: all). */
export interface SignalScopes {
  health: string[] | false;
  metrics: string[];
  playbooks: string[];
  webhooks: string[];
  integrations: string[];
  erasure: string[];
  outbox: string[];
}

export interface SignalsOptions {
  scopes: SignalScopes;
  /** Each scheduled job's interval in ms: a workspace is due again after it. */
  intervals: { health: number; metrics: number; playbooks: number; integrationSync: number };
  /** The sync connectors with a configured provider. */
  syncConnectors: string[];
  everyMs: number;
}

/** One row of the statement: a gauge, its label value ('' for none) and its value. */
interface Row {
  gauge: string;
  label: string;
  value: number;
}

type GaugeSpec = readonly [name: string, help: string, label?: string];

/** The sampled gauges, by the name the statement gives them. */
const GAUGES: Record<string, GaugeSpec> = {
  schedule: [
    'schedule_oldest_run_age_seconds',
    'Per scheduled job, the time since the last complete run of the most overdue workspace (since its creation ' +
      'when it never ran)',
    'schedule',
  ],
  webhookPending: ['webhook_pending_deliveries', 'Webhook deliveries waiting to succeed (enabled subscriptions)'],
  webhookRetrying: [
    'webhook_retrying_deliveries',
    'Webhook deliveries waiting for a retry after a failed attempt (enabled subscriptions)',
  ],
  webhookOldest: [
    'webhook_oldest_pending_delivery_age_seconds',
    'Age of the oldest webhook delivery not yet succeeded (enabled subscriptions; 0 when none)',
  ],
  webhookLate: [
    'webhook_due_delivery_delay_seconds',
    'How long the delivery due longest ago has waited for its attempt (enabled subscriptions; 0 when none is due): ' +
      'the dispatchers falling behind, not subscribers failing',
  ],
  webhookDisabled: [
    'webhook_subscriptions_disabled',
    'Subscriptions the service disabled, by reason (gone: the endpoint answered 410; failing: it failed too long)',
    'reason',
  ],
  syncOldest: [
    'integration_sync_oldest_success_age_seconds',
    'Per connector, the time since the last successful sync of the connected integration synced longest ago ' +
      '(since it was connected when it never synced)',
    'connector',
  ],
  connected: ['integrations_connected', 'Connected integrations that sync, per connector', 'connector'],
  syncFailing: [
    'integration_syncs_failing',
    'Connected integrations whose last sync failed, per connector',
    'connector',
  ],
  erasureBacklog: ['erasure_backlog', 'Customer erasures queued or running'],
  erasureOldest: ['erasure_oldest_pending_age_seconds', 'Age of the oldest erasure not completed (0 when none)'],
  outboxPending: [
    'outbox_pending_rows',
    'Outbox rows not yet relayed to JetStream, per outbox (event, webhook)',
    'outbox',
  ],
  outboxOldest: [
    'outbox_oldest_pending_age_seconds',
    'Age of the oldest outbox row not yet relayed, per outbox (0 when none)',
    'outbox',
  ],
};

const ANY = (scope: string[]) => scope.length === 0;

/**
 * When an outbox row was written: the time in its UUIDv7 id (48-bit unix ms). Not occurred_at, which
 * is the event's own time (an e-mail's, days before a sync found it).
 */
const V7_TIME = `to_timestamp(
  ('x' || lpad(substr(replace(id::text, '-', ''), 1, 12), 16, '0'))::bit(64)::bigint / 1000.0)`;

/**
 * The backlogs and ages of the processors' work that lives in PostgreSQL (docs/operations.md):
 * scheduled runs, webhook deliveries, integration syncs, erasures and the outboxes. One statement
 * every `everyMs`, set-based over every workspace this instance serves (maxima and minima, never a
 * loop per workspace), and never a workspace id as a label: an operator learns that some workspace
 * is overdue and by how much, and finds which in the tables the runbook names.
 *
 * Several instances report the same figures when they serve the same workspaces; the rules take
 * the maximum. A failed sample leaves the gauges as they were and counts a failure.
 */
export class Signals {
  private readonly loop: Sampler;
  private readonly gauges = new Map<string, Gauge>();

  constructor(
    private readonly sql: Sql,
    registry: Registry,
    log: Logger,
    private readonly o: SignalsOptions,
  ) {
    for (const [key, [name, help, label]] of Object.entries(GAUGES))
      this.gauges.set(key, gauge(registry, name, label ? [label] : [], { help }));
    this.loop = new Sampler(() => this.sample(), registry, log, {
      name: 'processors_signals',
      what: 'the PostgreSQL backlogs',
      everyMs: o.everyMs,
    });
    // The schedules themselves, so that a rule can compare an age with its job's interval.
    const intervals = gauge(registry, 'schedule_interval_seconds', ['schedule'], {
      help: 'Per scheduled job, the configured interval between runs of a workspace',
    });
    const { health, metrics, playbooks, integrationSync } = o.intervals;
    if (o.scopes.health) intervals.set({ schedule: 'health' }, health / 1000);
    intervals.set({ schedule: 'metrics' }, metrics / 1000);
    intervals.set({ schedule: 'playbooks' }, playbooks / 1000);
    intervals.set({ schedule: 'integration_sync' }, integrationSync / 1000);
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One statement; the gauges are set together once it answered. */
  async sample(): Promise<void> {
    const rows = await this.query();
    for (const g of this.gauges.values()) g.reset();
    for (const r of rows) {
      const spec = GAUGES[r.gauge];
      const g = this.gauges.get(r.gauge);
      if (!spec || !g) continue;
      if (spec[2]) g.set({ [spec[2]]: r.label }, Number(r.value));
      else g.set(Number(r.value));
    }
  }

  private query(): Promise<Row[]> {
    const { sql } = this;
    const { scopes: s } = this.o;
    const jobs: Array<[string, string[]]> = [
      ['metrics', s.metrics],
      ['playbooks', s.playbooks],
    ];
    if (s.health) jobs.unshift(['health', s.health]);
    const age = (t: ReturnType<Sql>) => sql`coalesce(extract(epoch FROM now() - ${t}), 0)::float8`;
    const scheduled = jobs.map(
      ([job, scope]) => sql`
        SELECT 'schedule' AS gauge, ${job}::text AS label,
          ${age(sql`min(coalesce(l.last_finished_at, t.created_at))`)} AS value
        FROM tenants t LEFT JOIN job_leases l ON l.job = ${job} AND l.tenant_id = t.id
        WHERE ${ANY(scope)} OR t.id = ANY(${scope}::uuid[])
        UNION ALL`,
    );
    const sync = this.o.syncConnectors;
    return sql<Row[]>`
      ${scheduled}
      SELECT 'webhookPending', '', count(*)::float8 FROM webhook_deliveries d
        JOIN webhook_subscriptions w ON w.id = d.subscription_id AND w.enabled
        WHERE d.status = 'pending' AND ${inTenants(s.webhooks, 'd')}
      UNION ALL
      SELECT 'webhookRetrying', '', count(*)::float8 FROM webhook_deliveries d
        JOIN webhook_subscriptions w ON w.id = d.subscription_id AND w.enabled
        WHERE d.status = 'pending' AND d.attempts > 0 AND ${inTenants(s.webhooks, 'd')}
      UNION ALL
      SELECT 'webhookOldest', '', ${age(sql`min(d.created_at)`)} FROM webhook_deliveries d
        JOIN webhook_subscriptions w ON w.id = d.subscription_id AND w.enabled
        WHERE d.status = 'pending' AND ${inTenants(s.webhooks, 'd')}
      UNION ALL
      SELECT 'webhookLate', '', ${age(sql`min(d.next_attempt_at)`)} FROM webhook_deliveries d
        JOIN webhook_subscriptions w ON w.id = d.subscription_id AND w.enabled
        WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND ${inTenants(s.webhooks, 'd')}
      UNION ALL
      SELECT 'webhookDisabled', r.reason, count(w.id)::float8
        FROM unnest(ARRAY['gone', 'failing']) AS r (reason)
        LEFT JOIN webhook_subscriptions w ON w.disabled_reason = r.reason AND NOT w.enabled
          AND ${inTenants(s.webhooks, 'w')}
        GROUP BY r.reason
      UNION ALL
      SELECT g.gauge, c.name, CASE g.gauge
          WHEN 'syncOldest' THEN coalesce(max(extract(epoch FROM now() - c.since)), 0)
          WHEN 'connected' THEN count(*)
          ELSE count(*) FILTER (WHERE c.failing) END::float8
        FROM (
          SELECT i.name,
            coalesce(CASE WHEN s.connection_id = i.connection_id THEN s.last_synced_at END,
                     i.connected_at, i.created_at) AS since,
            coalesce(s.connection_id = i.connection_id
                     AND s.last_error_at > coalesce(s.last_synced_at, '-infinity'), false) AS failing
          FROM integrations i
          LEFT JOIN integration_syncs s ON s.tenant_id = i.tenant_id AND s.name = i.name
          WHERE i.status = 'connected' AND i.name = ANY(${sync}::text[])
            AND ${inTenants(s.integrations, 'i')}
        ) c CROSS JOIN unnest(ARRAY['syncOldest', 'connected', 'syncFailing']) AS g (gauge)
        GROUP BY g.gauge, c.name
      UNION ALL
      SELECT 'erasureBacklog', '', count(*)::float8 FROM erasures
        WHERE status <> 'completed' AND ${inTenants(s.erasure)}
      UNION ALL
      SELECT 'erasureOldest', '', ${age(sql`min(requested_at)`)} FROM erasures
        WHERE status <> 'completed' AND ${inTenants(s.erasure)}
      UNION ALL
      SELECT 'outboxPending', 'event', count(*)::float8 FROM event_outbox
        WHERE published_at IS NULL AND ${inTenants(s.outbox)}
      UNION ALL
      SELECT 'outboxOldest', 'event', ${age(sql`min(${sql.unsafe(V7_TIME)})`)} FROM event_outbox
        WHERE published_at IS NULL AND ${inTenants(s.outbox)}
      UNION ALL
      SELECT 'outboxPending', 'webhook', count(*)::float8 FROM webhook_outbox
        WHERE published_at IS NULL AND ${inTenants(s.outbox)}
      UNION ALL
      SELECT 'outboxOldest', 'webhook', ${age(sql`min(${sql.unsafe(V7_TIME)})`)} FROM webhook_outbox
        WHERE published_at IS NULL AND ${inTenants(s.outbox)}`;
  }
}

/** The gauges above, and the tier's connection figures (NATS reconnects, PostgreSQL pool waits). */
export function signalsJob(t: Tier, providers: Providers): Job {
  const { cfg } = t;
  const registry = t.metrics.registry;
  watchNats(t.nc, registry);
  const probe = new PoolProbe(registry, { main: t.sql, webhooks: t.webhookSql }, cfg.GAUGES_INTERVAL_MS);
  const signals = new Signals(t.sql, registry, t.log.child({ module: 'signals' }), {
    scopes: {
      health: cfg.HEALTH_ENABLED && commaList(cfg.HEALTH_TENANTS),
      metrics: commaList(cfg.METRICS_TENANTS),
      playbooks: commaList(cfg.PLAYBOOKS_TENANTS),
      webhooks: commaList(cfg.WEBHOOK_TENANTS),
      integrations: commaList(cfg.INTEGRATION_TENANTS),
      erasure: commaList(cfg.ERASURE_TENANTS),
      outbox: commaList(cfg.OUTBOX_TENANTS),
    },
    intervals: {
      health: cfg.HEALTH_RECALC_INTERVAL_MS,
      metrics: cfg.METRICS_MATERIALIZE_INTERVAL_MS,
      playbooks: cfg.PLAYBOOKS_INTERVAL_MS,
      integrationSync: cfg.INTEGRATION_SYNC_INTERVAL_MS,
    },
    syncConnectors: Object.keys(SYNC_CONNECTORS).filter((n) => providers[n as keyof Providers]),
    everyMs: cfg.GAUGES_INTERVAL_MS,
  });
  return {
    start() {
      probe.start();
      signals.start();
    },
    async stop() {
      probe.stop();
      await signals.stop();
    },
  };
}
