import { createLogger } from '../lib/logger.js';
import { connectPg } from '../lib/pg.js';
import { ClickHouse as ProcessorsClickHouse } from '../processors/clickhouse.js';
import { Evaluator } from '../processors/playbooks/evaluate.js';
import { sampler, type BenchContext } from './context.js';
import type { Usage } from './proc-stats.js';
import { NOBODY, cpuS, processorsEnv, type ScheduledRun, scheduledRun } from './scheduled-job.js';
import { BenchError, say, sleep, startTier } from './tiers.js';
import { generateWorkspace } from './workspace-data.js';

export type PlaybookKind = 'condition' | 'metric_threshold' | 'event';

export interface PlaybooksResult {
  customers: number;
  events: number;
  playbooks: number;
  /** By trigger type. */
  kinds: Record<string, number>;
  generateS: number;
  /** The first scheduled evaluation of the workspace: every matching customer fires (tasks, outbox rows). */
  first: ScheduledRun & { fired?: number; tasks?: number };
  /** The first evaluation's generated events (task_created) relayed to the event stream. */
  relay: { events: number; seconds: number; usage: Usage };
  /** The next one: everything matches as before, nothing fires. */
  steady: ScheduledRun;
  /** Each trigger's bare work, one after another: its ClickHouse read and one count over its predicate. */
  ceiling: { seconds: number; readS: number; sqlS: number; matched: number; usage: Usage; clickhouseCpuS: number };
}

const METRICS = 2;

/** `count` triggers cycling through the kinds asked for, over the data playbooksScenario makes. */
export function benchTriggers(count: number, kinds: PlaybookKind[], metricIds: string[]): object[] {
  const conditions = [
    (i: number) => `health_score < ${20 + i}`,
    (i: number) => `health_status == "at_risk" and arr > ${1000 + i * 100}`,
    (i: number) => `status == "active" and days_to_renewal < ${30 + i}`,
    (i: number) => `health_status in ["neutral", "at_risk"] or arr >= ${90_000 - i * 1000}`,
    (i: number) => `metric.bench_m${i % METRICS} > ${40 + i} and health_score < 70`,
  ];
  return Array.from({ length: count }, (_, i) => {
    const kind = kinds[i % kinds.length];
    if (kind === 'condition') return { type: 'condition', expression: conditions[i % conditions.length](i) };
    if (kind === 'metric_threshold')
      return { type: 'metric_threshold', metric_id: metricIds[i % METRICS], operator: 'gte', value: 50 + i };
    return { type: 'event', event_name: `feature_${i % 15}`, count: 1 + (i % 5), within_days: 7 };
  });
}

/**
 * A workspace of `playbooksCustomers` customers (./workspace-data.ts, with `playbooksEvents`
 * events over 30 days), their health rows, customer fields and two metrics materialized for
 * everyone, and `playbooksCount` enabled playbooks (conditions, metric thresholds, event
 * triggers; a create_task for the owner and a notify each), inserted as the playbook endpoints
 * store them. Then two scheduled evaluations by processors (the first fires for every matching
 * customer, the second finds nothing new) and, as the ceiling, each trigger's bare work.
 */
export async function playbooksScenario(ctx: BenchContext): Promise<PlaybooksResult> {
  const o = ctx.opts;
  const n = o.playbooksCustomers;
  const ws = await generateWorkspace(ctx, { customers: n, events: o.playbooksEvents, name: 'playbooks' });
  const tenant = ws.tenantId;
  const sql = connectPg(ctx.urls.DATABASE_URL, 2);
  try {
    const t0 = performance.now();
    const metricIds = await prepare(ctx, sql, ws);
    const triggers = benchTriggers(o.playbooksCount, o.playbooksKinds as PlaybookKind[], metricIds);
    const ids: string[] = [];
    for (const [i, trigger] of triggers.entries()) {
      const actions = [
        { type: 'create_task', title: `Bench task ${i}`, assignee: 'owner', due_in_days: 3 },
        { type: 'notify', channel: 'slack', target: '#cs' },
      ];
      const reads = (trigger as { type: string }).type === 'condition' ? (i % 5 === 4 ? [metricIds[i % 2]] : []) : [];
      const metric = (trigger as { metric_id?: string }).metric_id;
      const [row] = await sql<Array<{ id: string }>>`
        INSERT INTO playbooks (tenant_id, name, trigger, actions, metric_ids)
        VALUES (${tenant}, ${`Bench ${i}`}, ${JSON.stringify(trigger)}::text::jsonb,
          ${JSON.stringify(actions)}::text::jsonb, ${metric ? [metric] : reads}::uuid[])
        RETURNING id::text`;
      ids.push(row.id);
    }
    const generateS = ws.generateS + Math.round(performance.now() - t0) / 1000;

    const run = () =>
      scheduledRun(ctx, sql, {
        job: 'playbooks',
        tenant,
        env: { HEALTH_ENABLED: 'false', METRICS_TENANTS: NOBODY, PLAYBOOKS_TENANTS: tenant },
        intervalVar: 'PLAYBOOKS_INTERVAL_MS',
        finishedLog: 'playbooks run finished',
      });
    const { finished, ...first } = await run();
    say(`playbooks: first evaluation of ${ids.length} playbooks over ${n} customers in ${first.seconds} s`);
    const relay = await drainOutbox(ctx, sql, tenant);
    say(`playbooks: ${relay.events} generated events relayed in ${relay.seconds} s`);
    const { finished: _f, ...steady } = await run();
    say(`playbooks: steady evaluation in ${steady.seconds} s`);
    const ceiling = await ceilingRun(ctx, tenant, ids);
    say(`playbooks: bare trigger work ${ceiling.seconds} s (ClickHouse ${ceiling.readS} s, SQL ${ceiling.sqlS} s)`);
    const kinds: Record<string, number> = {};
    for (const t of triggers) kinds[(t as { type: string }).type] = (kinds[(t as { type: string }).type] ?? 0) + 1;
    return {
      customers: n,
      events: o.playbooksEvents,
      playbooks: ids.length,
      kinds,
      generateS,
      first: { ...first, fired: finished?.fired as number | undefined, tasks: finished?.tasks as number | undefined },
      relay,
      steady,
      ceiling,
    };
  } finally {
    await sql.end();
  }
}

/**
 * Customer fields (arr, status, renewal date, one owner among ten users), a customer_health row
 * each, and two metrics with a latest value for every customer, all derived from the customer's
 * number so every run builds the same workspace.
 */
async function prepare(
  ctx: BenchContext,
  sql: ReturnType<typeof connectPg>,
  ws: Awaited<ReturnType<typeof generateWorkspace>>,
): Promise<string[]> {
  const tenant = ws.tenantId;
  const n = ctx.opts.playbooksCustomers;
  await sql`
    INSERT INTO users (tenant_id, email, role)
    SELECT ${tenant}, 'owner' || i || '@bench.example', 'csm' FROM generate_series(0, 9) AS i
    ON CONFLICT DO NOTHING`;
  await sql`
    UPDATE customers SET arr = 500 + (hashtext(id::text) & 65535) * 1.5,
      status = (ARRAY['active', 'active', 'active', 'trial', 'paused'])[1 + (hashtext(id::text || 's') & 3)],
      renewal_date = current_date + (hashtext(id::text || 'r') & 255),
      owner_email = CASE WHEN hashtext(id::text || 'o') & 1 = 0
                         THEN 'owner' || (hashtext(id::text || 'u') & 7) || '@bench.example' END
    WHERE tenant_id = ${tenant}`;
  await sql`
    INSERT INTO customer_health (customer_id, tenant_id, score, status, dimensions, calculated_at)
    SELECT id, tenant_id, s, CASE WHEN s >= 70 THEN 'healthy' WHEN s >= 40 THEN 'neutral' ELSE 'at_risk' END,
      '[]'::jsonb, now()
    FROM (SELECT id, tenant_id, (hashtext(id::text || 'h') & 1023) % 101 AS s FROM customers
          WHERE tenant_id = ${tenant}) x
    ON CONFLICT (customer_id) DO NOTHING`;
  const metricIds: string[] = [];
  for (let m = 0; m < METRICS; m++) {
    const [row] = await sql<Array<{ id: string }>>`
      INSERT INTO metrics (tenant_id, slug, name, source_event, calculation, window_def, grain)
      VALUES (${tenant}, ${`bench_m${m}`}, ${`Bench metric ${m}`}, 'feature_0', 'count',
        '{"type": "rolling", "days": 30}'::jsonb, 'customer')
      RETURNING id::text`;
    metricIds.push(row.id);
    await ctx.ch.query(`INSERT INTO csp.metric_values (tenant_id, metric_id, customer_id, period_start, period_end,
        value, computed_at)
      SELECT toUUID('${tenant}'), toUUID('${row.id}'), ${ws.idCh('1 + number')},
        toDateTime(${ws.now - 30 * 86_400}), toDateTime(${ws.now}), toFloat64(cityHash64(number, ${m}) % 100),
        toDateTime(${ws.now})
      FROM numbers(${n})`);
  }
  return metricIds;
}

/**
 * The generated events of the first evaluation relayed to JetStream by a processors instance that
 * runs no scheduled job, so that the next evaluation is timed alone (not beside the relay).
 */
async function drainOutbox(
  ctx: BenchContext,
  sql: ReturnType<typeof connectPg>,
  tenant: string,
): Promise<PlaybooksResult['relay']> {
  const pending = async () =>
    (
      await sql<Array<{ n: number }>>`
        SELECT count(*)::int AS n FROM event_outbox WHERE tenant_id = ${tenant} AND published_at IS NULL`
    )[0].n;
  const events = await pending();
  const off = { HEALTH_ENABLED: 'false', METRICS_TENANTS: NOBODY, PLAYBOOKS_TENANTS: NOBODY };
  const tier = await startTier('processors', 'PROCESSORS_PORT', processorsEnv(ctx, off));
  const s = sampler(ctx, { processors: () => [tier.pid] });
  const t0 = performance.now();
  try {
    const deadline = Date.now() + 30 * 60_000;
    while ((await pending()) > 0) {
      if (Date.now() > deadline) throw new BenchError('playbooks: the outbox did not drain in 30 minutes');
      await sleep(500);
    }
    return { events, seconds: Math.round(performance.now() - t0) / 1000, usage: s.stop() };
  } finally {
    s.stop();
    await tier.stop();
  }
}

/** Each playbook's M alone, one after another, in this process: the work no evaluation can skip. */
async function ceilingRun(ctx: BenchContext, tenant: string, ids: string[]): Promise<PlaybooksResult['ceiling']> {
  const sql = connectPg(ctx.urls.DATABASE_URL, 2);
  const ch = new ProcessorsClickHouse(ctx.urls.CLICKHOUSE_URL, 'csp', 600_000);
  const evaluator = new Evaluator({ sql, ch, log: createLogger('bench-playbooks', 'warn') });
  const s = sampler(ctx, {});
  try {
    let readMs = 0;
    let sqlMs = 0;
    let matched = 0;
    const t0 = performance.now();
    for (const id of ids) {
      const r = await evaluator.bareMatch(tenant, id);
      readMs += r.readMs;
      sqlMs += r.sqlMs;
      matched += r.matched;
    }
    const seconds = Math.round(performance.now() - t0) / 1000;
    const usage = s.stop();
    return {
      seconds,
      readS: readMs / 1000,
      sqlS: sqlMs / 1000,
      matched,
      usage,
      clickhouseCpuS: cpuS(usage, 'clickhouse'),
    };
  } finally {
    s.stop();
    await Promise.all([sql.end(), ch.close()]);
  }
}
