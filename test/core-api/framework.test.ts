import t from '#tap';
import { Validator } from '@seriousme/openapi-schema-validator';
import { bootstrap, closeDb } from '../helpers/stack.js';
import { call, client, isProblem, startApi } from './_helpers.js';

t.teardown(closeDb);
const api = await startApi(t, { API_MAX_BODY_BYTES: '2048' });
const ws = await bootstrap();
const c = client(api.url, ws.api_key);

t.test('health, readiness and metrics', async (t) => {
  t.equal((await call(api.url, 'GET', '/healthz')).status, 200);
  t.equal((await call(api.url, 'GET', '/readyz')).status, 200);
  await c.get('/v1/customers');
  const m = await call(api.url, 'GET', '/metrics');
  t.equal(m.status, 200);
  t.match(m.text, /core_api_request_duration_seconds_bucket\{[^}]*route="\/v1\/customers"/);
});

t.test('unknown route and wrong method', async (t) => {
  const r = await c.get('/v1/nope');
  isProblem(t, r, 404, 'not_found', api.url);
  t.equal(r.body.instance, '/v1/nope');
  const m = await call(api.url, 'PUT', '/v1/customers', { token: ws.api_key });
  isProblem(t, m, 405, 'method_not_allowed');
  t.equal(m.headers.get('allow'), 'GET, POST');
});

t.test('malformed JSON, wrong content type, oversized body, empty body', async (t) => {
  isProblem(
    t,
    await c.raw('POST', '/v1/customers', '{"name": "x",', { 'content-type': 'application/json' }),
    400,
    'malformed_json',
  );
  isProblem(t, await c.raw('POST', '/v1/customers', '', { 'content-type': 'application/json' }), 400, 'malformed_json');
  isProblem(
    t,
    await c.raw('POST', '/v1/customers', Buffer.from([0x7b, 0xff, 0x7d]), { 'content-type': 'application/json' }),
    400,
    'malformed_json',
  );
  isProblem(
    t,
    await c.raw('POST', '/v1/customers', '{"name":"x"}', { 'content-type': 'text/plain' }),
    415,
    'unsupported_media_type',
  );
  isProblem(t, await c.raw('POST', '/v1/customers', '{"name":"x"}', {}), 415, 'unsupported_media_type');
  const big = JSON.stringify({ name: 'x', custom_fields: { blob: 'y'.repeat(5000) } });
  isProblem(
    t,
    await c.raw('POST', '/v1/customers', big, { 'content-type': 'application/json' }),
    413,
    'payload_too_large',
  );
  const ok = await c.raw('POST', '/v1/customers', '{"name":"charset ok"}', {
    'content-type': 'application/json; charset=utf-8',
  });
  t.equal(ok.status, 201);
});

t.test('__proto__ and constructor keys are refused', async (t) => {
  const r = await c.raw('POST', '/v1/customers', '{"name":"x","custom_fields":{"__proto__":{"admin":true}}}', {
    'content-type': 'application/json',
  });
  isProblem(t, r, 400, 'validation_failed');
  t.same(r.body.errors, [
    { field: 'custom_fields.__proto__', code: 'forbidden_key', message: 'The key "__proto__" is not allowed.' },
  ]);
  const r2 = await c.raw('POST', '/v1/customers', '{"name":"x","constructor":{"prototype":1}}', {
    'content-type': 'application/json',
  });
  isProblem(t, r2, 400, 'validation_failed');
});

t.test('wrong types and boundary values give field errors', async (t) => {
  const r = await c.post('/v1/customers', {
    name: 5,
    arr: 0,
    status: 'gone',
    renewal_date: '2026-02-30',
    owner_email: 'nope',
    custom_fields: [],
  });
  isProblem(t, r, 400, 'validation_failed');
  const by = Object.fromEntries(r.body.errors.map((e: any) => [e.field, e.code]));
  t.equal(by.name, 'invalid_type');
  t.equal(by.arr, 'must_be_positive');
  t.equal(by.status, 'invalid_value');
  t.equal(by.renewal_date, 'invalid_date');
  t.equal(by.owner_email, 'invalid_email');
  t.equal(by.custom_fields, 'invalid_type');
  isProblem(t, await c.post('/v1/customers', {}), 400, 'validation_failed');
  isProblem(t, await c.post('/v1/customers', []), 400, 'validation_failed');
  isProblem(t, await c.post('/v1/customers', { name: '' }), 400, 'validation_failed');
  isProblem(t, await c.post('/v1/customers', { name: 'x'.repeat(201) }), 400, 'validation_failed');
  t.equal((await c.post('/v1/customers', { name: 'x'.repeat(200), arr: 0.01 })).status, 201);
  for (const q of [
    'limit=0',
    'limit=201',
    'limit=abc',
    'renewal_within_days=45',
    'status=active,unknown',
    'min_arr=-1',
    'bogus=1',
    'cursor=notacursor',
  ]) {
    const l = await c.get(`/v1/customers?${q}`);
    isProblem(t, l, 400, q.startsWith('cursor') ? 'invalid_cursor' : 'validation_failed');
  }
  t.equal((await c.get('/v1/customers?limit=200')).status, 200);
  t.equal((await c.get('/v1/customers?limit=1')).status, 200);
});

t.test('semantic error: renewal date before today is 422', async (t) => {
  const r = await c.post('/v1/customers', { name: 'Late', renewal_date: '2020-01-01' });
  isProblem(t, r, 422, 'renewal_date_in_past');
  t.equal(r.body.errors[0].field, 'renewal_date');
  const today = new Date().toISOString().slice(0, 10);
  t.equal((await c.post('/v1/customers', { name: 'Today', renewal_date: today })).status, 201);
});

t.test('malformed ids answer 404', async (t) => {
  isProblem(t, await c.get('/v1/customers/not-a-uuid'), 404, 'not_found');
  isProblem(t, await c.get('/v1/jobs/123'), 404, 'not_found');
});

t.test('error type URIs resolve to a description', async (t) => {
  const r = await call(api.url, 'GET', '/errors/insufficient_scope');
  t.equal(r.status, 200);
  t.equal(r.body.status, 403);
});

t.test('OpenAPI document is valid 3.1 and covers every route', async (t) => {
  const r = await call(api.url, 'GET', '/v1/openapi.json');
  t.equal(r.status, 200);
  const doc = r.body;
  t.equal(doc.openapi, '3.1.0');
  const v = new Validator();
  const res = await v.validate(doc);
  t.ok(res.valid, JSON.stringify(res.errors ?? '').slice(0, 2000));
  const ops = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([p, m]) =>
    Object.keys(m).map((k) => `${k.toUpperCase()} ${p}`),
  );
  for (const want of [
    'GET /v1/customers',
    'POST /v1/customers',
    'GET /v1/customers/{id}',
    'PATCH /v1/customers/{id}',
    'DELETE /v1/customers/{id}',
    'POST /v1/customers/{id}/restore',
    'GET /v1/customers/trash',
    'GET /v1/customers/{id}/contacts',
    'POST /v1/customers/{id}/contacts',
    'POST /v1/customers/bulk-import',
    'GET /v1/jobs/{id}',
    'GET /v1/users',
    'GET /v1/users/me',
    'POST /v1/users',
    'PATCH /v1/users/{id}/role',
    'POST /v1/api-keys',
    'GET /v1/api-keys',
    'DELETE /v1/api-keys/{id}',
    'POST /v1/oauth/apps',
    'GET /v1/oauth/apps',
    'GET /v1/oauth/authorize',
    'POST /v1/oauth/token',
    'GET /v1/settings/ingestion-key',
    'POST /v1/settings/ingestion-key',
    'GET /v1/openapi.json',
    'POST /v1/ingest/events',
    'POST /v1/ingest/billing-events',
    'POST /v1/events',
    'POST /v1/events/backfill',
    'GET /v1/events',
  ]) {
    t.ok(ops.includes(want), want);
  }
  t.ok(doc.components.securitySchemes.oauth2.flows.authorizationCode.scopes['customers:read']);
  t.equal(doc.paths['/v1/customers'].get['x-required-scope'], 'customers:read');
  t.ok(doc.components.responses.Problem400.content['application/problem+json'].example.errors);
  // Surface A answers in its own shapes and authenticates with X-API-Key.
  const a = doc.paths['/v1/ingest/events'].post;
  t.same(a.security, [{ ingestionKey: [] }]);
  t.same(doc.components.securitySchemes.ingestionKey, {
    type: 'apiKey',
    in: 'header',
    name: 'X-API-Key',
    description: doc.components.securitySchemes.ingestionKey.description,
  });
  t.same(Object.keys(a.responses).sort(), ['202', '401', '413', '422', '429', '500', '503']);
  t.equal(a.requestBody.content['application/json'].schema.properties.events.maxItems, 100);
  t.equal(doc.paths['/v1/events'].post['x-required-scope'], 'events:write');
  t.equal(doc.paths['/v1/events'].get['x-required-scope'], 'events:read');
});
