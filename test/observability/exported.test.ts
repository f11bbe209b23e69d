import fs from 'node:fs';
import path from 'node:path';
import t from '#tap';
import { RULE_FILES } from '../../infra/observability/prometheus.js';
import { ROOT } from '../../infra/stack.js';
import { sharedApi } from '../core-api/_helpers.js';
import { prometheus, target } from '../helpers/prometheus.js';
import { metricNames } from '../helpers/promql.js';
import { alertRules, recordingRules } from '../helpers/rules.js';
import { metric } from '../helpers/observe.js';
import { bootstrap, closeDb, seed, startTier, waitFor } from '../helpers/stack.js';
import { batch, sendFresh, USAGE } from '../ingest/support.js';

// Every metric a rule or a dashboard panel reads is exported by a tier: a real Prometheus scrapes
// the three tiers of the test stack, and each name must be among the series it stored, or (a family
// with no sample yet, such as an error counter by code) among the metric families the targets
// described. A metric renamed in a tier, or a label renamed under a rule's matcher, fails here.
t.teardown(closeDb);
const yaml = RULE_FILES.map((f) => fs.readFileSync(f, 'utf8')).join('\n');
const recorded = new Set(recordingRules(yaml).map((r) => r.name));
const dashboard = JSON.parse(fs.readFileSync(path.join(ROOT, 'infra', 'observability', 'dashboard.json'), 'utf8')) as {
  panels: Array<{ title: string; targets?: Array<{ expr: string }> }>;
};
/** Series Prometheus makes itself: target health and the alerts' state. */
const SYNTHETIC = new Set(['up', 'ALERTS', 'ALERTS_FOR_STATE']);

const exprs = [
  ...[...alertRules(yaml), ...recordingRules(yaml)].map((r) => ({ where: `rule ${r.name}`, expr: r.expr })),
  ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((x) => ({ where: `panel "${p.title}"`, expr: x.expr }))),
];

// Two ingest processes on one port: a scrape reaches one of them and must answer for both.
const [ingest, processors, api] = await Promise.all([
  startTier(t, 'ingest', { GAUGES_INTERVAL_MS: '500', INGEST_PROCESSES: '2' }),
  startTier(t, 'processors', { GAUGES_INTERVAL_MS: '500' }),
  sharedApi(t),
]);
const prom = await prometheus(t, {
  ingest: [target(ingest.url)],
  processors: [target(processors.url)],
  'core-api': [target(api.url)],
});
const get = async <T>(p: string): Promise<T> => ((await (await fetch(`${prom.url}${p}`)).json()) as { data: T }).data;
// Prometheus hands its scrape loops their targets a few seconds after it starts.
await waitFor(
  'every tier scraped',
  async () => {
    const up = await get<{ result: unknown[] }>(`/api/v1/query?query=${encodeURIComponent('up == 1')}`);
    const gauges = await get<string[]>('/api/v1/label/__name__/values');
    return (
      up.result.length === 3 && gauges.includes('schedule_oldest_run_age_seconds') && gauges.includes('stream_messages')
    );
  },
  30_000,
  250,
);
const stored = new Set(await get<string[]>('/api/v1/label/__name__/values'));
const families = new Set(Object.keys(await get<Record<string, unknown>>('/api/v1/metadata')));
const family = (name: string) => name.replace(/_(bucket|count|sum)$/, '');

t.test('the rules and the dashboard read only metrics the tiers export', async (t) => {
  const missing: string[] = [];
  let checked = 0;
  for (const { where, expr } of exprs) {
    for (const name of metricNames(expr)) {
      if (SYNTHETIC.has(name)) continue;
      checked++;
      if (name.includes(':')) {
        if (!recorded.has(name)) missing.push(`${where}: recording rule ${name} is not defined`);
      } else if (!stored.has(name) && !families.has(name) && !families.has(family(name)))
        missing.push(`${where}: ${name}`);
    }
  }
  t.same(missing, [], `metrics no tier exports (${checked} names checked in ${exprs.length} expressions)`);
});

t.test("the labels a rule or panel matches on are labels of the metric's series", async (t) => {
  const wrong: string[] = [];
  for (const { where, expr } of exprs) {
    for (const m of expr.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\{([^}]*)\}/g)) {
      if (!stored.has(m[1]) || SYNTHETIC.has(m[1])) continue;
      const series = await get<Array<Record<string, string>>>(`/api/v1/series?match[]=${encodeURIComponent(m[1])}`);
      const labels = new Set(series.flatMap((s) => Object.keys(s)));
      for (const l of m[2].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)/g))
        if (!labels.has(l[1])) wrong.push(`${where}: ${m[1]} has no label ${l[1]}`);
    }
  }
  t.same(wrong, [], 'label names every matcher uses');
});

t.test('no metric carries a workspace or customer id as a label', async (t) => {
  const series = await get<Array<Record<string, string>>>(
    `/api/v1/series?match[]=${encodeURIComponent('{job=~"ingest|processors|core-api"}')}`,
  );
  const labels = new Set(series.flatMap((s) => Object.keys(s)));
  const forbidden = [...labels].filter((l) => /tenant|workspace|customer|org/i.test(l));
  t.same(forbidden, [], `labels of ${series.length} series`);
  const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
  t.same(
    series.filter((s) => Object.values(s).some((v) => uuid.test(v))),
    [],
    'no label value is an id',
  );
});

t.test('a tier of several processes answers /metrics with the sum of all of them', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 1);
  const n = 20;
  // Each on a connection of its own: the kernel spreads them over both processes.
  for (let i = 0; i < n; i++) t.equal((await sendFresh(ingest.url, USAGE, batch(2), ws.ingestion_key)).status, 202);
  for (let i = 0; i < 4; i++) {
    t.equal(await metric(ingest.url, 'ingest_request_duration_seconds_count', { endpoint: 'usage' }), n, 'requests');
    t.equal(await metric(ingest.url, 'ingest_events_accepted_total'), 2 * n, 'events');
  }
  t.equal(
    (await metric(ingest.url, 'stream_messages', { stream: 'DLQ' })) >= 0,
    true,
    'one process samples the streams',
  );
});
