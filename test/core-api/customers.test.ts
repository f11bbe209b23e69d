import t from '#tap';
import { connect } from 'nats';
import { bootstrap, closeDb, db, urls, waitFor } from '../helpers/stack.js';
import { call, client, isProblem, randomUuid, sharedApi } from './_helpers.js';

t.teardown(closeDb);
const api = await sharedApi(t);
const ws = await bootstrap();
const other = await bootstrap();
const c = client(api.url, ws.api_key);
const o = client(api.url, other.api_key);
const future = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);

t.test('create, read, patch with custom_fields merge, external ids', async (t) => {
  const r = await c.post('/v1/customers', {
    name: 'Acme Corp',
    email_domain: 'Acme.com',
    arr: 1200.5,
    owner_email: 'jane@yourco.com',
    status: 'trial',
    renewal_date: future(40),
    custom_fields: { tier: 'gold', seats: 10 },
    external_id: 'cus_1',
    external_source: 'stripe',
  });
  t.equal(r.status, 201);
  t.equal(r.headers.get('location'), `/v1/customers/${r.body.id}`);
  t.match(r.body, {
    name: 'Acme Corp',
    email_domain: 'acme.com',
    arr: 1200.5,
    status: 'trial',
    custom_fields: { tier: 'gold', seats: 10 },
    external_id: 'cus_1',
    external_source: 'stripe',
    tenant_id: ws.tenant_id,
  });
  t.match(r.body.created_at, /^\d{4}-\d{2}-\d{2}T/);
  const def = await c.post('/v1/customers', { name: 'Defaults' });
  t.match(def.body, { status: 'active', external_source: 'internal', custom_fields: {}, arr: null });

  const d = await c.get(`/v1/customers/${r.body.id}`);
  t.equal(d.status, 200);
  t.same(d.body.renewal, { renewal_date: future(40), days_until_renewal: 40, arr: 1200.5 });
  t.equal(d.body.health, null);
  t.same(d.body.pending_tasks, []);

  const p = await c.patch(`/v1/customers/${r.body.id}`, {
    arr: 2000,
    custom_fields: { seats: 12, region: 'emea', tier: null },
  });
  t.equal(p.status, 200);
  t.same(p.body.custom_fields, { seats: 12, region: 'emea' }, 'keys merged, null removes');
  t.equal(p.body.arr, 2000);
  t.equal(p.body.name, 'Acme Corp', 'fields not sent are unchanged');
  isProblem(t, await c.patch(`/v1/customers/${r.body.id}`, {}), 400, 'validation_failed');
  isProblem(
    t,
    await c.patch(`/v1/customers/${r.body.id}`, { renewal_date: '2021-01-01' }),
    422,
    'renewal_date_in_past',
  );
  isProblem(t, await c.patch(`/v1/customers/${r.body.id}`, { arr: -5 }), 400, 'validation_failed');

  const dup = await c.post('/v1/customers', { name: 'Dup', external_id: 'cus_1', external_source: 'stripe' });
  isProblem(t, dup, 409, 'conflict');
  t.equal(
    (await c.post('/v1/customers', { name: 'Other source', external_id: 'cus_1', external_source: 'hubspot' })).status,
    201,
    'each source has its own id space',
  );
  t.equal(
    (await o.post('/v1/customers', { name: 'Other ws', external_id: 'cus_1', external_source: 'stripe' })).status,
    201,
    'each workspace too',
  );
  isProblem(
    t,
    await c.patch(`/v1/customers/${def.body.id}`, { external_id: 'cus_1', external_source: 'stripe' }),
    409,
    'conflict',
  );
});

t.test('idempotent create', async (t) => {
  const body = { name: 'Idem Inc', arr: 10 };
  const key = `idem-${randomUuid()}`;
  const [r1, r2] = await Promise.all([
    c.post('/v1/customers', body, { 'idempotency-key': key }),
    c.post('/v1/customers', body, { 'idempotency-key': key }),
  ]);
  t.equal(r1.status, 201);
  t.equal(r2.status, 201);
  t.equal(r1.body.id, r2.body.id, 'concurrent requests with one key create one customer');
  const r3 = await c.post('/v1/customers', { arr: 10, name: 'Idem Inc' }, { 'idempotency-key': key });
  t.same(r3.body, r1.body, 'replayed (key order does not matter)');
  t.equal(r3.headers.get('idempotent-replayed'), 'true');
  const [{ n }] =
    await db()`SELECT count(*)::int AS n FROM customers WHERE tenant_id = ${ws.tenant_id} AND name = 'Idem Inc'`;
  t.equal(n, 1);
  isProblem(
    t,
    await c.post('/v1/customers', { name: 'Different' }, { 'idempotency-key': key }),
    422,
    'idempotency_key_reused',
  );
  t.equal((await o.post('/v1/customers', body, { 'idempotency-key': key })).status, 201, 'keys are per workspace');
  isProblem(t, await c.post('/v1/customers', body, { 'idempotency-key': 'x'.repeat(256) }), 400, 'validation_failed');
  // After 24 hours the key is free again.
  await db()`UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE tenant_id = ${ws.tenant_id} AND key = ${key}`;
  const r4 = await c.post('/v1/customers', body, { 'idempotency-key': key });
  t.equal(r4.status, 201);
  t.not(r4.body.id, r1.body.id);
});

t.test('list: filters, full-text, cursor pagination over several pages', async (t) => {
  const w = await bootstrap();
  const l = client(api.url, w.api_key);
  const [owner] = await db()`SELECT id::text, email FROM users WHERE tenant_id = ${w.tenant_id}`;
  const made: string[] = [];
  for (let i = 0; i < 25; i++) {
    const r = await l.post('/v1/customers', {
      name: i % 5 === 0 ? `Globex ${i}` : `Initech ${i}`,
      email_domain: i % 2 ? `initech${i}.io` : `globex-${i}.com`,
      arr: (i + 1) * 100,
      status: ['active', 'trial', 'churned', 'paused'][i % 4],
      renewal_date: future(i * 5),
      owner_email: i < 3 ? owner.email : undefined,
      custom_fields: i === 7 ? { segment_id: 'smb' } : {},
    });
    made.push(r.body.id);
  }
  await db()`INSERT INTO customer_health (customer_id, tenant_id, score, status, dimensions, calculated_at)
    VALUES (${made[4]}, ${w.tenant_id}, 20, 'at_risk', '[]', now())`;
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const r: any = await l.get(`/v1/customers?limit=10${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(r.status, 200);
    seen.push(...r.body.data.map((x: any) => x.id));
    t.equal(r.body.has_more, r.body.next_cursor !== null);
    cursor = r.body.next_cursor;
    pages++;
  } while (cursor);
  t.equal(pages, 3);
  t.same(seen, [...made].reverse(), 'newest first, every customer exactly once');
  t.equal((await l.get('/v1/customers')).body.data.length, 25, 'default limit 50');

  const ids = async (q: string) =>
    (await l.get(`/v1/customers?${q}`)).body.data
      .map((x: any) => made.indexOf(x.id))
      .sort((a: number, b: number) => a - b);
  t.same(
    await ids('status=trial,paused'),
    made.map((_, i) => i).filter((i) => i % 4 === 1 || i % 4 === 3),
  );
  t.same(await ids('min_arr=2000&max_arr=2200'), [19, 20, 21]);
  t.same(await ids('renewal_within_days=30'), [0, 1, 2, 3, 4, 5, 6]);
  t.same(
    await ids('q=globex'),
    [0, 5, 10, 15, 20].concat([2, 4, 6, 8, 12, 14, 16, 18, 22, 24]).sort((a, b) => a - b),
    'name or domain',
  );
  t.same(await ids('q=glob'), await ids('q=globex'), 'prefix match');
  t.same(await ids('q=initech13.io'), [13]);
  t.same(await ids(`owner_id=${owner.id}`), [0, 1, 2]);
  t.same(await ids(`owner_id=${randomUuid()}`), []);
  const smb = await l.post('/v1/segments', {
    name: 'SMB',
    rules: [{ field: 'custom_fields.segment_id', op: 'eq', value: 'smb' }],
  });
  t.same(await ids(`segment_id=${smb.body.id}`), [7], 'a segment over a custom field');
  t.same(await ids('health_status=at_risk'), [4]);
  isProblem(t, await l.get('/v1/customers?min_arr=5&max_arr=1'), 400, 'validation_failed');
  t.same((await o.get('/v1/customers?q=initech')).body.data, [], 'never another workspace');
});

t.test('soft delete, trash, restore, hard delete', async (t) => {
  const r = await c.post('/v1/customers', { name: 'Doomed', external_id: 'doomed', external_source: 'crm' });
  const id = r.body.id;
  t.equal((await c.del(`/v1/customers/${id}`)).status, 204);
  isProblem(t, await c.get(`/v1/customers/${id}`), 404, 'not_found');
  isProblem(t, await c.del(`/v1/customers/${id}`), 404, 'not_found');
  isProblem(t, await c.patch(`/v1/customers/${id}`, { name: 'x' }), 404, 'not_found');
  t.notOk((await c.get('/v1/customers?limit=200')).body.data.some((x: any) => x.id === id));
  const trash = await c.get('/v1/customers/trash');
  const item = trash.body.data.find((x: any) => x.id === id);
  t.ok(item?.deleted_at && item?.purge_at, 'in the trash with purge_at');
  isProblem(
    t,
    await c.post('/v1/customers', { name: 'Again', external_id: 'doomed', external_source: 'crm' }),
    409,
    'conflict',
  );
  const back = await c.post(`/v1/customers/${id}/restore`);
  t.equal(back.status, 200);
  t.equal(back.body.id, id);
  t.equal((await c.get(`/v1/customers/${id}`)).status, 200);
  isProblem(t, await c.post(`/v1/customers/${id}/restore`), 404, 'not_found');
  // Older than 30 days: no longer recoverable.
  await c.del(`/v1/customers/${id}`);
  await db()`UPDATE customers SET deleted_at = now() - interval '31 days' WHERE id = ${id}`;
  isProblem(t, await c.post(`/v1/customers/${id}/restore`), 404, 'not_found');
  // Hard delete needs admin:*.
  const k = await c.post('/v1/api-keys', {
    name: 'deleter',
    scopes: ['customers:delete', 'customers:read'],
    role: 'csm',
  });
  const d = client(api.url, k.body.key);
  const h = await c.post('/v1/customers', { name: 'Hard' });
  const denied = await d.del(`/v1/customers/${h.body.id}?hard=true`);
  isProblem(t, denied, 403, 'insufficient_scope');
  t.match(denied.body.detail, 'admin:*');
  isProblem(t, await d.get('/v1/customers/trash'), 403, 'insufficient_scope');
  t.equal((await c.del(`/v1/customers/${h.body.id}?hard=true`)).status, 204);
  const [{ n }] = await db()`SELECT count(*)::int AS n FROM customers WHERE id = ${h.body.id}`;
  t.equal(n, 0, 'removed permanently');
  t.equal((await c.del(`/v1/customers/${id}?hard=true`)).status, 204, 'a soft-deleted customer can be erased');
});

t.test('contacts', async (t) => {
  const cu = await c.post('/v1/customers', { name: 'With contacts' });
  const path = `/v1/customers/${cu.body.id}/contacts`;
  const r = await c.post(path, {
    name: 'Ada',
    email: 'ada@acme.com',
    title: 'CTO',
    is_champion: true,
    whatsapp_number: '+4915112345678',
  });
  t.equal(r.status, 201);
  t.match(r.body, {
    name: 'Ada',
    email: 'ada@acme.com',
    is_champion: true,
    whatsapp_number: '+4915112345678',
    customer_id: cu.body.id,
  });
  const bad = await c.post(path, { name: 'Bob', email: 'not-an-email', whatsapp_number: '015112345678' });
  isProblem(t, bad, 400, 'validation_failed');
  t.same(bad.body.errors.map((e: any) => e.field).sort(), ['email', 'whatsapp_number']);
  t.match(bad.body.errors.find((e: any) => e.field === 'whatsapp_number').message, 'E.164');
  isProblem(t, await c.post(path, { name: 'Ada 2', email: 'ADA@acme.com' }), 409, 'conflict');
  for (let i = 0; i < 3; i++) await c.post(path, { name: `C${i}` });
  const p1 = await c.get(`${path}?limit=2`);
  t.equal(p1.body.data.length, 2);
  t.equal(p1.body.has_more, true);
  const p2 = await c.get(`${path}?limit=2&cursor=${p1.body.next_cursor}`);
  t.equal(p2.body.data.length, 2);
  t.equal(p2.body.has_more, false);
  t.same(
    [...p1.body.data, ...p2.body.data].map((x: any) => x.name),
    ['Ada', 'C0', 'C1', 'C2'],
  );
  isProblem(t, await c.get(`/v1/customers/${randomUuid()}/contacts`), 404, 'not_found');
});

t.test("another workspace's resources answer 404 on every route", async (t) => {
  const cu = await c.post('/v1/customers', { name: 'Private' });
  const id = cu.body.id;
  await c.del(`/v1/customers/${(await c.post('/v1/customers', { name: 'Trashed' })).body.id}`);
  const job = await c.post('/v1/customers/bulk-import', { customers: [{ name: 'x' }] });
  const key = await c.post('/v1/api-keys', { name: 'k', scopes: ['customers:read'] });
  const [user] = await db()`SELECT id::text FROM users WHERE tenant_id = ${ws.tenant_id}`;
  const checks: Array<[string, string, unknown?]> = [
    ['GET', `/v1/customers/${id}`],
    ['PATCH', `/v1/customers/${id}`, { name: 'stolen' }],
    ['DELETE', `/v1/customers/${id}`],
    ['DELETE', `/v1/customers/${id}?hard=true`],
    ['POST', `/v1/customers/${id}/restore`],
    ['GET', `/v1/customers/${id}/contacts`],
    ['POST', `/v1/customers/${id}/contacts`, { name: 'x' }],
    ['GET', `/v1/jobs/${job.body.job_id}`],
    ['PATCH', `/v1/users/${user.id}/role`, { role: 'viewer' }],
    ['DELETE', `/v1/api-keys/${key.body.id}`],
  ];
  for (const [m, p, body] of checks)
    isProblem(t, await call(api.url, m, p, { token: other.api_key, body }), 404, 'not_found');
  t.equal((await c.get(`/v1/customers/${id}`)).body.name, 'Private', 'untouched');
  t.equal((await client(api.url, key.body.key).get('/v1/customers')).status, 200, 'key not revoked');
  t.notOk((await o.get('/v1/customers/trash')).body.data.some((x: any) => x.name === 'Trashed'));
  t.notOk((await o.get('/v1/users')).body.data.some((x: any) => x.id === user.id));
  t.notOk((await o.get('/v1/api-keys')).body.data.some((x: any) => x.id === key.body.id));
});

t.test('every customer change is announced on NATS for the ingest resolver', async (t) => {
  const nc = await connect({ servers: urls.NATS_URL });
  t.teardown(() => nc.close());
  const got: any[] = [];
  // The workspace is shared with the tests above: the bulk import of the 404 test may still be
  // announcing its customer, so only this customer's announcements are compared.
  nc.subscribe(`inv.customers.${ws.tenant_id}`, { callback: (_e, m) => got.push(m.json()) });
  await nc.flush();
  const cu = await c.post('/v1/customers', { name: 'Announced' });
  const mine = () => got.filter((g) => g.ids.includes(cu.body.id));
  await c.patch(`/v1/customers/${cu.body.id}`, { name: 'Renamed' });
  await c.del(`/v1/customers/${cu.body.id}`);
  await c.post(`/v1/customers/${cu.body.id}/restore`);
  await waitFor('4 invalidations', () => mine().length >= 4 || undefined, 1000, 10);
  t.same(
    mine().map((g) => [g.tenant_id, g.ids, g.op]),
    [
      [ws.tenant_id, [cu.body.id], 'created'],
      [ws.tenant_id, [cu.body.id], 'updated'],
      [ws.tenant_id, [cu.body.id], 'deleted'],
      [ws.tenant_id, [cu.body.id], 'restored'],
    ],
  );
});
