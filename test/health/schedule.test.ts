import t from '#tap';
import type { Tier } from '../helpers/stack.js';
import { bootstrap, ch, closeDb, db, seed, waitFor, propertiesText } from '../helpers/stack.js';
import { customerIds } from '../ingest/support.js';
import { daysAgo, ingestTier, processorsTier, sendBilling, sendUsage, stored, storedChanges } from './support.js';

// The hourly recalculation, run with a short interval: new events are picked up without any
// request, a status change is stored once as a health_changed event, and several processors
// instances share the workspaces without ever scoring one twice at once.
t.teardown(closeDb);
const INTERVAL = 3000;

t.test('the scheduled run picks up new events and stores one health_changed per status change', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 2);
  const ids = await customerIds(ws.tenant_id);
  const [c1, c2] = [ids.get('cust-000001')!, ids.get('cust-000002')!];
  const ingest = await ingestTier(t);
  await processorsTier(t, [ws.tenant_id], { HEALTH_RECALC_INTERVAL_MS: String(INTERVAL) });

  const first = await waitFor(
    'the first scheduled scores',
    async () => (await stored(c1)) && (await stored(c2)),
    30_000,
  );
  t.same([first.score, first.status], [29, 'at_risk'], 'no events: usage 0, payment 100');

  const events = Array.from({ length: 26 }, (_, d) =>
    ['u1', 'u2', 'u3'].map((u, k) => ({
      event_name: `feature_${(d + k) % 10}`,
      external_customer_id: 'cust-000001',
      user_id: u,
      timestamp: daysAgo(d),
    })),
  ).flat();
  await sendUsage(ingest, ws, events);
  await sendBilling(ingest, ws, [{ event_type: 'payment_succeeded', customer_id: c1 }]);
  const now = await waitFor(
    'customer 1 healthy after a scheduled run',
    async () => {
      const h = await stored(c1);
      return h?.status === 'healthy' ? h : undefined;
    },
    60_000,
    200,
  );
  t.equal(now.score, 100);
  t.ok(now.calculated_at > first.calculated_at);
  t.equal((await stored(c2))!.status, 'at_risk', 'customer 2 did not move');

  const [outbox] = await db()<Array<{ id: string; properties: any; published_at: Date | null }>>`
    SELECT id::text, properties, published_at FROM event_outbox WHERE customer_id = ${c1}`;
  t.same(outbox.properties, { from_status: 'at_risk', to_status: 'healthy', score: 100, previous_score: 29 });
  const rows = await waitFor(
    'the health_changed event in csp.events',
    async () => {
      const r = await storedChanges(ws.tenant_id, c1);
      return r.length ? r : undefined;
    },
    30_000,
    200,
  );
  t.equal(rows.length, 1, 'one event for one change');
  const [e] = rows;
  t.equal(e.event_id, outbox.id, 'event_id is the outbox id');
  t.equal(e.batch_id, outbox.id);
  t.equal(e.surface, 'system');
  t.same(JSON.parse(propertiesText(e)), outbox.properties);
  t.same(
    Object.fromEntries(e.prop_keys.map((k: string, i: number) => [k, e.prop_values[i]])),
    { from_status: 'at_risk', to_status: 'healthy', score: '100', previous_score: '29' },
    'properties as key/value arrays like ingested events',
  );
  t.equal(
    Number(new Date(`${e.ts.replace(' ', 'T')}Z`)),
    Math.floor(now.calculated_at.getTime() / 1000) * 1000,
    'at calculated_at',
  );
  t.ok((await db()`SELECT 1 FROM event_outbox WHERE id = ${outbox.id} AND published_at IS NOT NULL`).length);

  // Further runs with nothing new change nothing and generate nothing.
  const lease = async () =>
    (
      await db()<Array<{ f: Date }>>`SELECT last_finished_at AS f FROM job_leases
      WHERE job = 'health' AND tenant_id = ${ws.tenant_id}`
    )[0].f;
  const seen = await lease();
  await waitFor('another scheduled run', async () => (await lease()) > seen, 30_000, 200);
  t.equal((await storedChanges(ws.tenant_id)).length, 1, 'still one health_changed');
  const history = await ch<{ score: number }>(
    `SELECT argMax(score, calculated_at) AS score FROM health_history
     WHERE tenant_id = '${ws.tenant_id}' AND customer_id = '${c1}' AND day = today()`,
  );
  t.same(history, [{ score: 100 }], "today's history point is the day's last score");
});

interface Run {
  instance: number;
  tenantId: string;
  start: number;
  end: number;
}

/** "health run finished" lines of a processors tier, as they come. */
function collectRuns(tier: Tier, instance: number, into: Run[]): void {
  let buf = '';
  tier.proc.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    let nl = buf.indexOf('\n');
    for (; nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line.includes('health run finished')) continue;
      const r = JSON.parse(line) as { time: string; tenantId: string; ms: number };
      const end = Date.parse(r.time);
      into.push({ instance, tenantId: r.tenantId, start: end - r.ms, end });
    }
  });
}

t.test('two processors instances share the workspaces and never run one twice at once', async (t) => {
  const workspaces = await Promise.all(Array.from({ length: 6 }, () => bootstrap()));
  await Promise.all(workspaces.map((w) => seed(w.tenant_id, 3)));
  const tenants = workspaces.map((w) => w.tenant_id);
  const runs: Run[] = [];
  const env = { HEALTH_RECALC_INTERVAL_MS: String(INTERVAL), LOG_LEVEL: 'info' };
  const started = Date.now();
  const [a, b] = await Promise.all([processorsTier(t, tenants, env), processorsTier(t, tenants, env)]);
  collectRuns(a, 1, runs);
  collectRuns(b, 2, runs);
  await waitFor(
    'every workspace recalculated twice, by both instances together',
    () =>
      tenants.every((id) => runs.filter((r) => r.tenantId === id).length >= 2) &&
      [1, 2].every((i) => runs.some((r) => r.instance === i)),
    60_000,
    200,
  );
  await Promise.all([a.stop('SIGTERM'), b.stop('SIGTERM')]);
  const elapsed = Date.now() - started;

  for (const tenantId of tenants) {
    const mine = runs.filter((r) => r.tenantId === tenantId).sort((x, y) => x.start - y.start);
    t.ok(mine.length >= 2, `workspace ${tenantId.slice(0, 8)} recalculated ${mine.length} times`);
    t.ok(
      mine.length <= Math.floor(elapsed / INTERVAL) + 1,
      `at most one run per interval: ${mine.length} in ${elapsed} ms`,
    );
    for (let i = 1; i < mine.length; i++)
      t.ok(mine[i].start >= mine[i - 1].end, `runs ${i} and ${i + 1} of one workspace do not overlap`);
    const scored = await db()<Array<{ n: number }>>`
      SELECT count(*)::int AS n FROM customer_health WHERE tenant_id = ${tenantId}`;
    t.equal(scored[0].n, 3, 'every customer scored');
  }
  const by = [1, 2].map((i) => runs.filter((r) => r.instance === i).length);
  t.ok(by[0] > 0 && by[1] > 0, `both instances ran workspaces (${by[0]} and ${by[1]} runs)`);
  const leases = await db()<Array<{ holder: string | null; last_finished_at: Date | null }>>`
    SELECT holder, last_finished_at FROM job_leases WHERE job = 'health' AND tenant_id = ANY(${tenants}::uuid[])`;
  t.equal(leases.length, 6, 'one lease row per workspace');
  t.ok(
    leases.every((l) => l.holder === null && l.last_finished_at),
    'released with the time of the last run',
  );
});
