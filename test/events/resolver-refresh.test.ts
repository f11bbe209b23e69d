import t from '#tap';
import { closeDb, db, seed, waitFor } from '../helpers/stack.js';
import { send } from '../ingest/support.js';
import { ingest, workspace } from './support.js';

// A tenant's cached customers and products are refreshed in the background once they reach their
// age: requests go on being answered from memory meanwhile, not sent to PostgreSQL all at once, and
// a change whose invalidation never came is seen once the refresh lands.
t.teardown(closeDb);
const MAX_AGE_MS = 1500;
const { ws } = await workspace(0);
await seed(ws.tenant_id, 3, ['--products', '1']);
const exts = (
  await db()<{ external_id: string }[]>`
    SELECT external_id FROM customers WHERE tenant_id = ${ws.tenant_id} ORDER BY external_id`
).map((r) => r.external_id);
const proc = await ingest(t, { CUSTOMER_CACHE_MAX_AGE_MS: String(MAX_AGE_MS) });

const login = async (ext: string) => {
  const r = await send(
    proc.url,
    '/v1/ingest/events',
    { events: [{ event_name: 'login', external_customer_id: ext, product_code: 'P0001' }] },
    { key: ws.ingestion_key },
  );
  return r.status === 202 ? (r.body?.errors?.[0]?.code ?? 'accepted') : `status ${r.status}`;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('past its age, the cache answers while PostgreSQL cannot', async (t) => {
  for (const ext of exts) t.equal(await login(ext), 'accepted', `${ext} known`);
  await sleep(MAX_AGE_MS + 300);
  // Customers and products locked: a request that had to read them would wait for the lock.
  let answered: Array<{ code: string; ms: number }> = [];
  await db().begin(async (tx) => {
    await tx`LOCK TABLE customers, products IN ACCESS EXCLUSIVE MODE`;
    const started = Date.now();
    const timeout = sleep(2000).then(() => ({ code: 'no answer within 2 s', ms: 2000 }));
    answered = await Promise.all(
      exts.map((ext) => Promise.race([login(ext).then((code) => ({ code, ms: Date.now() - started })), timeout])),
    );
  });
  for (const [i, a] of answered.entries()) t.equal(a.code, 'accepted', `${exts[i]} answered in ${a.ms} ms`);
});

t.test('a change without an invalidation is seen once the refresh lands', async (t) => {
  // The refresh the first test held up lands within milliseconds of the lock's release.
  await sleep(300);
  // Changed behind the core API's back: no invalidation is published. One customer deleted, one re-keyed.
  await db()`UPDATE customers SET deleted_at = now() WHERE tenant_id = ${ws.tenant_id} AND external_id = ${exts[0]}`;
  await db()`UPDATE customers SET external_id = 'renamed' WHERE tenant_id = ${ws.tenant_id} AND external_id = ${exts[1]}`;
  t.equal(await login(exts[0]), 'accepted', 'the deleted one still answered from the cache');
  t.equal(await login(exts[1]), 'accepted', 'the re-keyed one too');
  const started = Date.now();
  await waitFor(
    'the changes seen',
    async () =>
      (await login(exts[0])) === 'unknown_external_customer' && (await login(exts[1])) === 'unknown_external_customer',
    3 * MAX_AGE_MS + 2000,
    50,
  );
  t.ok(Date.now() - started <= 2 * MAX_AGE_MS + 1000, `seen after ${Date.now() - started} ms`);
  t.equal(await login('renamed'), 'accepted', 'the re-keyed customer under its new reference');
  t.equal(await login(exts[2]), 'accepted', `${exts[2]} still known`);
});
