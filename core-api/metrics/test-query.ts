import { randomUUID } from 'node:crypto';
import { compileMetric } from '../../lib/metrics/compile.js';
import { chTenant, date, str, uuid } from '../../lib/metrics/literal.js';
import type { Sql } from '../../lib/pg.js';
import { RESERVED_EVENT_NAMES } from '../../schemas/events.js';
import Type from '#typebox';
import { MetricCreate, TestQueryBody, TestQueryResult, type MetricDefinition } from '../../schemas/core/metrics.js';
import { compileBody } from '../../schemas/core/validate.js';
import type { ClickHouseReader } from '../clickhouse.js';
import { json, type Ctx, type Reply } from '../http/context.js';
import { fieldErrors, invalid } from '../../lib/problem.js';
import type { Route } from '../http/router.js';
import { checkDefinition, definitionOf } from './definitions.js';
import { liveCustomers } from './repo.js';

/**
 * POST /v1/metrics/test: a definition compiled and run before it is saved, over up to ten named
 * customers or a sample of those with events of the source event in the window. The same compiler
 * and the same SQL as the materializer; values are exact.
 */

const DEFAULT_SAMPLE = 5;
// The definition as POST /v1/metrics takes it, the name optional (nothing is stored).
const TestDefinition = Type.Object(
  { ...MetricCreate.properties, name: Type.Optional(MetricCreate.properties.name) },
  { additionalProperties: false },
);
const validateDefinition = compileBody(TestDefinition);

/**
 * Customers with events of the metric's source event in its period, live ones only, starting at a
 * random customer id: the primary key (tenant_id, customer_id, …) lets ClickHouse jump there and
 * stop after the first few matching customers, so a sample costs milliseconds however large the
 * workspace (ordering the whole workspace by a hash took a second at 100,000 customers). The
 * search wraps around to the ids below the start when too few lie above it.
 */
async function sample(
  sql: Sql,
  ch: ClickHouseReader,
  tenantId: string,
  def: MetricDefinition,
  from: Date,
  size: number,
  timeoutMs: number,
): Promise<string[]> {
  const generated = RESERVED_EVENT_NAMES.has(def.source_event);
  // Rollup rows carry day granularity: a day-early start only widens the pool, never the values.
  const where = generated
    ? `FROM ${ch.database}.events
       WHERE ${chTenant(tenantId)} AND event_name = ${str(def.source_event)} AND toDate(ts) >= ${date(from)}`
    : `FROM ${ch.database}.usage_daily_names
       WHERE ${chTenant(tenantId)} AND event_name = ${str(def.source_event)} AND day >= ${date(from)}`;
  const want = size * 3;
  const start = uuid(randomUUID());
  const pick = async (side: string, limit: number) =>
    (
      await ch.rows<{ customer_id: string }>(
        `SELECT DISTINCT customer_id ${where} AND customer_id ${side} ${start} LIMIT ${limit}`,
        'The event store',
        timeoutMs,
      )
    ).map((r) => r.customer_id);
  const ids = await pick('>=', want);
  if (ids.length < want) ids.push(...(await pick('<', want - ids.length)));
  const live = await liveCustomers(sql, tenantId, ids);
  return ids.filter((id) => live.has(id)).slice(0, size);
}

export function testQueryRoutes(sql: Sql, ch: ClickHouseReader, timeoutMs: number): Route[] {
  async function run(c: Ctx): Promise<Reply> {
    const started = performance.now();
    const tenantId = c.principal.tenantId;
    const body = c.body as { definition: unknown; customer_ids?: string[]; sample_size?: number };
    if (!validateDefinition(body.definition)) throw invalid(fieldErrors(validateDefinition.errors, 'definition'));
    const def = definitionOf(body.definition as MetricDefinition);
    await checkDefinition(sql, tenantId, def, 'definition');
    const now = new Date();
    let ids: string[] | 'all' = 'all';
    let sampled = false;
    if (def.grain === 'customer') {
      if (body.customer_ids) {
        ids = body.customer_ids.map((id) => id.toLowerCase());
        const live = await liveCustomers(sql, tenantId, ids);
        const missing = ids.flatMap((id, i) =>
          live.has(id)
            ? []
            : [{ field: `customer_ids[${i}]`, code: 'not_found', message: `customer ${id} is not in this workspace` }],
        );
        if (missing.length) throw invalid(missing);
      } else {
        const probe = compileMetric(def, { tenantId, customerIds: [], now, database: ch.database });
        ids = await sample(sql, ch, tenantId, def, probe.period.from, body.sample_size ?? DEFAULT_SAMPLE, timeoutMs);
        sampled = true;
      }
    }
    const compiled = compileMetric(def, { tenantId, customerIds: ids, now, database: ch.database });
    const period = { from: compiled.period.from.toISOString(), to: compiled.period.to.toISOString() };
    const rows =
      ids !== 'all' && ids.length === 0
        ? []
        : await ch.rows<{ customer_id: string | null; value: number | null }>(
            compiled.sql,
            'The event store',
            timeoutMs,
          );
    let results: Array<{ customer_id: string | null; value: number | null; period: typeof period }>;
    if (def.grain === 'portfolio') {
      results = [{ customer_id: null, value: rows[0]?.value ?? compiled.empty, period }];
    } else {
      const byId = new Map(rows.map((r) => [r.customer_id, r.value]));
      results = (ids as string[]).map((id) => ({
        customer_id: id,
        value: byId.has(id) ? byId.get(id)! : compiled.empty,
        period,
      }));
    }
    const elapsed_ms = Math.round((performance.now() - started) * 10) / 10;
    c.log.debug({ trace_id: c.traceId, source: compiled.source, elapsed_ms }, 'metric test query');
    return json(200, { results, sampled, elapsed_ms });
  }

  return [
    {
      tag: 'Metrics',
      auth: 'bearer',
      method: 'POST',
      path: '/v1/metrics/test',
      summary: 'Run a metric definition before saving it',
      description: [
        '`definition` is validated as POST /v1/metrics validates a body (errors named `definition.<field>`; a',
        'name is optional). With `customer_ids` (at most 10, customers of the workspace) one result per',
        'customer in that order; without, a sample of `sample_size` (5–10, default 5) customers that have',
        'events of `source_event` in the window (fewer if fewer exist; `sampled: true`). Grain `portfolio`:',
        'one result with `customer_id` null. A customer without matching events gets 0 (count, sum,',
        'distinct_count, exists) or null (avg, max, last_value). Nothing is stored. `elapsed_ms`: time spent',
        'answering. See docs/metrics.md for the exact semantics of each calculation and window.',
      ].join(' '),
      scope: 'metrics:read',
      body: TestQueryBody,
      bodyExample: {
        definition: {
          source_event: 'report_exported',
          calculation: 'sum',
          target_property: 'pages',
          window: { type: 'calendar', unit: 'month' },
          grain: 'customer',
        },
        sample_size: 5,
      },
      handler: run,
      errors: [413, 415, 422],
      responses: { 200: { description: 'The values.', schema: TestQueryResult } },
    },
  ] satisfies Route[];
}
