import { compileMetric } from '../../lib/metrics/compile.js';
import { compileMetricGroup, groupable } from '../../lib/metrics/group.js';
import type { Logger } from '../../lib/logger.js';
import type { Sql } from '../../lib/pg.js';
import { type MaterializeSummary, PORTFOLIO_CUSTOMER } from '../../schemas/materialize.js';
import type { ClickHouse } from '../clickhouse.js';
import { liveCustomers, type MetricToRun, metricsInUse } from './consumers.js';
import { ValueBatch } from './store.js';

/**
 * A customer list longer than this is not sent as `customer_id IN (…)`: the query reads the whole
 * workspace and the customers not needed are dropped here.
 */
const MAX_LISTED = 5000;

export interface MaterializerDeps {
  sql: Sql;
  ch: ClickHouse;
  log: Logger;
  instance: string;
}

export interface WorkspaceRun {
  metrics: number;
  rows: number;
  ms: number;
}

export class MaterializeError extends Error {
  constructor(
    readonly code: 'materialization_failed' | 'aborted',
    message: string,
  ) {
    super(message);
  }
}

/**
 * Materialization of a workspace's metrics: per metric ONE ClickHouse query compiled by
 * lib/metrics/compile.ts (GROUP BY customer_id) for the customers its consumers need, or, for
 * metrics needed for every customer, one query per source event for all of them
 * (lib/metrics/group.ts: the events are read once, not once per metric); customers
 * without a matching event get the calculation's empty value (0 for count, sum, distinct_count,
 * exists; null for avg, max, last_value); values go to csp.metric_values in inserts of up to
 * 100,000 rows. The window ends at the run's time (to the second), the same for every metric of
 * the run. A metric that fails is logged and the others still run; the run then fails, so the
 * schedule retries it after its back-off (a redone run rewrites the same rows).
 */
export class Materializer {
  private runs = 0;

  constructor(private readonly d: MaterializerDeps) {}

  async materializeWorkspace(tenantId: string, stopping: () => boolean = () => false): Promise<WorkspaceRun> {
    const t0 = performance.now();
    const metrics = await metricsInUse(this.d.sql, tenantId);
    if (!metrics.length) return { metrics: 0, rows: 0, ms: Math.round(performance.now() - t0) };
    const all = metrics.some((m) => m.customers === 'all') ? await liveCustomers(this.d.sql, tenantId) : [];
    const now = runTime();
    const batch = new ValueBatch(this.d.ch, this.d.log, `metrics-${this.d.instance}-${++this.runs}`);
    const failed: string[] = [];
    for (const unit of plan(metrics, now)) {
      if (stopping()) throw new MaterializeError('aborted', 'stopped by shutdown');
      try {
        if (unit.length === 1) await this.runMetric(tenantId, unit[0], all, now, batch);
        else await this.runGroup(tenantId, unit, all, now, batch);
      } catch (err) {
        failed.push(...unit.map((m) => m.id));
        this.d.log.error({ err, tenantId, metricIds: unit.map((m) => m.id) }, 'metric materialization failed');
      }
    }
    await batch.flush();
    if (failed.length)
      throw new MaterializeError('materialization_failed', `${failed.length} of ${metrics.length} metrics failed`);
    return { metrics: metrics.length, rows: batch.rows, ms: Math.round(performance.now() - t0) };
  }

  /** One metric now (POST /v1/metrics/{id}/materialize), answered once its values are stored. */
  async materializeOne(tenantId: string, m: MetricToRun): Promise<MaterializeSummary> {
    const all = m.customers === 'all' ? await liveCustomers(this.d.sql, tenantId) : [];
    const now = runTime();
    const batch = new ValueBatch(this.d.ch, this.d.log, `metrics-now-${this.d.instance}-${++this.runs}`);
    const period = await this.runMetric(tenantId, m, all, now, batch);
    await batch.flush();
    return {
      metric_id: m.id,
      customers: batch.rows,
      period_start: period.from.toISOString(),
      period_end: period.to.toISOString(),
      computed_at: now.toISOString(),
    };
  }

  private async runMetric(
    tenantId: string,
    m: MetricToRun,
    all: string[],
    now: Date,
    batch: ValueBatch,
  ): Promise<{ from: Date; to: Date }> {
    const wanted = m.customers === 'all' ? all : m.customers;
    const listed = m.customers !== 'all' && wanted.length <= MAX_LISTED;
    const compiled = compileMetric(m.definition, {
      tenantId,
      now,
      customerIds: listed ? wanted : 'all',
      database: this.d.ch.database,
    });
    const rows = await this.d.ch.rows<{ customer_id: string | null; value: number | null }>(compiled.sql);
    const period = { from: trim(compiled.period.from), to: trim(compiled.period.to) };
    const head = { tenantId, metricId: m.id, ...period, computedAt: now };
    if (m.definition.grain === 'portfolio') {
      await batch.add(head, [PORTFOLIO_CUSTOMER], [rows.length ? rows[0].value : compiled.empty]);
      return period;
    }
    const found = new Map<string, number | null>();
    for (const r of rows) if (r.customer_id) found.set(r.customer_id, r.value);
    const values = wanted.map((id) => {
      const v = found.get(id);
      return v === undefined ? compiled.empty : v;
    });
    await batch.add(head, wanted, values);
    return period;
  }

  /** Metrics of one source event for every customer: one query, values split per metric. */
  private async runGroup(tenantId: string, ms: MetricToRun[], all: string[], now: Date, batch: ValueBatch) {
    const compiled = compileMetricGroup(
      ms.map((m) => m.definition),
      { tenantId, now, database: this.d.ch.database },
    );
    const rows = await this.d.ch.rows<Record<string, string | number | null>>(compiled.sql);
    const byCustomer = new Map(rows.map((r) => [r.customer_id as string, r]));
    for (const [i, m] of ms.entries()) {
      const period = { from: trim(compiled.periods[i].from), to: trim(compiled.periods[i].to) };
      const wanted = m.customers === 'all' ? all : m.customers;
      const values = wanted.map((id) => {
        const r = byCustomer.get(id);
        const v = r === undefined ? compiled.empty[i] : r[`v${i}`];
        return v === null || v === undefined ? null : Number(v);
      });
      await batch.add({ tenantId, metricId: m.id, ...period, computedAt: now }, wanted, values);
    }
  }
}

/**
 * The queries of a run: metrics read for a customer list short enough to send run alone (their
 * query reads only those customers); the others that lib/metrics/group.ts can combine share one
 * query per source event; the rest (rollup reads, portfolio grain) run alone.
 */
export function plan(metrics: MetricToRun[], now: Date): MetricToRun[][] {
  const alone: MetricToRun[][] = [];
  const bySource = new Map<string, MetricToRun[]>();
  for (const m of metrics) {
    const listed = m.customers !== 'all' && m.customers.length <= MAX_LISTED;
    if (listed || !groupable(m.definition, now)) alone.push([m]);
    else bySource.set(m.definition.source_event, [...(bySource.get(m.definition.source_event) ?? []), m]);
  }
  return [...alone, ...bySource.values()];
}

/** Seconds only: csp.metric_values holds DateTime, and the API then shows what is stored. */
const trim = (d: Date) => new Date(Math.floor(d.getTime() / 1000) * 1000);
const runTime = () => trim(new Date());
