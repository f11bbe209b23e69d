import { isUuid } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import type { Sql } from '../../lib/pg.js';
import { PollingJob } from '../polling-job.js';
import type { ClickHouse } from '../clickhouse.js';

export interface AlertThresholds {
  /** api_key_usage_spike: requests in 5 minutes above this many times the trailing 24-hour average… */
  keySpikeFactor: number;
  /** …and above this floor. */
  keySpikeFloor: number;
  /** usage_drop: the last 7 days below this share of the weekly baseline… */
  dropRatio: number;
  /** …when the baseline is at least this many events a week. */
  dropMinWeekly: number;
}

/** Class of the advisory lock that makes one instance at a time look for key spikes ('alrt'). */
const LOCK = 0x616c7274;

/**
 * `api_key_usage_spike`, for every workspace at once, every `intervalMs` (one instance at a time):
 * an API key whose requests in the last 5 minutes (the credential audit) exceed both
 * `factor` × its average per 5 minutes over the 24 hours before and the floor. At most one alert
 * per key is not resolved (a unique index; ON CONFLICT DO NOTHING), so a spike that lasts does not
 * raise a second one.
 */
export class KeySpikes extends PollingJob {
  constructor(
    private readonly sql: Sql,
    private readonly t: AlertThresholds,
    log: Logger,
    intervalMs: number,
  ) {
    super(log, 'api key spike check', intervalMs);
  }

  /** One look; the alerts it raised. */
  async once(): Promise<number> {
    return (await this.sql.begin(async (tx) => {
      const [{ locked }] = await tx<Array<{ locked: boolean }>>`SELECT pg_try_advisory_xact_lock(${LOCK}) AS locked`;
      if (!locked) return 0;
      const r = await tx`
        WITH recent AS (
          SELECT tenant_id, actor_id AS key_id, count(*) AS n FROM credential_audit
          WHERE actor_kind = 'api_key' AND at > now() - interval '5 minutes'
          GROUP BY tenant_id, actor_id HAVING count(*) > ${this.t.keySpikeFloor}
        ),
        base AS (
          SELECT a.tenant_id, a.actor_id AS key_id, count(*) / 288.0 AS per5 FROM credential_audit a
          JOIN recent r ON r.tenant_id = a.tenant_id AND r.key_id = a.actor_id
          WHERE a.actor_kind = 'api_key' AND a.at > now() - interval '24 hours 5 minutes'
            AND a.at <= now() - interval '5 minutes'
          GROUP BY a.tenant_id, a.actor_id
        )
        INSERT INTO alerts (tenant_id, type, severity, api_key_id, summary, details)
        SELECT r.tenant_id, 'api_key_usage_spike', 'high', r.key_id,
          'API key ' || k.name || ' (…' || k.last4 || ') made ' || r.n || ' requests in 5 minutes, against '
            || round(coalesce(b.per5, 0), 1) || ' per 5 minutes over the previous 24 hours',
          jsonb_build_object('requests_last_5_min', r.n, 'average_per_5_min', round(coalesce(b.per5, 0), 2),
            'factor', ${this.t.keySpikeFactor}::float8, 'floor', ${this.t.keySpikeFloor}::int)
        FROM recent r JOIN api_keys k ON k.id = r.key_id AND k.tenant_id = r.tenant_id
        LEFT JOIN base b ON b.tenant_id = r.tenant_id AND b.key_id = r.key_id
        WHERE r.n > ${this.t.keySpikeFactor}::float8 * coalesce(b.per5, 0)
        ORDER BY r.tenant_id, r.key_id
        ON CONFLICT (tenant_id, api_key_id) WHERE type = 'api_key_usage_spike' AND status <> 'resolved' DO NOTHING`;
      return r.count;
    })) as number;
  }
}

/**
 * `usage_drop` for one workspace, run after each of its health runs: one ClickHouse query over the
 * daily rollup gives each customer's events in the last 7 complete days (days 1–7 ago) and in the
 * 30 days before (days 8–37 ago, the baseline, counted per 7 days); a customer whose baseline is at
 * least `dropMinWeekly` and whose last 7 days are below `dropRatio` of it gets an alert (at most
 * one not resolved), and the open alerts of customers no longer below are resolved.
 */
export async function evaluateUsageDrops(
  sql: Sql,
  ch: ClickHouse,
  tenantId: string,
  t: AlertThresholds,
): Promise<{ raised: number; resolved: number }> {
  if (!isUuid(tenantId)) throw new Error(`not a workspace id: ${tenantId}`);
  const rows = await ch.rows<{ customer_id: string; last7: string; base: string }>(`
    SELECT toString(customer_id) AS customer_id, sumIf(n, day >= today() - 7) AS last7,
      sumIf(n, day < today() - 7) AS base
    FROM (
      SELECT customer_id, day, countMerge(events) AS n FROM csp.usage_daily
      WHERE tenant_id = toUUID('${tenantId}') AND day >= today() - 37 AND day <= today() - 1
      GROUP BY customer_id, day
    )
    GROUP BY customer_id
    HAVING base / 30 * 7 >= ${Number(t.dropMinWeekly)} AND last7 < ${Number(t.dropRatio)} * base / 30 * 7`);
  const ids = rows.map((r) => r.customer_id);
  const last7 = rows.map((r) => Number(r.last7));
  const weekly = rows.map((r) => Math.round((Number(r.base) / 30) * 7 * 100) / 100);
  return (await sql.begin(async (tx) => {
    const raised = await tx`
      INSERT INTO alerts (tenant_id, type, severity, customer_id, summary, details)
      SELECT ${tenantId}, 'usage_drop', CASE WHEN d.last7 < 0.1 * d.weekly THEN 'high' ELSE 'medium' END, c.id,
        'Usage of ' || c.name || ' fell to ' || d.last7 || ' events in the last 7 days, against '
          || d.weekly || ' a week over the 30 days before',
        jsonb_build_object('events_last_7_days', d.last7, 'baseline_per_week', d.weekly,
          'ratio', round((d.last7 / d.weekly)::numeric, 3))
      FROM unnest(${ids}::uuid[], ${last7}::float8[], ${weekly}::float8[]) AS d (customer_id, last7, weekly)
      JOIN customers c ON c.id = d.customer_id AND c.tenant_id = ${tenantId} AND c.deleted_at IS NULL
      ORDER BY c.id
      ON CONFLICT (tenant_id, customer_id) WHERE type = 'usage_drop' AND status <> 'resolved' DO NOTHING`;
    const resolved = await tx`
      UPDATE alerts SET status = 'resolved', resolved_at = now(), updated_at = now(),
        details = details || '{"resolved_by": "recovered"}'
      WHERE tenant_id = ${tenantId} AND type = 'usage_drop' AND status <> 'resolved'
        AND NOT (customer_id = ANY(${ids}::uuid[]))`;
    return { raised: raised.count, resolved: resolved.count };
  })) as { raised: number; resolved: number };
}
