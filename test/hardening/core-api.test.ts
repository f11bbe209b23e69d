import t, { type Test } from '#tap';
import { bootstrap, closeDb, db } from '../helpers/stack.js';
import { client, isProblem, type Res, sharedApi } from '../core-api/_helpers.js';

// Input the store cannot hold is refused at validation with a 400 naming the field, never a 500,
// and nothing of the request is stored.
t.teardown(closeDb);
const api = await sharedApi(t);
const ws = await bootstrap();
const c = client(api.url, ws.api_key);
const raw = (method: string, path: string, body: string, headers: Record<string, string> = {}) =>
  c.raw(method, path, body, { 'content-type': 'application/json', ...headers });
const customers = async () =>
  Number((await db()`SELECT count(*)::int AS n FROM customers WHERE tenant_id = ${ws.tenant_id}`)[0].n);

const created = await c.post('/v1/customers', { name: 'Base', custom_fields: { tier: 'gold' } });
if (created.status !== 201) throw new Error(created.text);
const id = created.body.id as string;

/** A 400 validation_failed whose errors[] has `code` at `field`. */
function fieldError(t: Test, r: Res, field: string, code: string, problem = 'validation_failed'): void {
  isProblem(t, r, 400, problem);
  t.ok(
    (r.body?.errors ?? []).some((e: { field: string; code: string }) => e.field === field && e.code === code),
    `errors[] has ${code} at ${field}: ${JSON.stringify(r.body?.errors)?.slice(0, 300)}`,
  );
}

t.test('NUL and unpaired surrogates in any string of a body: 400 invalid_unicode naming the field', async (t) => {
  const before = await customers();
  for (const [body, field] of [
    ['{"name":"a\\u0000b"}', 'name'],
    ['{"name":"a\\ud800b"}', 'name'],
    ['{"name":"ok","custom_fields":{"note":"x\\udfff"}}', 'custom_fields.note'],
    ['{"name":"ok","custom_fields":{"list":[1,{"s":"\\u0000"}]}}', 'custom_fields.list[1].s'],
    ['{"name":"ok","custom_fields":{"\\ud83d":1}}', 'custom_fields.\\ud83d'],
    ['{"name":"ok","email_domain":"a\\u0000.com"}', 'email_domain'],
  ]) {
    fieldError(t, await raw('POST', '/v1/customers', body), field, 'invalid_unicode');
    const key = { 'idempotency-key': `k-${Buffer.from(field).toString('hex')}` };
    fieldError(t, await raw('POST', '/v1/customers', body, key), field, 'invalid_unicode');
  }
  fieldError(t, await raw('PATCH', `/v1/customers/${id}`, '{"name":"x\\u0000"}'), 'name', 'invalid_unicode');
  fieldError(
    t,
    await raw('PATCH', `/v1/customers/${id}`, '{"custom_fields":{"tier":"\\udbff"}}'),
    'custom_fields.tier',
    'invalid_unicode',
  );
  fieldError(t, await raw('POST', `/v1/customers/${id}/contacts`, '{"name":"Jo\\u0000"}'), 'name', 'invalid_unicode');
  fieldError(
    t,
    await raw('POST', `/v1/customers/${id}/contacts`, '{"name":"Jo","title":"\\ud800"}'),
    'title',
    'invalid_unicode',
  );
  t.equal(await customers(), before, 'no customer was created');
  const after = await c.get(`/v1/customers/${id}`);
  t.equal(after.body.name, 'Base', 'the customer is unchanged');
  t.same(after.body.custom_fields, { tier: 'gold' });
  t.same((await c.get(`/v1/customers/${id}/contacts`)).body.data, [], 'no contact was created');
  // Proper pairs and ordinary escapes are ordinary text.
  const ok = await raw('POST', '/v1/customers', '{"name":"Caf\\u00e9 \\ud83d\\ude00"}');
  t.equal(ok.status, 201);
  t.equal(ok.body.name, 'Café 😀');
});

t.test('nesting beyond 32 levels is refused before anything recursive sees it', async (t) => {
  const before = await customers();
  const nest = (n: number) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;
  for (const depth of [40, 5_000, 40_000]) {
    const body = `{"name":"deep","custom_fields":${nest(depth)}}`;
    for (const h of [{}, { 'idempotency-key': `deep-${depth}` }] as Array<Record<string, string>>) {
      const r = await c.raw('POST', '/v1/customers', body, { 'content-type': 'application/json', ...h });
      isProblem(t, r, 400, 'validation_failed');
      t.equal(r.body.errors?.[0]?.code, 'too_deep');
      t.match(r.body.errors?.[0]?.field, /^custom_fields(\.a){31}$/, 'the object at level 33 is named');
    }
    const p = await raw('PATCH', `/v1/customers/${id}`, `{"custom_fields":${nest(depth)}}`);
    isProblem(t, p, 400, 'validation_failed');
    t.equal(p.body.errors?.[0]?.code, 'too_deep');
  }
  // 100,000 levels fit only under the bulk import's larger body cap.
  const bulk = await raw(
    'POST',
    '/v1/customers/bulk-import',
    `{"customers":[{"name":"x","custom_fields":${nest(100_000)}}]}`,
  );
  isProblem(t, bulk, 400, 'validation_failed');
  t.equal(bulk.body.errors?.[0]?.code, 'too_deep');
  t.match(bulk.body.errors?.[0]?.field, /^customers\[0\]\.custom_fields(\.a)+$/);
  const arrays = `{"name":"deep","custom_fields":{"a":${'['.repeat(50_000)}${']'.repeat(50_000)}}}`;
  fieldError(t, await raw('POST', '/v1/customers', arrays), `custom_fields.a${'[0]'.repeat(30)}`, 'too_deep');
  t.equal((await raw('POST', '/v1/customers', `{"name":"at the limit","custom_fields":${nest(31)}}`)).status, 201);
  t.equal(await customers(), before + 1, 'only the request within the limit created a customer');
});

t.test('arr as numeric(16,2) > 0 stores it; keys of custom_fields are not empty', async (t) => {
  const before = await customers();
  for (const arr of ['1e-9', '5e-324', '0.004', '0', '-1'])
    fieldError(t, await raw('POST', '/v1/customers', `{"name":"a","arr":${arr}}`), 'arr', 'must_be_positive');
  // A number a 64-bit float cannot hold as written is refused before any rule of the field reads it.
  for (const arr of ['4.9e-324', '1e-400', '12345678901234567.891'])
    fieldError(t, await raw('POST', '/v1/customers', `{"name":"a","arr":${arr}}`), 'arr', 'invalid_number');
  fieldError(t, await raw('PATCH', `/v1/customers/${id}`, '{"arr":1e-9}'), 'arr', 'must_be_positive');
  for (const arr of ['1e14', '1e300'])
    fieldError(t, await raw('POST', '/v1/customers', `{"name":"a","arr":${arr}}`), 'arr', 'too_large');
  fieldError(
    t,
    await raw('POST', '/v1/customers', '{"name":"a","custom_fields":{"":1}}'),
    'custom_fields',
    'invalid_key',
  );
  fieldError(
    t,
    await raw('PATCH', `/v1/customers/${id}`, '{"custom_fields":{"":null}}'),
    'custom_fields',
    'invalid_key',
  );
  t.equal(await customers(), before, 'nothing was created');
  const smallest = await c.post('/v1/customers', { name: 'cents', arr: 0.005 });
  t.equal(smallest.status, 201);
  t.equal(smallest.body.arr, 0.01, '0.005 is stored as 0.01');
});

t.test('ids PostgreSQL would refuse: 404 in a path, 400 naming the parameter in a query', async (t) => {
  const bad = [
    'urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8',
    '-'.repeat(36),
    'a'.repeat(36),
    `{${id}}`,
    id.replaceAll('-', ''),
  ];
  for (const v of bad) {
    const e = encodeURIComponent(v);
    isProblem(t, await c.get(`/v1/customers/${e}`), 404, 'not_found');
    isProblem(t, await c.patch(`/v1/customers/${e}`, { name: 'x' }), 404, 'not_found');
    isProblem(t, await c.get(`/v1/customers/${e}/contacts`), 404, 'not_found');
    fieldError(t, await c.get(`/v1/customers?owner_id=${e}`), 'owner_id', 'invalid_uuid');
  }
  isProblem(t, await c.get('/v1/customers/%00'), 404, 'not_found');
  fieldError(t, await c.get('/v1/customers?segment_id=a%00b'), 'segment_id', 'invalid_unicode');
  fieldError(t, await c.get('/v1/customers?q=%00'), 'q', 'invalid_unicode');
});

t.test('date-times PostgreSQL would refuse: 400 naming the field', async (t) => {
  for (const v of [
    '2026-02-30T10:00:00Z',
    '2099-01-01T25:61:61Z',
    '2099-01-01T10:00:00+99',
    '2099-01-01T10:00:00+16:00',
    '0000-01-01T00:00:00Z',
  ]) {
    const r = await c.post('/v1/api-keys', { name: 'k', scopes: ['customers:read'], role: 'viewer', expires_at: v });
    fieldError(t, r, 'expires_at', 'invalid_date_time');
  }
  fieldError(
    t,
    await c.post('/v1/customers', { name: 'x', renewal_date: '2099-02-30' }),
    'renewal_date',
    'invalid_date',
  );
  const ok = await c.post('/v1/api-keys', {
    name: 'k',
    scopes: ['customers:read'],
    role: 'viewer',
    expires_at: '2099-01-01T10:00:00+15:59',
  });
  t.equal(ok.status, 201, `the largest offset PostgreSQL takes is accepted (${ok.text.slice(0, 200)})`);
});

t.test('cursors are checked before they reach SQL: 400 invalid_cursor', async (t) => {
  const cursor = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const first = await c.get('/v1/customers?limit=1');
  t.equal(first.status, 200);
  t.ok(first.body.next_cursor, 'a real cursor');
  t.equal((await c.get(`/v1/customers?limit=1&cursor=${first.body.next_cursor}`)).status, 200, 'which works');
  const [ts, realId] = JSON.parse(Buffer.from(first.body.next_cursor, 'base64url').toString()) as [string, string];
  for (const v of [
    ['2026-02-30 10:00:00+00', realId],
    ['2026-05-01 25:61:61+00', realId],
    ['2026-05-01 10:00:00+99', realId],
    [ts, '-'.repeat(36)],
    [ts, 'a'.repeat(36)],
    [ts, `urn:uuid:${realId}`],
    [ts, 5],
    [ts],
    { t: ts, id: realId },
  ]) {
    for (const path of ['/v1/customers', `/v1/customers/trash`, '/v1/users']) {
      const r = await c.get(`${path}?cursor=${cursor(v)}`);
      isProblem(t, r, 400, 'invalid_cursor');
    }
  }
  isProblem(
    t,
    await c.get(`/v1/customers?cursor=${Buffer.from('\u0000').toString('base64url')}`),
    400,
    'invalid_cursor',
  );
});

t.test('an IPv6 zone in an API key allowlist: 400 invalid_cidr naming the entry, nothing stored', async (t) => {
  const keys = async () =>
    Number((await db()`SELECT count(*)::int AS n FROM api_keys WHERE tenant_id = ${ws.tenant_id}`)[0].n);
  const before = await keys();
  for (const entry of ['fe80::1%eth0', 'fe80::1%25eth0', 'fe80::%1/64', '::1%lo/128']) {
    const r = await c.post('/v1/api-keys', {
      name: 'zoned',
      scopes: ['customers:read'],
      ip_allowlist: ['10.0.0.0/8', entry],
    });
    fieldError(t, r, 'ip_allowlist[1]', 'invalid_cidr');
  }
  t.equal(await keys(), before, 'no key created');
  const ok = await c.post('/v1/api-keys', { name: 'plain', scopes: ['customers:read'], ip_allowlist: ['fe80::1'] });
  t.equal(ok.status, 201, 'the same address without a zone is taken');
  t.same(ok.body.ip_allowlist, ['fe80::1/128']);
});
