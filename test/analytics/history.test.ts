import t from '#tap';
import { client, sharedApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb, db, waitFor } from '../helpers/stack.js';
import { history } from './support.js';

// The customer status history behind the cohorts: every write path of the API records a status
// change (create, PATCH, bulk import, soft delete, restore), and nothing else does.
t.teardown(closeDb);
const api = await sharedApi(t);
const ws = await bootstrap();
const c = client(api.url, ws.api_key);

const states = (rows: Awaited<ReturnType<typeof history>>) => rows.map((r) => [r.status, r.deleted]);

t.test('create, PATCH, soft delete and restore', async (t) => {
  const created = await c.post('/v1/customers', { name: 'Tracked', status: 'trial' });
  t.equal(created.status, 201);
  const id = created.body.id;
  const first = await history(id);
  t.same(states(first), [['trial', false]]);
  t.equal(first[0].changed_at.toISOString(), created.body.created_at, 'the first row is at created_at');

  t.equal((await c.patch(`/v1/customers/${id}`, { name: 'Renamed', arr: 5 })).status, 200);
  t.same(states(await history(id)), [['trial', false]], 'no row when the status does not change');
  t.equal((await c.patch(`/v1/customers/${id}`, { status: 'trial' })).status, 200);
  t.same(states(await history(id)), [['trial', false]], 'nor when it is set to the same value');

  const before = Date.now();
  t.equal((await c.patch(`/v1/customers/${id}`, { status: 'churned' })).status, 200);
  t.equal((await c.del(`/v1/customers/${id}`)).status, 204);
  t.equal((await c.post(`/v1/customers/${id}/restore`)).status, 200);
  t.equal((await c.patch(`/v1/customers/${id}`, { status: 'active' })).status, 200);
  const rows = await history(id);
  t.same(states(rows), [
    ['trial', false],
    ['churned', false],
    ['churned', true],
    ['churned', false],
    ['active', false],
  ]);
  for (const r of rows.slice(1)) t.ok(r.changed_at.getTime() >= before - 1000, 'changes are at the time they happen');

  const [tenant] = await db()<Array<{ n: number }>>`
    SELECT count(*)::int AS n FROM customer_status_history WHERE tenant_id = ${ws.tenant_id} AND customer_id = ${id}`;
  t.equal(tenant.n, 5, 'rows carry the tenant');
  t.equal((await c.del(`/v1/customers/${id}?hard=true`)).status, 204);
  t.same(await history(id), [], 'a permanent delete removes the history');
});

t.test('bulk import: created and updated customers', async (t) => {
  const run = async (customers: unknown[]) => {
    const r = await c.post('/v1/customers/bulk-import', {
      customers,
      mode: 'create_or_update',
      conflict_resolution: 'skip',
    });
    t.equal(r.status, 202, r.text);
    return waitFor(
      'the import job',
      async () => {
        const j = await c.get(`/v1/jobs/${r.body.job_id}`);
        return j.body.status === 'succeeded' ? j.body : undefined;
      },
      30_000,
      100,
    );
  };
  await run([
    { name: 'Imported 1', external_id: 'imp-1', status: 'paused' },
    { name: 'Imported 2', external_id: 'imp-2' },
  ]);
  const [one, two] = await db()<Array<{ id: string }>>`
    SELECT id FROM customers
    WHERE tenant_id = ${ws.tenant_id} AND external_id IN ('imp-1', 'imp-2') ORDER BY external_id`;
  t.same(states(await history(one.id)), [['paused', false]]);
  t.same(states(await history(two.id)), [['active', false]]);
  await run([
    { name: 'Imported 1', external_id: 'imp-1', status: 'churned' },
    { name: 'Imported 2 renamed', external_id: 'imp-2' },
  ]);
  t.same(states(await history(one.id)), [
    ['paused', false],
    ['churned', false],
  ]);
  t.same(states(await history(two.id)), [['active', false]], 'an update that keeps the status adds nothing');
});
