import t from '#tap';
import { client, sharedApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb, db, seed, waitFor } from '../helpers/stack.js';
import { customerIds } from '../ingest/support.js';
import { processorsTier, stored } from './support.js';

// calculated_at is the time of a customer's last calculation, also when a scheduled run finds the
// same score and leaves its stored row alone: GET …/health and the customer detail move with every
// run, a customer in the trash keeps the time of the last run that covered it, and nothing is
// emitted for runs that change nothing.
t.teardown(closeDb);
const INTERVAL = 3000;

interface Lease {
  started: Date;
  finished: Date | null;
}

async function lease(tenantId: string): Promise<Lease | undefined> {
  const [r] = await db()<Lease[]>`
    SELECT last_started_at AS started, last_finished_at AS finished FROM job_leases
    WHERE job = 'health' AND tenant_id = ${tenantId}`;
  return r;
}

/** The first scheduled run that starts after `after` (a whole second later) and finishes. */
function runAfter(tenantId: string, after: number): Promise<Lease> {
  return waitFor(
    `a scheduled run started after ${new Date(after).toISOString()}`,
    async () => {
      const l = await lease(tenantId);
      return l?.finished && l.started.getTime() >= after + 1000 && l.finished > l.started ? l : undefined;
    },
    30_000,
    100,
  );
}

t.test('a scheduled run that finds the same score moves calculated_at everywhere it is shown', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 3);
  const ids = await customerIds(ws.tenant_id);
  const [c1, c2, c3] = ['cust-000001', 'cust-000002', 'cust-000003'].map((e) => ids.get(e)!);
  const api = await sharedApi(t);
  const c = client(api.url, ws.api_key);
  await processorsTier(t, [ws.tenant_id], { HEALTH_RECALC_INTERVAL_MS: String(INTERVAL) });

  const shown = async (id: string) => {
    const [h, d] = await Promise.all([c.get(`/v1/customers/${id}/health`), c.get(`/v1/customers/${id}`)]);
    t.equal(h.status, 200, h.text);
    t.equal(d.status, 200, d.text);
    t.equal(d.body.health?.calculated_at, h.body.calculated_at, 'the customer detail shows the same time');
    t.same([d.body.health?.score, d.body.health?.status], [h.body.score, h.body.status]);
    return { score: h.body.score as number, status: h.body.status as string, at: Date.parse(h.body.calculated_at) };
  };

  const first = await waitFor(
    'the first scheduled scores',
    async () => (await stored(c3)) && (await stored(c1)),
    30_000,
  );
  const firstRun = (await lease(ws.tenant_id))!;
  const before = await shown(c1);
  t.same([before.score, before.status], [first.score, first.status]);

  const run = await runAfter(ws.tenant_id, Math.max(before.at, firstRun.started.getTime()));
  const after = await shown(c1);
  t.same([after.score, after.status], [before.score, before.status], 'nothing new: the same score');
  t.ok(
    after.at > before.at,
    `calculated_at moved: ${new Date(before.at).toISOString()} → ${new Date(after.at).toISOString()}`,
  );
  t.ok(after.at >= Math.floor(run.started.getTime() / 1000) * 1000, 'to the time of the last run');
  t.same(
    (await stored(c1))!.calculated_at,
    first.calculated_at,
    'the unchanged row was not rewritten: the time is the workspace run',
  );
  const events = await db()`SELECT 1 FROM event_outbox WHERE tenant_id = ${ws.tenant_id}`;
  t.equal(events.length, 0, 'no status change, no health_changed');

  // A customer in the trash misses the runs while it is there: restored, it shows the time of its
  // last calculation, not of runs that left it out, until a run covers it again.
  const gone = await c.del(`/v1/customers/${c2}`);
  t.equal(gone.status, 204, gone.text);
  const [{ deleted_at: deletedAt }] = await db()<Array<{ deleted_at: Date }>>`
    SELECT deleted_at FROM customers WHERE id = ${c2}`;
  await runAfter(ws.tenant_id, deletedAt.getTime());
  const missedAt = (await shown(c1)).at;
  t.ok(missedAt > deletedAt.getTime(), 'a run calculated the others while it was in the trash');
  // Restored in a later second than that run's, so that a run after the restore is told apart.
  await waitFor('the next second', () => Date.now() >= missedAt + 1000, 2000, 50);
  const restoredAt = Date.now();
  const back = await c.post(`/v1/customers/${c2}/restore`, {});
  t.equal(back.status, 200, back.text);
  const restored = await shown(c2);
  t.ok(
    restored.at < deletedAt.getTime() || restored.at >= Math.floor(restoredAt / 1000) * 1000,
    `restored: ${new Date(restored.at).toISOString()}, not ${new Date(missedAt).toISOString()}, the run that left it out`,
  );
  await runAfter(ws.tenant_id, restoredAt);
  const covered = await shown(c2);
  t.ok(covered.at >= Math.floor(restoredAt / 1000) * 1000, 'a run after the restore covers it again');
  t.ok((await shown(c1)).at >= covered.at, 'the other customers move with every run');
});
