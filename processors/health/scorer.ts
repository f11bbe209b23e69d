import type { Piscina } from 'piscina';
import type { Logger } from '../../lib/logger.js';
import { inTenant, type Sql } from '../../lib/pg.js';
import { effectiveModel, type HealthModel } from '../../schemas/health.js';
import type { ClickHouse } from '../clickhouse.js';
import type { HealthMetrics } from '../metrics.js';
import { aggregate } from './queries.js';
import { type Aggregates, type Scored, scoreAggregates, sliceAggregates } from './score.js';
import type { ScoreTask } from './score-worker.js';
import {
  CHUNK,
  type HistoryBuffer,
  historyPoint,
  historyRows,
  insertHistory,
  markRun,
  storeScores,
  type Written,
} from './store.js';

export interface ScorerDeps {
  sql: Sql;
  ch: ClickHouse;
  /** Worker threads running score-worker.js. */
  pool: Piscina<ScoreTask, Scored>;
  log: Logger;
  metrics: HealthMetrics;
  /** Workspaces with more customers than this are scored in the pool, smaller ones inline. */
  poolMinCustomers: number;
  instance: string;
}

export interface RunSummary extends Written {
  customers: number;
  ms: number;
  /** Milliseconds per phase: PostgreSQL reads, ClickHouse aggregation, scoring, customer_health, history. */
  phases: { read: number; aggregate: number; score: number; store: number; history: number };
}

/**
 * One calculation, of a whole workspace (scheduled) or of one customer (on demand), the same way:
 * the model and the live customers from PostgreSQL, the aggregates of all of them from a few
 * ClickHouse queries, the scores over arrays, then store.ts. Nothing is awaited per customer.
 */
export class HealthScorer {
  private runs = 0;

  constructor(private readonly d: ScorerDeps) {}

  async model(tenantId: string): Promise<HealthModel> {
    const [row] = await this.d.sql<Array<{ model: Partial<HealthModel> }>>`
      SELECT model FROM health_models WHERE ${inTenant(tenantId)}`;
    return effectiveModel(row?.model);
  }

  /**
   * Ids of the workspace's live customers (in one value rather than a row each): the customers a
   * run covers. The same statement, so the same snapshot, pins the scored customers it leaves out
   * (in the trash) at their calculated_at in health_run_misses, and returns as `restored` those
   * pinned earlier that it covers again, for markRun to unpin once the run is stored.
   */
  async customers(tenantId: string): Promise<{ ids: string[]; restored: string[] }> {
    const [row] = await this.d.sql<Array<{ ids: string | null; restored: string[] | null }>>`
      WITH pinned AS (
        INSERT INTO health_run_misses (customer_id, tenant_id, calculated_at)
        SELECT h.customer_id, h.tenant_id, GREATEST(h.calculated_at, r.calculated_at)
        FROM customers c JOIN customer_health h ON h.customer_id = c.id
          LEFT JOIN health_runs r ON r.tenant_id = c.tenant_id
        WHERE ${inTenant(tenantId, 'c')} AND c.deleted_at IS NOT NULL
        ON CONFLICT (customer_id) DO NOTHING
      )
      SELECT
        (SELECT string_agg(id::text, ',') FROM customers WHERE ${inTenant(tenantId)} AND deleted_at IS NULL) AS ids,
        (SELECT array_agg(m.customer_id::text) FROM health_run_misses m JOIN customers c ON c.id = m.customer_id
         WHERE ${inTenant(tenantId, 'm')} AND c.deleted_at IS NULL) AS restored`;
    return { ids: row?.ids ? row.ids.split(',') : [], restored: row?.restored ?? [] };
  }

  async scoreWorkspace(tenantId: string, stopping: () => boolean): Promise<RunSummary> {
    const t0 = performance.now();
    let mark = t0;
    const lap = () => {
      const now = performance.now();
      const ms = Math.round(now - mark);
      mark = now;
      return ms;
    };
    const calculatedAt = runTime();
    const [model, { ids, restored }] = await Promise.all([this.model(tenantId), this.customers(tenantId)]);
    const read = lap();
    if (!ids.length) {
      const phases = { read, aggregate: 0, score: 0, store: 0, history: 0 };
      return { customers: 0, written: 0, changed: 0, ms: read, phases };
    }
    const scope = { tenantId, today: calculatedAt.toISOString().slice(0, 10) };
    const aggregates = await aggregate(this.d.ch, scope, model, ids);
    const aggregateMs = lap();
    const scored =
      ids.length > this.d.poolMinCustomers ? await this.inPool(model, aggregates) : scoreAggregates(model, aggregates);
    const score = lap();
    const written = await storeScores(this.d.sql, this.d.log, tenantId, ids, scored, calculatedAt, { stopping });
    await markRun(this.d.sql, tenantId, calculatedAt, restored);
    const store = lap();
    await insertHistory(
      this.d.ch,
      this.d.log,
      historyRows(tenantId, ids, scored, calculatedAt),
      `health-${this.d.instance}-${++this.runs}`,
    );
    const history = lap();
    this.d.metrics.scored(ids.length);
    return {
      customers: ids.length,
      written: written.written,
      changed: written.changed,
      ms: Math.round(performance.now() - t0),
      phases: { read, aggregate: aggregateMs, score, store, history },
    };
  }

  /**
   * Some customers of one workspace now (a batch of on-demand requests, see batcher.ts): one
   * PostgreSQL read, one set of ClickHouse queries over `customer_id IN (…)`, one customer_health
   * statement (one transaction) for all of them. Returns, per customer scored, its health as
   * stored (RecalculatedHealth as JSON text, the dimensions copied as they are); a customer
   * missing from it is unknown, deleted (also meanwhile) or another workspace's.
   */
  async scoreCustomers(tenantId: string, customerIds: string[], history: HistoryBuffer): Promise<Map<string, string>> {
    const calculatedAt = runTime();
    const [row] = await this.d.sql<Array<{ model: Partial<HealthModel> | null; ids: string[] | null }>>`
      SELECT (SELECT model FROM health_models WHERE ${inTenant(tenantId)}) AS model,
        (SELECT array_agg(id::text ORDER BY id) FROM customers
         WHERE ${inTenant(tenantId)} AND id = ANY(${customerIds}::uuid[]) AND deleted_at IS NULL) AS ids`;
    const ids = row?.ids ?? [];
    const out = new Map<string, string>();
    if (!ids.length) return out;
    const model = effectiveModel(row.model);
    const scope = { tenantId, customerIds: ids, today: calculatedAt.toISOString().slice(0, 10) };
    const scored = scoreAggregates(model, await aggregate(this.d.ch, scope, model, ids));
    const w = await storeScores(this.d.sql, this.d.log, tenantId, ids, scored, calculatedAt, { force: true });
    const stamped = w.stamped ?? new Map<string, Date>();
    for (let i = 0; i < ids.length; i++) {
      const at = stamped.get(ids[i]);
      if (!at) continue;
      history.add(ids[i], historyPoint(tenantId, ids[i], scored.score[i], scored.status[i], at));
      out.set(
        ids[i],
        `{"score":${scored.score[i]},"status":"${scored.status[i]}","calculated_at":"${at.toISOString()}",` +
          `"dimensions":${scored.dimensions[i]}}`,
      );
    }
    this.d.metrics.scored(stamped.size);
    return out;
  }

  /** Chunks of CHUNK customers through the pool, a few in flight so every thread stays busy. */
  private async inPool(model: HealthModel, a: Aggregates): Promise<Scored> {
    const n = a.activeDays.length;
    const chunks: Scored[] = [];
    const starts: number[] = [];
    for (let from = 0; from < n; from += CHUNK) starts.push(from);
    let next = 0;
    const lane = async () => {
      while (next < starts.length) {
        const k = next++;
        const from = starts[k];
        chunks[k] = await this.d.pool.run({ model, aggregates: sliceAggregates(a, from, Math.min(n, from + CHUNK)) });
      }
    };
    const lanes = Math.max(1, this.d.pool.options.maxThreads) + 1;
    await Promise.all(Array.from({ length: Math.min(lanes, starts.length) }, lane));
    const out: Scored = { score: new Uint8Array(n), status: [], dimensions: [] };
    let at = 0;
    for (const c of chunks) {
      out.score.set(c.score, at);
      at += c.score.length;
      out.status.push(...c.status);
      out.dimensions.push(...c.dimensions);
    }
    return out;
  }
}

/** The calculation's time, to the second: PostgreSQL and the history (DateTime) then agree. */
function runTime(): Date {
  return new Date(Math.floor(Date.now() / 1000) * 1000);
}
