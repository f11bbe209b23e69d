import { inTenant, type Sql } from '../../lib/pg.js';
import { evaluateUsageDrops } from '../../processors/alerts/alerts.js';
import { ClickHouse } from '../../processors/clickhouse.js';
import { mapLimit } from '../../lib/map-limit.js';
import { DemoClient } from './client.js';
import { generateDemo, type DemoData } from './data.js';
import { findProgress, finishProgress, openProgress } from './progress.js';
import { writeRecords } from './records.js';
import { billingBatches, sendEvents } from './send.js';
import { DEMO_METRICS, DEMO_OBJECTIVE, DEMO_PLAYBOOKS, DEMO_SEGMENTS } from './setup.js';

/**
 * Loads the demo workspace (infra/demo/data.ts) as a customer's systems would fill it: the account
 * records straight into PostgreSQL (records.ts), the events through the ingestion path (send.ts),
 * then health recalculated for every customer, metrics, an objective, segments and playbooks
 * created and run through the core API. The usage_drop check has no endpoint: it runs as the
 * processors run it after a health run.
 *
 * Idempotent, and exact when resumed: a workspace holding the demo's playbooks (made last) has the
 * demo and gets nothing more. Any other workspace gets every step again, each of which adds only
 * what is missing: records are upserted, usage events carry external ids that surface B keeps
 * once, billing batches are counted in the load's progress row (progress.ts), which also keeps the
 * seed and day the load began with, and the setup steps create what they do not find. A load
 * stopped anywhere is finished by the next one with the same events as one that never stopped.
 */

export interface DemoTarget {
  sql: Sql;
  /** ClickHouse of the stack (the usage drop check reads its daily rollup). */
  clickhouseUrl: string;
  apiUrl: string;
  ingestUrl: string;
  tenantId: string;
  /** An admin API key of the workspace (all scopes). */
  apiKey: string;
  /** The workspace's ingestion key (billing events). */
  ingestionKey: string;
  seed: number;
  /** The usage drop thresholds of the processors (ALERTS_USAGE_DROP_*, processors/config.ts). */
  dropRatio: number;
  dropMinWeekly: number;
  /** Progress lines. */
  log?: (line: string) => void;
  now?: number;
  /** Ends the load at the next request (DemoStopped); what was sent is counted for the next load. */
  signal?: AbortSignal;
  /** For tests: stop (DemoStopped) once this many event requests were sent, as a load cut short would. */
  stopAfter?: number;
}

export interface DemoReport {
  tenant_id: string;
  seed: number;
  /** False when the workspace had the demo already and nothing was added. */
  loaded: boolean;
  /** True when this load finished one that had stopped. */
  resumed: boolean;
  /** The day the events lead up to: the day the load began. */
  day: string;
  customers: number;
  contacts: number;
  /** Usage events sent by this load; those a stopped load had stored already are among them. */
  events: number;
  /** Of those, the ones a stopped load had stored already: surface B kept them once. */
  resent_events: number;
  billing_events: number;
  health: { healthy: number; neutral: number; at_risk: number; unscored: number };
  metrics: number;
  segments: number;
  playbooks: Array<{ id: string; name: string; tasks: number }>;
  usage_drop_alerts: number;
  /** What the start tour shows: the largest at-risk account, and a playbook that created tasks. */
  tour: { at_risk_customer_id: string; at_risk_customer_name: string; playbook_id: string; playbook_name: string };
  elapsed_ms: number;
}

interface Page<T> {
  data: T[];
  has_more?: boolean;
  next_cursor?: string | null;
}
interface Named {
  id: string;
  name: string;
}

export async function loadDemo(t: DemoTarget): Promise<DemoReport> {
  const t0 = performance.now();
  const log = t.log ?? (() => {});
  const onWait = (what: string, s: number) => log(`${what}: rate limited, waiting ${s} s`);
  const o = { onWait, signal: t.signal };
  const api = new DemoClient(t.apiUrl, { header: 'authorization', secret: t.apiKey, ...o });
  const ingest = new DemoClient(t.ingestUrl, { header: 'authorization', secret: t.apiKey, ...o });
  const surfaceA = new DemoClient(t.ingestUrl, { header: 'x-api-key', secret: t.ingestionKey, ...o });

  const existing = await api.get<Page<Named>>('/v1/playbooks?limit=100');
  const done = DEMO_PLAYBOOKS.every((p) => existing.body.data.some((e) => e.name === p.name));
  let data = generateDemo(t.seed, t.now ?? Date.now());
  let resumed = false;
  let sent = { events: 0, duplicates: 0, billing: 0 };
  if (!done) {
    const progress = await openProgress(t.sql, t.tenantId, t.seed, data.today, billingBatches(data));
    if (progress.seed !== t.seed)
      throw new Error(
        `this workspace holds the demo of seed ${progress.seed}, begun on ${progress.today}: ` +
          `load it with --seed ${progress.seed} to finish it`,
      );
    if (progress.today !== data.today) data = generateDemo(progress.seed, Date.parse(progress.today));
    resumed = progress.earlier;
    if (resumed) log(`finishing the demo load begun on ${progress.today}`);
    const ids = await writeRecords(t.sql, t.tenantId, data);
    log(`${data.customers.length} customers, ${data.contacts.length} contacts`);
    const ch = new ClickHouse(t.clickhouseUrl, 'csp', 10_000);
    try {
      sent = await sendEvents({
        sql: t.sql,
        ch,
        ingest,
        surfaceA,
        api,
        tenantId: t.tenantId,
        data,
        ids,
        progress,
        log,
        stopAfter: t.stopAfter,
        signal: t.signal,
      });
      await catalogReady(api, data);
      await recalculate(api, [...ids.values()]);
      log('health recalculated for every customer');
      await usageDrops(t, ch);
    } finally {
      await ch.close();
    }
    const metricIds = await metrics(api);
    await objective(api, ids.get(objectiveCustomer(data))!, metricIds.get(DEMO_OBJECTIVE.metric)!);
    await segments(api);
    await playbooks(api);
    await finishProgress(t.sql, progress);
    log('metrics, objective, segments and playbooks in place');
  }
  // A finished workspace: its day is the one its load began on (workspaces loaded before the row existed have none).
  if (done) data = { ...data, today: (await findProgress(t.sql, t.tenantId))?.today ?? data.today };
  const report = await summary(api, t, data);
  return {
    ...report,
    loaded: !done,
    resumed,
    day: data.today,
    events: sent.events,
    resent_events: sent.duplicates,
    billing_events: sent.billing,
    elapsed_ms: Math.round(performance.now() - t0),
  };
}

/** Metrics can be defined only on names in the event catalog, which the processors fill from the stream. */
async function catalogReady(api: DemoClient, data: DemoData): Promise<void> {
  const names = new Set(data.events.map((e) => e.event_name));
  const deadline = Date.now() + 60_000;
  for (let wait = 100; ; wait = Math.min(wait * 2, 2000)) {
    const r = await api.get<Page<{ event_name: string }>>('/v1/event-catalog?limit=200');
    const known = new Set(r.body.data.map((e) => e.event_name));
    if ([...names].every((n) => known.has(n))) return;
    if (Date.now() > deadline) throw new Error('the event catalog did not list the demo events within 60 s');
    await new Promise((res) => setTimeout(res, wait));
  }
}

async function recalculate(api: DemoClient, customerIds: string[]): Promise<void> {
  await mapLimit(customerIds, 8, (id) => api.post(`/v1/customers/${id}/health/recalculate`, {}));
}

async function usageDrops(t: DemoTarget, ch: ClickHouse): Promise<void> {
  await evaluateUsageDrops(t.sql, ch, t.tenantId, {
    keySpikeFactor: 10,
    keySpikeFloor: 500,
    dropRatio: t.dropRatio,
    dropMinWeekly: t.dropMinWeekly,
  });
}

/** The demo's metrics by slug, created where missing. */
async function metrics(api: DemoClient): Promise<Map<string, string>> {
  const have = await api.get<Page<{ id: string; slug: string }>>('/v1/metrics?limit=100');
  const bySlug = new Map(have.body.data.map((m) => [m.slug, m.id]));
  for (const m of DEMO_METRICS) {
    if (bySlug.has(m.slug)) continue;
    const r = await api.post<{ id: string }>('/v1/metrics', m);
    bySlug.set(m.slug, r.body.id);
  }
  return bySlug;
}

/** The power account that has the objective: the first by external id. */
function objectiveCustomer(data: DemoData): number {
  return data.customers.find((c) => c.profile === 'power')!.index;
}

async function objective(api: DemoClient, customerId: string, metricId: string): Promise<void> {
  const have = await api.get<Page<{ name: string }>>(`/v1/customers/${customerId}/objectives`);
  if (!have.body.data.some((o) => o.name === DEMO_OBJECTIVE.name)) {
    const due = new Date(Date.now() + 60 * 86_400_000).toISOString().slice(0, 10);
    await api.post(`/v1/customers/${customerId}/objectives`, {
      name: DEMO_OBJECTIVE.name,
      metric_id: metricId,
      target_value: DEMO_OBJECTIVE.target_value,
      due_date: due,
    });
  }
  // Its first value now rather than at the next hourly materialization.
  await api.post(`/v1/metrics/${metricId}/materialize`, {});
}

async function segments(api: DemoClient): Promise<void> {
  const have = await api.get<Page<Named>>('/v1/segments?limit=200');
  for (const s of DEMO_SEGMENTS)
    if (!have.body.data.some((e) => e.name.toLowerCase() === s.name.toLowerCase())) await api.post('/v1/segments', s);
}

/** Creates the playbooks and runs each once, so their tasks are there now rather than after the next health run. */
async function playbooks(api: DemoClient): Promise<void> {
  const have = await api.get<Page<Named>>('/v1/playbooks?limit=100');
  for (const p of DEMO_PLAYBOOKS) {
    const id = have.body.data.find((e) => e.name === p.name)?.id ?? (await api.post<Named>('/v1/playbooks', p)).body.id;
    await api.post(`/v1/playbooks/${id}/run`, {});
  }
}

async function summary(
  api: DemoClient,
  t: DemoTarget,
  data: DemoData,
): Promise<
  Omit<DemoReport, 'loaded' | 'resumed' | 'day' | 'events' | 'resent_events' | 'billing_events' | 'elapsed_ms'>
> {
  const portfolio = await api.get<{
    health_distribution: DemoReport['health'];
    top_risks: Array<{ customer_id: string; name: string }>;
  }>('/v1/analytics/portfolio');
  const pbs = (await api.get<Page<Named>>('/v1/playbooks?limit=100')).body.data.filter((p) =>
    DEMO_PLAYBOOKS.some((d) => d.name === p.name),
  );
  const playbookTasks = await mapLimit(pbs, 2, async (p) => ({
    id: p.id,
    name: p.name,
    tasks: (await api.get<Page<unknown>>(`/v1/tasks?playbook_id=${p.id}&limit=200`)).body.data.length,
  }));
  const alerts = await api.get<Page<unknown>>('/v1/alerts?type=usage_drop&status=open,acknowledged&limit=100');
  const metricsPage = await api.get<Page<{ slug: string }>>('/v1/metrics?limit=100');
  const segmentsPage = await api.get<Page<Named>>('/v1/segments?limit=200');
  const contacts = await t.sql<Array<{ n: number }>>`
    SELECT count(*)::int AS n FROM contacts WHERE ${inTenant(t.tenantId)}`;
  const risk = portfolio.body.top_risks[0];
  const shown = playbookTasks.find((p) => p.tasks > 0) ?? playbookTasks[0];
  return {
    tenant_id: t.tenantId,
    seed: t.seed,
    customers: data.customers.length,
    contacts: contacts[0].n,
    health: portfolio.body.health_distribution,
    metrics: metricsPage.body.data.filter((m) => DEMO_METRICS.some((d) => d.slug === m.slug)).length,
    segments: segmentsPage.body.data.filter((s) => DEMO_SEGMENTS.some((d) => d.name === s.name)).length,
    playbooks: playbookTasks,
    usage_drop_alerts: alerts.body.data.length,
    tour: {
      at_risk_customer_id: risk?.customer_id ?? '',
      at_risk_customer_name: risk?.name ?? '',
      playbook_id: shown?.id ?? '',
      playbook_name: shown?.name ?? '',
    },
  };
}
