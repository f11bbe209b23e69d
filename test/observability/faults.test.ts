import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from '#tap';
import { RULE_FILES } from '../../infra/observability/prometheus.js';
import { client, startApi } from '../core-api/_helpers.js';
import { startFakeGoogle } from '../helpers/fakes/google.js';
import { firing, prometheus, query, target } from '../helpers/prometheus.js';
import { startReceiver } from '../helpers/webhook-receiver.js';
import { batch, send, USAGE } from '../ingest/support.js';
import { connect } from '../integrations/sync-support.js';
import { bootstrap, closeDb, privateJetStream, seed, startTier, waitFor } from '../helpers/stack.js';

// The alerts on the live stack, each fault made for real: the processors paused (SIGSTOP) while
// events arrive → EventsNotQueryable, resolved once they resume; a webhook receiver answering 500 →
// WebhookDeliveriesFailing; a provider answering 500 to every sync → IntegrationSyncOverdue,
// resolved by the next sync that succeeds. A real Prometheus scrapes the tiers every second and
// evaluates a copy of the shipped rules whose waits are short (`for` 2 s, freshness over 5 s instead
// of 60 s; the sync interval 1 s): the times measured here plus the shipped waits are the times in
// docs/operations.md. On a JetStream of its own: pausing its processors holds nobody else's events.
t.teardown(closeDb);

/** The shipped rules with short waits, in a folder of the test's own; each change must apply. */
function fastRules(): string[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csp-rules-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const [recordings, alerts] = RULE_FILES.map((f) => fs.readFileSync(f, 'utf8'));
  const changes: Array<[RegExp, string]> = [
    [/\n {8}for: \d+m\n/g, '\n        for: 2s\n'],
    [/consumer=~"clickhouse-writer-\.\+"\}\n {10}\) > 60\n/g, 'consumer=~"clickhouse-writer-.+"}\n          ) > 5\n'],
  ];
  let fast = alerts;
  for (const [re, to] of changes) {
    if (!re.test(fast)) throw new Error(`the shipped alerts.yml no longer has ${re}: update this test`);
    fast = fast.replace(re, to);
  }
  const files = [path.join(dir, 'recordings.yml'), path.join(dir, 'alerts.yml')];
  fs.writeFileSync(files[0], recordings);
  fs.writeFileSync(files[1], fast);
  return files;
}

const nats = await privateJetStream(t);
const google = await startFakeGoogle(t);
const gmail = google.env('gmail');
const rx = await startReceiver(t);
const ws = await bootstrap();
await seed(ws.tenant_id, 1);
const fast = { GAUGES_INTERVAL_MS: '250', ...nats.env };
const [api, ingest, processors] = await Promise.all([
  startApi(t, { ...gmail, ...nats.env }),
  startTier(t, 'ingest', fast),
  startTier(t, 'processors', {
    ...fast,
    ...gmail,
    WEBHOOK_TENANTS: ws.tenant_id,
    WEBHOOK_RETRY_SCHEDULE: '200,200,200,200,200,200,200,200,200,200',
    WEBHOOK_POLL_MS: '50',
    INTEGRATION_TENANTS: ws.tenant_id,
    INTEGRATION_SYNC_INTERVAL_MS: '1000',
    INTEGRATION_SYNC_POLL_MS: '100',
    WRITER_BATCH_MS: '50',
  }),
]);
const prom = await prometheus(
  t,
  { ingest: [target(ingest.url)], processors: [target(processors.url)], 'core-api': [target(api.url)] },
  { ruleFiles: fastRules() },
);
const admin = client(api.url, ws.api_key);
const usage = { consumer: 'clickhouse-writer-usage' };
// Prometheus hands its scrape loops their targets a few seconds after it starts.
await waitFor(
  'the tiers scraped and the freshness rule evaluated',
  async () =>
    (await query(prom.url, 'stream_consumer_oldest_unacked_age_seconds{consumer="clickhouse-writer-usage"}')).length >
    0,
  30_000,
  250,
);
const measured: string[] = [];
t.teardown(() => {
  if (measured.length) t.comment(`measured: ${measured.join('; ')}`);
});

t.test('processors paused: EventsNotQueryable fires while accepted events wait, resolves after resume', async (t) => {
  t.same(await firing(prom.url, 'EventsNotQueryable'), [], 'quiet before');
  processors.proc.kill('SIGSTOP');
  let resumed = false;
  t.teardown(() => resumed || processors.proc.kill('SIGCONT'));
  const res = await send(ingest.url, USAGE, batch(5), { key: ws.ingestion_key });
  t.equal(res.status, 202, 'accepted while the processors are paused');
  const accepted = Date.now();
  const fired = await waitFor(
    'EventsNotQueryable firing',
    async () => (await firing(prom.url, 'EventsNotQueryable', usage)).length > 0,
    40_000,
    100,
  );
  const fireMs = Date.now() - accepted;
  t.ok(fired, `firing ${fireMs} ms after the event was accepted (5 s threshold, for 2 s)`);
  t.ok(fireMs >= 5000, 'not before the oldest event is older than the threshold');
  processors.proc.kill('SIGCONT');
  resumed = true;
  const resumedAt = Date.now();
  await waitFor(
    'EventsNotQueryable resolved',
    async () => (await firing(prom.url, 'EventsNotQueryable')).length === 0,
    40_000,
    100,
  );
  const resolveMs = Date.now() - resumedAt;
  t.pass(`resolved ${resolveMs} ms after the processors resumed`);
  measured.push(`EventsNotQueryable fired after ${fireMs} ms, resolved ${resolveMs} ms after resume`);
});

t.test('a receiver answering 500 and a provider answering 500: the delivery and sync alerts', async (t) => {
  const started = Date.now();
  rx.on('/hook', { status: 500 });
  const sub = await admin.post('/v1/webhook-subscriptions', { url: rx.url('/hook'), events: ['customer.created'] });
  t.equal(sub.status, 201, 'subscribed');
  for (const name of ['Acme', 'Globex', 'Initech']) t.equal((await admin.post('/v1/customers', { name })).status, 201);
  google.fail('/gmail/', { status: 500, body: { error: { code: 500, message: 'backend error' } } }, 100_000);
  await connect(admin, 'gmail');
  const connected = Date.now();

  const [webhookMs, syncMs] = await Promise.all([
    waitFor(
      'WebhookDeliveriesFailing firing',
      async () => (await firing(prom.url, 'WebhookDeliveriesFailing')).length > 0,
      40_000,
      100,
    ).then(() => Date.now() - started),
    waitFor(
      'IntegrationSyncOverdue firing',
      async () => (await firing(prom.url, 'IntegrationSyncOverdue', { connector: 'gmail' })).length > 0,
      40_000,
      100,
    ).then(() => Date.now() - connected),
  ]);
  t.ok(rx.at('/hook').length >= 3, `the receiver got ${rx.at('/hook').length} attempts`);
  t.pass(`WebhookDeliveriesFailing firing ${webhookMs} ms after the first failing webhook event`);
  t.ok(
    syncMs >= 3000,
    `IntegrationSyncOverdue firing ${syncMs} ms after gmail connected (3 intervals of 1 s, for 2 s)`,
  );
  const failed = await query(prom.url, 'sum(integration_syncs_total{connector="gmail", outcome="failed"})');
  t.ok(Number(failed[0]?.value[1]) > 0, 'integration_syncs_total counts the failed syncs');

  // The provider answers again: the next sync succeeds and the alert resolves.
  google.fail('/gmail/', { status: 500 }, 0);
  const healed = Date.now();
  await waitFor(
    'IntegrationSyncOverdue resolved',
    async () => (await firing(prom.url, 'IntegrationSyncOverdue')).length === 0,
    40_000,
    100,
  );
  const syncResolveMs = Date.now() - healed;
  t.pass(`IntegrationSyncOverdue resolved ${syncResolveMs} ms after the provider answered again`);
  measured.push(
    `WebhookDeliveriesFailing fired after ${webhookMs} ms`,
    `IntegrationSyncOverdue fired after ${syncMs} ms, resolved ${syncResolveMs} ms after the provider healed`,
  );
});
