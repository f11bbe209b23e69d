import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from '#tap';
import { generateDemo } from '../../infra/demo/data.js';
import type { DemoReport } from '../../infra/demo/load.js';
import { bootstrap, ch, closeDb, dist, plainNode, profile, startTier, waitFor } from '../helpers/stack.js';

/**
 * `npm run seed -- --demo` into a workspace of its own, through tiers of its own: the demo's usage
 * arrives through the backfill endpoint and is stored, the default health model spreads the
 * customers over the three statuses, the playbooks create tasks, a usage_drop alert is raised; the
 * same seed generates the same data, a second load adds nothing, and a load stopped part-way is
 * finished by the next with the same events as one that never stopped.
 */
const run = promisify(execFile);
t.teardown(closeDb);

const ws = await bootstrap();
const api = await startTier(t, 'core-api', { PUBLIC_BASE_URL: 'http://127.0.0.1' });
const ingest = await startTier(t, 'ingest', { EVENTS_BACKFILLS_PER_MIN: '600' });
await startTier(t, 'processors');

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'demo-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
function credentialsOf(w: typeof ws): string {
  const file = path.join(dir, `${w.tenant_id}.json`);
  fs.writeFileSync(file, JSON.stringify(w), { mode: 0o600 });
  return file;
}
const credentials = credentialsOf(ws);

async function seedDemo(file = credentials, extra: string[] = []): Promise<DemoReport> {
  const args = ['--demo', '--credentials', file, '--seed', '11', '--api', api.url, '--ingest', ingest.url, ...extra];
  const { stdout } = await run(...plainNode([dist('infra/bin/seed.js'), ...args]), {
    env: { ...process.env, STACK_PROFILE: profile.name },
    maxBuffer: 1 << 20,
  });
  return JSON.parse(stdout) as DemoReport;
}

const stored = async (tenant = ws.tenant_id) =>
  Number(
    (
      await ch<{ n: string }>(
        `SELECT count() AS n FROM csp.events WHERE tenant_id = toUUID('${tenant}') AND surface = 'b'`,
      )
    )[0].n,
  );

/** What the workspace holds, by event name and by billing event type and status. */
async function counts(tenant: string): Promise<{ usage: Record<string, number>; billing: Record<string, number> }> {
  const usage = await ch<{ k: string; n: string }>(
    `SELECT event_name AS k, count() AS n FROM csp.events WHERE tenant_id = toUUID('${tenant}') AND surface = 'b' ` +
      'GROUP BY k ORDER BY k',
  );
  const billing = await ch<{ k: string; n: string }>(
    `SELECT concat(event_type, '/', status) AS k, count() AS n FROM csp.billing_events ` +
      `WHERE tenant_id = toUUID('${tenant}') GROUP BY k ORDER BY k`,
  );
  const byKey = (rows: Array<{ k: string; n: string }>) => Object.fromEntries(rows.map((r) => [r.k, Number(r.n)]));
  return { usage: byKey(usage), billing: byKey(billing) };
}

const sumOf = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);

/** The uninterrupted load of the first workspace, which the resumed one is compared with. */
let whole: DemoReport | undefined;

const auth = { authorization: `Bearer ${ws.api_key}` };
const get = async (p: string) => (await fetch(api.url + p, { headers: auth })).json() as Promise<any>;

t.test('the generator: the same seed and day give the same data, another seed other data', async (t) => {
  const day = Date.parse('2026-03-04T10:00:00Z');
  const a = generateDemo(7, day);
  const b = generateDemo(7, day + 3600_000);
  t.same(a, b, 'identical within the day');
  const c = generateDemo(8, day);
  t.not(c.events.length, a.events.length, 'another seed, another count');
  t.equal(a.customers.length, 100);
  t.equal(new Set(a.events.map((e) => e.external_id)).size, a.events.length, 'each event its own external id');
  const names = new Set(a.events.map((e) => e.event_name));
  t.ok(names.size >= 15 && names.size <= 30, `${names.size} event names`);
  const oldest = Math.min(...a.events.map((e) => Date.parse(e.timestamp)));
  t.ok(oldest >= Date.parse('2025-12-04T00:00:00Z'), 'nothing older than 90 days');
  t.ok(
    a.billing.some((e) => e.event_type === 'payment_failed'),
    'some failed payments',
  );
  t.ok(
    a.customers.filter((c) => c.status === 'churned').every((c) => c.history.length >= 2),
    'churn has a history',
  );
});

t.test('seed --demo loads a workspace that looks like a real one', async (t) => {
  const r = await seedDemo();
  whole = r;
  t.equal(r.loaded, true);
  t.equal(r.resumed, false);
  t.equal(r.events, generateDemo(11, Date.now()).events.length, 'the seed decides the events generated');
  t.equal(await stored(), r.events, 'every event stored through the backfill');
  t.ok(r.health.healthy > 0 && r.health.neutral > 0 && r.health.at_risk > 0, `health ${JSON.stringify(r.health)}`);
  t.equal(r.health.unscored, 0, 'every customer scored');
  t.equal(r.metrics, 3);
  t.equal(r.segments, 2);
  t.equal(r.playbooks.length, 2);
  for (const p of r.playbooks) t.ok(p.tasks > 0, `${p.name} created ${p.tasks} tasks`);
  t.ok(r.usage_drop_alerts > 0, `${r.usage_drop_alerts} usage_drop alerts`);
  t.ok(r.contacts >= 100, `${r.contacts} contacts`);
  t.ok(r.elapsed_ms < 60_000, `loaded in ${r.elapsed_ms} ms`);

  const health = await get(`/v1/customers/${r.tour.at_risk_customer_id}/health`);
  t.equal(health.status, 'at_risk', 'the tour customer is at risk');
  t.ok(health.dimensions.length >= 5, 'with its dimensions');
  const catalog = await get('/v1/event-catalog?limit=100');
  t.ok(catalog.data.length >= 15, `${catalog.data.length} names in the event catalog`);
  const churned = await get('/v1/customers?status=churned');
  t.ok(churned.data.length >= 3, 'churned customers');
  const cohorts = await get('/v1/analytics/cohorts');
  t.ok(cohorts.data.length > 3, 'cohorts over past months');
});

t.test('a second load adds nothing', async (t) => {
  const before = { events: await stored(), tasks: (await get('/v1/tasks?limit=200')).data.length };
  const r = await seedDemo();
  t.equal(r.loaded, false);
  t.equal(await stored(), before.events, 'no event added');
  t.equal((await get('/v1/tasks?limit=200')).data.length, before.tasks, 'no task added');
  t.equal(r.playbooks.length, 2);
});

t.test('a load stopped part-way is finished by the next, with the events of one that never stopped', async (t) => {
  const other = await bootstrap();
  const file = credentialsOf(other);
  const stopAt = async (n: number) => {
    const err = await seedDemo(file, ['--stop-after', String(n)]).then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    t.equal(err?.code, 3, `stopped after ${n} requests`);
    t.match(err?.stderr, /seed stopped: the demo load stopped before its end after \d+ event requests/, 'and says so');
  };
  const day = generateDemo(11, Date.now());
  const backfills = Math.ceil(day.events.length / 1000);
  t.ok(day.billing.length > 50, 'billing in more than one batch');

  const billingStored = async () => sumOf((await counts(other.tenant_id)).billing);
  // In the middle of the backfill: five batches of usage, no billing.
  await stopAt(5);
  // 60 s: in the full suite the writers may still be landing the earlier loads of this file and others.
  await waitFor('the five batches stored', async () => (await stored(other.tenant_id)) === 5000, 60_000);
  t.equal(await billingStored(), 0, 'no billing yet');
  // The other backfill batches (the five accepted are not sent again) and the first billing batch.
  await stopAt(backfills - 5 + 1);
  await waitFor('the first billing batch stored', async () => (await billingStored()) === 50, 60_000);
  t.equal(await stored(other.tenant_id), day.events.length, 'the usage, each event once');
  const pbs = (await (
    await fetch(`${api.url}/v1/playbooks?limit=100`, { headers: { authorization: `Bearer ${other.api_key}` } })
  ).json()) as { data: unknown[] };
  t.equal(pbs.data.length, 0, 'a stopped load leaves the demo unfinished');

  const r = await seedDemo(file);
  t.equal(r.loaded, true, 'the next load finishes it');
  t.equal(r.resumed, true, 'and knows it resumed one');
  const want = generateDemo(11, Date.parse(r.day));
  t.equal(r.events, 0, 'no usage batch sent again: the stopped loads recorded each one accepted');
  t.equal(r.resent_events, 0, 'and none found stored twice');
  t.equal(r.billing_events, want.billing.length - 50, 'only the billing batches not sent before');
  const got = await counts(other.tenant_id);
  t.equal(sumOf(got.usage), want.events.length, 'each usage event once');
  t.equal(sumOf(got.billing), want.billing.length, 'each billing event once');
  if (whole?.day === r.day) {
    t.same(got, await counts(ws.tenant_id), 'the same counts as the load that never stopped');
    t.same(r.health, whole.health, 'and the same health');
  }
  t.ok(r.health.healthy > 0 && r.health.at_risk > 0, `health ${JSON.stringify(r.health)}`);
  for (const p of r.playbooks) t.ok(p.tasks > 0, `${p.name} created ${p.tasks} tasks`);

  const again = await seedDemo(file);
  t.equal(again.loaded, false, 'then it is done');
});
