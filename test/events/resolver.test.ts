import t from '#tap';
import { closeDb, waitFor } from '../helpers/stack.js';
import { client, sharedApi } from '../core-api/_helpers.js';
import { send } from '../ingest/support.js';
import { ev, ingest, postEvents, workspace } from './support.js';

// Customer changes made through the core API reach every ingest process within a second: created,
// re-keyed, soft-deleted, restored and hard-deleted customers.
t.teardown(closeDb);
const { ws } = await workspace(0);
const api = await sharedApi(t);
const procs = await Promise.all([ingest(t), ingest(t)]);
const core = client(api.url, ws.api_key);

/** Both processes pass the check within a second of the change. */
async function seenBy(
  t: { ok: (v: boolean, m: string) => void },
  what: string,
  check: (base: string) => Promise<boolean>,
): Promise<void> {
  const started = Date.now();
  await Promise.all(procs.map((p) => waitFor(`${what} on ${p.url}`, () => check(p.url), 3000, 20)));
  const ms = Date.now() - started;
  t.ok(ms < 1000, `${what}: seen by both processes in ${ms} ms`);
}

const surfaceB = async (base: string, id: string) =>
  (await postEvents(base, ws.api_key, [ev(id)])).body?.errors?.[0]?.code ?? 'accepted';
const surfaceA = async (base: string, ext: string, source = 'internal') => {
  const r = await send(
    base,
    '/v1/ingest/events',
    { events: [{ event_name: 'login', external_customer_id: ext, external_source: source }] },
    { key: ws.ingestion_key },
  );
  return r.body?.errors?.[0]?.code ?? 'accepted';
};

t.test('create, re-key, soft-delete, restore, hard-delete', async (t) => {
  // Warm both caches with misses first: the negative answers must not outlive the change.
  for (const p of procs) t.equal(await surfaceA(p.url, 'ext-1'), 'unknown_external_customer');
  const created = await core.post('/v1/customers', { name: 'Resolver Co', external_id: 'ext-1' });
  t.equal(created.status, 201);
  const id = created.body.id as string;
  await seenBy(
    t,
    'created',
    async (base) => (await surfaceA(base, 'ext-1')) === 'accepted' && (await surfaceB(base, id)) === 'accepted',
  );

  t.equal((await core.patch(`/v1/customers/${id}`, { external_id: 'ext-2' })).status, 200);
  await seenBy(
    t,
    're-keyed (external id)',
    async (base) =>
      (await surfaceA(base, 'ext-1')) === 'unknown_external_customer' && (await surfaceA(base, 'ext-2')) === 'accepted',
  );
  t.equal((await core.patch(`/v1/customers/${id}`, { external_source: 'crm' })).status, 200);
  await seenBy(
    t,
    're-keyed (source)',
    async (base) =>
      (await surfaceA(base, 'ext-2')) === 'unknown_external_customer' &&
      (await surfaceA(base, 'ext-2', 'crm')) === 'accepted',
  );

  t.equal((await core.del(`/v1/customers/${id}`)).status, 204);
  await seenBy(
    t,
    'soft-deleted',
    async (base) =>
      (await surfaceB(base, id)) === 'unknown_customer' &&
      (await surfaceA(base, 'ext-2', 'crm')) === 'unknown_external_customer',
  );

  t.equal((await core.post(`/v1/customers/${id}/restore`)).status, 200);
  await seenBy(t, 'restored', async (base) => (await surfaceB(base, id)) === 'accepted');

  t.equal((await core.del(`/v1/customers/${id}?hard=true`)).status, 204);
  await seenBy(t, 'hard-deleted', async (base) => (await surfaceB(base, id)) === 'unknown_customer');
});

t.test('bulk-imported customers are seen too', async (t) => {
  const r = await core.post('/v1/customers/bulk-import', { customers: [{ name: 'Imported', external_id: 'imp-1' }] });
  t.equal(r.status, 202);
  await waitFor(
    'import done',
    async () => (await core.get(`/v1/jobs/${r.body.job_id}`)).body?.status === 'succeeded',
    20_000,
  );
  await seenBy(t, 'imported', async (base) => (await surfaceA(base, 'imp-1')) === 'accepted');
});
