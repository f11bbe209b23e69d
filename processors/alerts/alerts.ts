import { isUuid } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { chTenant } from '../../lib/metrics/literal.js';
import { inTenant, type Sql } from '../../lib/pg.js';
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
 * `usage_drop` for one workspace, run after each of its health runs. A customer is below when its
 * baseline (events in days 8–37 ago, per 7 days) is at least `dropMinWeekly` and its events are
 * under `dropRatio` of it; two windows are counted:
 * - raised on the last 7 complete days (days 1–7 ago, the daily rollup), so that what raises an
 *   alert moves once a day, not with the hours of today; and only while the last 7 × 24 hours are
 *   below too: an alert that the rule below would resolve at once is not raised (it would be raised
 *   and resolved again on every run);
 * - resolved as soon as the last 7 × 24 hours (today included) are no longer below, or the baseline
 *   fell under the floor: a customer back today does not wait for tomorrow's complete day.
 * At most one alert per customer is not resolved. One ClickHouse query, set-based: the daily rollup
 * for every customer, and the raw events of today and of the end of day 7 ago only for the
 * customers that the rollup's days 1–6 leave below (those days alone clear the others).
 */
export async function evaluateUsageDrops(
  sql: Sql,
  ch: ClickHouse,
  tenantId: string,
  t: AlertThresholds,
): Promise<{ raised: number; resolved: number }> {
  if (!isUuid(tenantId)) throw new Error(`not a workspace id: ${tenantId}`);
  const ratio = Number(t.dropRatio);
  /** Per customer whose baseline counts and whose days 1–6 alone leave it below: last7, days6, base. */
  const rollup = `
    SELECT customer_id, sumIf(n, day >= today() - 7) AS last7, sumIf(n, day >= today() - 6) AS days6,
      sumIf(n, day < today() - 7) AS base
    FROM (
      SELECT customer_id, day, countMerge(events) AS n FROM csp.usage_daily
      WHERE ${chTenant(tenantId)} AND day >= today() - 37 AND day <= today() - 1
      GROUP BY customer_id, day
    )
    GROUP BY customer_id
    HAVING base / 30 * 7 >= ${Number(t.dropMinWeekly)} AND days6 < ${ratio} * base / 30 * 7`;
  // The rest of the last 7 × 24 hours from the raw events, of those customers only: today, and day 7
  // ago from this time of day on (events the service generates are not usage, as in the rollup).
  // One query: today() and now() are the same in all its parts. The customers come in a subquery,
  // never in a list in the SQL, which max_query_size would bound. The joined subqueries carry
  // aliases: current ClickHouse refuses a JOIN of unnamed ones (docs/clickhouse.md), 18.16 takes both.
  const rows = await ch.rows<{ id: string; last7: string; recent: string; base: string }>(`
    SELECT toString(customer_id) AS id, last7, days6 + partial AS recent, base
    FROM (${rollup}) AS drops ANY LEFT JOIN (
      SELECT customer_id, count() AS partial FROM csp.events
      WHERE ${chTenant(tenantId)} AND customer_id IN (SELECT customer_id FROM (${rollup}))
        AND surface != 'system' AND ts >= now() - ${7 * 86_400}
        AND (ts < toDateTime(today() - 6) OR (ts >= toDateTime(today()) AND ts < toDateTime(today() + 1)))
      GROUP BY customer_id
    ) AS recent_events USING (customer_id)
    WHERE recent < ${ratio} * base / 30 * 7`);
  /** Still below over the last 7 × 24 hours: their alerts stay open, and only they may be raised. */
  const below = rows.map((r) => ({ id: r.id, last7: Number(r.last7), weekly: (Number(r.base) / 30) * 7 }));
  const raise = below.filter((r) => r.last7 < ratio * r.weekly);
  const ids = raise.map((r) => r.id);
  const last7 = raise.map((r) => r.last7);
  const weekly = raise.map((r) => Math.round(r.weekly * 100) / 100);
  const stillBelow = below.map((r) => r.id);
  return (await sql.begin(async (tx) => {
    const raised = await tx`
      INSERT INTO alerts (tenant_id, type, severity, customer_id, summary, details)
      SELECT ${tenantId}, 'usage_drop', CASE WHEN d.last7 < 0.1 * d.weekly THEN 'high' ELSE 'medium' END, c.id,
        'Usage of ' || c.name || ' fell to ' || d.last7 || ' events in the last 7 days, against '
          || d.weekly || ' a week over the 30 days before',
        jsonb_build_object('events_last_7_days', d.last7, 'baseline_per_week', d.weekly,
          'ratio', round((d.last7 / d.weekly)::numeric, 3))
      FROM unnest(${ids}::uuid[], ${last7}::float8[], ${weekly}::float8[]) AS d (customer_id, last7, weekly)
      JOIN customers c ON c.id = d.customer_id AND ${inTenant(tenantId, 'c')} AND c.deleted_at IS NULL
      ORDER BY c.id
      ON CONFLICT (tenant_id, customer_id) WHERE type = 'usage_drop' AND status <> 'resolved' DO NOTHING`;
    const resolved = await tx`
      UPDATE alerts SET status = 'resolved', resolved_at = now(), updated_at = now(),
        details = details || '{"resolved_by": "recovered"}'
      WHERE ${inTenant(tenantId)} AND type = 'usage_drop' AND status <> 'resolved'
        AND NOT (customer_id = ANY(${stillBelow}::uuid[]))`;
    return { raised: raised.count, resolved: resolved.count };
  })) as { raised: number; resolved: number };
}
