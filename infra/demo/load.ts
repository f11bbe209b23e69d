import type { Sql } from '../../lib/pg.js';
import { evaluateUsageDrops } from '../../processors/alerts/alerts.js';
import { ClickHouse } from '../../processors/clickhouse.js';
import { mapLimit } from '../../lib/map-limit.js';
import { DemoClient } from './client.js';
import { generateDemo, type DemoData } from './data.js';
import { writeRecords } from './records.js';
import { DEMO_METRICS, DEMO_OBJECTIVE, DEMO_PLAYBOOKS, DEMO_SEGMENTS } from './setup.js';

/**
 * Loads the demo workspace (infra/demo/data.ts) through the product, as a customer's systems
 * would: usage events through the backfill endpoint of surface B (90 days, beyond the 30 of
 * POST /v1/events), billing events through surface A, then health recalculated for every customer,
 * metrics, an objective, segments and playbooks created and run through the core API. The
 * usage_drop check has no endpoint: it runs as the processors run it after a health run.
 *
 * Idempotent: a workspace holding the demo's playbooks has the demo (they are made last) and gets
 * nothing more; one whose events are there (a load stopped half-way) gets the steps after them.
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
}

export interface DemoReport {
  tenant_id: string;
  seed: number;
  /** False when the workspace had the demo already and nothing was added. */
  loaded: boolean;
  customers: number;
  contacts: number;
  events: number;
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

const BACKFILL_BATCH = 1000;
const BILLING_BATCH = 50;

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
  const api = new DemoClient(t.apiUrl, { header: 'authorization', secret: t.apiKey, onWait });
  const ingest = new DemoClient(t.ingestUrl, { header: 'authorization', secret: t.apiKey, onWait });
  const surfaceA = new DemoClient(t.ingestUrl, { header: 'x-api-key', secret: t.ingestionKey, onWait });
  const data = generateDemo(t.seed, t.now ?? Date.now());

  const existing = await api.get<Page<Named>>('/v1/playbooks?limit=100');
  const done = DEMO_PLAYBOOKS.every((p) => existing.body.data.some((e) => e.name === p.name));
  let events = 0;
  let billing = 0;
  if (!done) {
    const ids = await writeRecords(t.sql, t.tenantId, data);
    log(`${data.customers.length} customers, ${data.contacts.length} contacts`);
    const since = new Date(Date.parse(data.today) - 91 * 86_400_000).toISOString();
    const seen = await ingest.get<Page<unknown>>(`/v1/events?event_name=login&from=${since}&limit=1`);
    if (seen.body.data.length === 0) {
      events = await backfill(ingest, api, data, ids, log);
      billing = await sendBilling(surfaceA, data, ids);
      log(`${billing} billing events`);
    }
    await catalogReady(api, data);
    await recalculate(api, [...ids.values()]);
    log('health recalculated for every customer');
    await usageDrops(t);
    const metricIds = await metrics(api);
    await objective(api, ids.get(objectiveCustomer(data))!, metricIds.get(DEMO_OBJECTIVE.metric)!);
    await segments(api);
    await playbooks(api);
    log('metrics, objective, segments and playbooks in place');
  }
  const report = await summary(api, t, data);
  return {
    ...report,
    loaded: !done,
    events,
    billing_events: billing,
    elapsed_ms: Math.round(performance.now() - t0),
  };
}

/** 90 days of usage through POST /v1/events/backfill, then waits until every job has stored its events. */
async function backfill(
  ingest: DemoClient,
  api: DemoClient,
  data: DemoData,
  ids: Map<number, string>,
  log: (l: string) => void,
): Promise<number> {
  const batches: DemoData['events'][] = [];
  for (let i = 0; i < data.events.length; i += BACKFILL_BATCH) batches.push(data.events.slice(i, i + BACKFILL_BATCH));
  let accepted = 0;
  const jobs = await mapLimit(batches, 2, async (batch) => {
    const r = await ingest.post<{ job_id: string; accepted: number; rejected: number; errors: unknown[] }>(
      '/v1/events/backfill',
      { events: batch.map(({ customer, ...e }) => ({ customer_id: ids.get(customer)!, ...e })) },
    );
    if (r.body.rejected > 0) throw new Error(`backfill rejected events: ${JSON.stringify(r.body.errors.slice(0, 3))}`);
    accepted += r.body.accepted;
    return r.body.job_id;
  });
  log(`${accepted} usage events sent in ${jobs.length} backfill jobs; waiting until they are stored`);
  // The jobs are stored in order; poll the last ones most, then confirm every one.
  for (const id of jobs.reverse()) await jobDone(api, id);
  return accepted;
}

async function jobDone(client: DemoClient, id: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (let wait = 100; ; wait = Math.min(wait * 2, 2000)) {
    const r = await client.get<{ status: string }>(`/v1/jobs/${id}`);
    if (r.body.status === 'succeeded') return;
    if (r.body.status === 'failed') throw new Error(`backfill job ${id} failed`);
    if (Date.now() > deadline) throw new Error(`backfill job ${id} still ${r.body.status} after 120 s`);
    await new Promise((res) => setTimeout(res, wait));
  }
}

/** This month's invoices through POST /v1/ingest/billing-events (surface A, 50 a request). */
async function sendBilling(surfaceA: DemoClient, data: DemoData, ids: Map<number, string>): Promise<number> {
  let accepted = 0;
  for (let i = 0; i < data.billing.length; i += BILLING_BATCH) {
    const events = data.billing.slice(i, i + BILLING_BATCH).map(({ customer, ...b }) => ({
      customer_id: ids.get(customer)!,
      ...b,
    }));
    const r = await surfaceA.post<{ accepted: number }>('/v1/ingest/billing-events', { events });
    accepted += r.body.accepted;
  }
  return accepted;
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

async function usageDrops(t: DemoTarget): Promise<void> {
  const ch = new ClickHouse(t.clickhouseUrl, 'csp', 10_000);
  try {
    await evaluateUsageDrops(t.sql, ch, t.tenantId, {
      keySpikeFactor: 10,
      keySpikeFloor: 500,
      dropRatio: t.dropRatio,
      dropMinWeekly: t.dropMinWeekly,
    });
  } finally {
    await ch.close();
  }
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
): Promise<Omit<DemoReport, 'loaded' | 'events' | 'billing_events' | 'elapsed_ms'>> {
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
    SELECT count(*)::int AS n FROM contacts WHERE tenant_id = ${t.tenantId}`;
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
