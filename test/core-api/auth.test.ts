import t from '#tap';
import { bootstrap, closeDb, db, startTier, waitFor } from '../helpers/stack.js';
import { createHash } from 'node:crypto';
import { call, client, isProblem, randomUuid, startApi } from './_helpers.js';

t.teardown(closeDb);
const a = await startApi(t);
const b = await startApi(t);
const ws = await bootstrap();
const admin = client(a.url, ws.api_key);

async function newKey(body: Record<string, unknown>): Promise<{ key: string; id: string }> {
  const r = await admin.post('/v1/api-keys', { name: 'k', ...body });
  if (r.status !== 201) throw new Error(`${r.status} ${r.text}`);
  return r.body;
}

t.test('authentication errors', async (t) => {
  const none = await call(a.url, 'GET', '/v1/customers');
  isProblem(t, none, 401, 'unauthenticated');
  t.match(none.headers.get('www-authenticate'), /^Bearer/);
  isProblem(
    t,
    await call(a.url, 'GET', '/v1/customers', { headers: { authorization: 'Basic abc' } }),
    401,
    'unauthenticated',
  );
  isProblem(
    t,
    await call(a.url, 'GET', '/v1/customers', { headers: { authorization: 'Bearer' } }),
    401,
    'unauthenticated',
  );
  isProblem(
    t,
    await call(a.url, 'GET', '/v1/customers', { token: 'svc_sk_test_' + 'A'.repeat(43) }),
    401,
    'unauthenticated',
  );
  isProblem(t, await call(a.url, 'GET', '/v1/customers', { token: 'svc_sk_bogus' }), 401, 'unauthenticated');
  isProblem(
    t,
    await call(a.url, 'GET', '/v1/customers', { token: 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln' }),
    401,
    'unauthenticated',
  );
  isProblem(t, await call(a.url, 'GET', '/v1/customers', { token: 'random' }), 401, 'unauthenticated');
});

t.test('API keys: created by an admin, shown once, stored hashed', async (t) => {
  const r = await admin.post('/v1/api-keys', {
    name: 'CRM sync',
    scopes: ['customers:read'],
    mode: 'live',
    role: 'csm',
  });
  t.equal(r.status, 201);
  t.match(r.body.key, /^svc_sk_live_[A-Za-z0-9_-]{43}$/);
  t.equal(r.body.last4, r.body.key.slice(-4));
  t.equal(r.body.status, 'active');
  const list = await admin.get('/v1/api-keys');
  t.equal(list.status, 200);
  const listed = list.body.data.find((k: any) => k.id === r.body.id);
  t.ok(listed);
  t.notOk('key' in listed, 'the value is never listed');
  t.notMatch(list.text, r.body.key);
  const [row] = await db()`SELECT encode(key_hash, 'hex') AS h FROM api_keys WHERE id = ${r.body.id}`;
  t.equal(row.h, createHash('sha256').update(r.body.key).digest('hex'), 'stored as SHA-256');
  const me = await client(a.url, r.body.key).get('/v1/users/me');
  t.equal(me.status, 200);
  t.same(
    { kind: me.body.kind, id: me.body.id, role: me.body.role, scopes: me.body.scopes, name: me.body.name },
    { kind: 'api_key', id: r.body.id, role: 'csm', scopes: ['customers:read'], name: 'CRM sync' },
  );
  t.equal((await client(a.url, r.body.key).get('/v1/customers')).status, 200);
  // A csm key cannot manage keys, and a csm key cannot hold admin:*.
  isProblem(
    t,
    await client(a.url, r.body.key).post('/v1/api-keys', { name: 'x', scopes: ['customers:read'] }),
    403,
    'insufficient_scope',
  );
  const bad = await admin.post('/v1/api-keys', { name: 'x', scopes: ['admin:*'], role: 'csm' });
  isProblem(t, bad, 400, 'validation_failed');
  t.equal(bad.body.errors[0].code, 'not_allowed_for_role');
  isProblem(t, await admin.post('/v1/api-keys', { name: 'x', scopes: ['nope:read'] }), 400, 'validation_failed');
  isProblem(t, await admin.post('/v1/api-keys', { name: 'x', scopes: [] }), 400, 'validation_failed');
  isProblem(
    t,
    await admin.post('/v1/api-keys', { name: 'x', scopes: ['customers:read'], expires_at: '2001-01-01T00:00:00Z' }),
    422,
    'unprocessable',
  );
  isProblem(
    t,
    await admin.post('/v1/api-keys', { name: 'x', scopes: ['customers:read'], ip_allowlist: ['10.0.0.0/33'] }),
    400,
    'validation_failed',
  );
});

t.test('revocation is effective at once in every process', async (t) => {
  const k = await newKey({ scopes: ['customers:read'] });
  const onB = client(b.url, k.key);
  t.equal((await onB.get('/v1/customers')).status, 200, 'cached in process B');
  t.equal((await admin.del(`/v1/api-keys/${k.id}`)).status, 204, 'revoked through process A');
  isProblem(t, await onB.get('/v1/customers'), 401, 'token_revoked');
  isProblem(t, await client(a.url, k.key).get('/v1/customers'), 401, 'token_revoked');
  const listed = (await admin.get('/v1/api-keys')).body.data.find((x: any) => x.id === k.id);
  t.equal(listed.status, 'revoked');
  isProblem(t, await admin.del(`/v1/api-keys/${randomUuid()}`), 404, 'not_found');
});

t.test('IP allowlist, IPv4 and IPv6', async (t) => {
  const k = await newKey({ scopes: ['customers:read'], ip_allowlist: ['10.0.0.0/8', '2001:db8::/32'] });
  const c = client(a.url, k.key);
  const r = await c.get('/v1/customers');
  isProblem(t, r, 403, 'ip_not_allowed');
  t.match(r.body.detail, '127.0.0.1');
  t.equal((await c.get('/v1/customers', { 'x-forwarded-for': '10.20.30.40' })).status, 200, 'IPv4 inside');
  t.equal((await c.get('/v1/customers', { 'x-forwarded-for': '2001:db8:1::7' })).status, 200, 'IPv6 inside');
  isProblem(t, await c.get('/v1/customers', { 'x-forwarded-for': '2001:db9::1' }), 403, 'ip_not_allowed');
  isProblem(t, await c.get('/v1/customers', { 'x-forwarded-for': '11.0.0.1' }), 403, 'ip_not_allowed');
  const local = await newKey({ scopes: ['customers:read'], ip_allowlist: ['127.0.0.1', '::1/128'] });
  t.equal((await client(a.url, local.key).get('/v1/customers')).status, 200, 'bare address means /32');
  const listed = (await admin.get('/v1/api-keys')).body.data.find((x: any) => x.id === k.id);
  t.same(listed.ip_allowlist, ['10.0.0.0/8', '2001:db8::/32']);
});

t.test('expiry', async (t) => {
  // Long enough that a busy machine (files run side by side) still answers the first request before it.
  const k = await newKey({ scopes: ['customers:read'], expires_at: new Date(Date.now() + 5000).toISOString() });
  t.equal((await client(a.url, k.key).get('/v1/customers')).status, 200);
  const r = await waitFor(
    'key to expire',
    async () => {
      const x = await client(a.url, k.key).get('/v1/customers');
      return x.status === 401 ? x : undefined;
    },
    20_000,
    200,
  );
  isProblem(t, r, 401, 'token_expired');
});

t.test('every use is in the audit log, written off the request path', async (t) => {
  const k = await newKey({ scopes: ['customers:read'] });
  const r = await client(a.url, k.key).get('/v1/customers?limit=1');
  const trace = r.headers.get('x-trace-id');
  const row = await waitFor('audit row', async () => {
    const [x] =
      await db()`SELECT actor_id::text, actor_kind, trace_id, endpoint, method, status, at FROM credential_audit WHERE trace_id = ${trace}`;
    return x;
  });
  t.same(
    {
      actor_id: row.actor_id,
      actor_kind: row.actor_kind,
      endpoint: row.endpoint,
      method: row.method,
      status: row.status,
    },
    { actor_id: k.id, actor_kind: 'api_key', endpoint: '/v1/customers', method: 'GET', status: 200 },
  );
  t.ok(row.at instanceof Date);
});

t.test('scope denial on every route, naming required and held scopes', async (t) => {
  const doc = (await call(a.url, 'GET', '/v1/openapi.json')).body;
  // Each route is called with a credential holding one scope other than the one it requires.
  const keys = {
    'analytics:read': await newKey({ scopes: ['analytics:read'] }),
    'webhooks:read': await newKey({ scopes: ['webhooks:read'] }),
  };
  let n = 0;
  for (const [path, methods] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
    for (const [method, op] of Object.entries(methods)) {
      const scope = op['x-required-scope'];
      // Ingestion routes are served by the ingest tier; test/events checks their scopes there.
      if (!scope || op.tags?.includes('Ingestion')) continue;
      const held = scope === 'analytics:read' ? 'webhooks:read' : 'analytics:read';
      const r = await call(a.url, method.toUpperCase(), path.replace(/\{\w+\}/g, randomUuid()), {
        token: keys[held].key,
        body: method === 'get' ? undefined : {},
      });
      isProblem(t, r, 403, 'insufficient_scope');
      t.match(r.body.detail, scope, `${method} ${path} names ${scope}`);
      t.match(r.body.detail, held, 'and the held scope');
      n++;
    }
  }
  t.ok(n >= 20, `${n} routes checked`);
});

t.test('admin-only endpoints need the admin role', async (t) => {
  const k = await newKey({ scopes: ['users:read'], role: 'csm' });
  isProblem(t, await client(a.url, k.key).get('/v1/users'), 403, 'insufficient_role');
  const v = await newKey({ scopes: ['customers:read', 'customers:delete'], role: 'viewer' }).catch((e: Error) => e);
  t.ok(v instanceof Error, 'a viewer key cannot hold a write scope');
});

t.test('the bootstrap admin key passes authorization on every route', async (t) => {
  const doc = (await call(a.url, 'GET', '/v1/openapi.json')).body;
  for (const [path, methods] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
    for (const [method, op] of Object.entries(methods)) {
      if (!op['x-required-scope'] && !(op.security ?? []).length) continue;
      if (op.tags?.includes('Ingestion')) continue;
      if (method === 'post' && path === '/v1/settings/ingestion-key') continue;
      const r = await call(a.url, method.toUpperCase(), path.replace(/\{\w+\}/g, randomUuid()), {
        token: ws.api_key,
        body: method === 'get' ? undefined : {},
      });
      t.notOk([401, 403].includes(r.status), `${method} ${path}: ${r.status}`);
    }
  }
});

t.test('ingestion key: last 4 shown, regenerate invalidates the old key at once', async (t) => {
  const ingest = await startTier(t, 'ingest', { INGEST_PROCESSES: '1' });
  const send = (key: string) =>
    call(ingest.url, 'POST', '/v1/ingest/events', {
      body: { events: [{ event_name: 'login', customer_id: randomUuid() }] },
      headers: { 'x-api-key': key },
    });
  t.equal((await send(ws.ingestion_key)).status, 202, 'old key works before');
  const g = await admin.get('/v1/settings/ingestion-key');
  t.equal(g.body.last4, ws.ingestion_key.slice(-4));
  t.notMatch(g.text, ws.ingestion_key);
  const r = await admin.post('/v1/settings/ingestion-key');
  t.equal(r.status, 201);
  t.match(r.body.key, /^sk_live_[0-9a-f]{64}$/);
  t.equal((await admin.get('/v1/settings/ingestion-key')).body.last4, r.body.key.slice(-4));
  const old = await waitFor(
    'old key refused',
    async () => ((await send(ws.ingestion_key)).status === 401 ? true : undefined),
    2000,
    20,
  );
  t.ok(old, 'old key refused by the ingest tier within a second');
  t.equal((await send(r.body.key)).status, 202, 'new key accepted');
});
