import zlib from 'node:zlib';
import t, { type Test } from '#tap';
import { registerApp } from '../core-api/_helpers.js';
import { bootstrap, closeDb, db, freePort, startTier } from '../helpers/stack.js';
import { fieldCount, header, send, type Answer, type Req } from './http.js';
import { KNOWN, knownIssue } from './known.js';
import { apiTier, ingestTier, STALL_MS } from './support.js';

// The smallest failing requests the fuzz suite found, each with the answer the documentation asks
// for. A case whose fix is not in yet still runs, with its assertions marked todo (the reason
// known.ts gives): it turns into plain passes once the fix is in.
t.teardown(closeDb);
const [ws, ingest, api] = await Promise.all([bootstrap(), ingestTier(t), apiTier(t)]);
const app = await registerApp(api.url, ws.api_key, ['customers:read']);
type Extra = { todo?: string };
const todo = (id: string): Extra => {
  const k = KNOWN.find((x) => x.id === id);
  if (!k) throw new Error(`no known issue ${id}`);
  return { todo: k.reason };
};

const bearer: Array<[string, string]> = [['Authorization', `Bearer ${ws.api_key}`]];
const json: Array<[string, string]> = [['Content-Type', 'application/json']];
const form: Array<[string, string]> = [['Content-Type', 'application/x-www-form-urlencoded']];
const key: Array<[string, string]> = [['X-API-Key', ws.ingestion_key]];

/** The three kinds of route: surface A, surface B, the core API. */
const routes = [
  { name: 'surface A', port: () => ingest.port, path: '/v1/ingest/events', auth: key },
  { name: 'surface B', port: () => ingest.port, path: '/v1/events', auth: bearer },
  { name: 'core API', port: () => api.port, path: '/v1/customers', auth: bearer },
];

/** An answer with one of the statuses wanted and X-Trace-Id. */
function refused(t: Test, a: Answer, want: number[], x: Extra = {}): void {
  t.ok(a.ok, `answered (${a.ok ? a.status : `${a.failure}: ${a.detail}`})`, x);
  if (!a.ok) return;
  t.ok(want.includes(a.status), `status ${a.status} is one of ${want.join(', ')}: ${a.text.slice(0, 200)}`, x);
  t.match(header(a, 'x-trace-id') ?? '', /^[0-9a-f-]{36}$/, 'X-Trace-Id', x);
}

const body = Buffer.from('{}');

for (const r of routes) {
  t.test(`${r.name}: Content-Length with Transfer-Encoding is 400, answered`, async (t) => {
    const x = todo('length-with-chunked');
    const a = await send(r.port(), {
      method: 'POST',
      path: r.path,
      headers: [...r.auth, ...json, ['Content-Length', '2'], ['Transfer-Encoding', 'chunked']],
      body,
      chunked: true,
    });
    refused(t, a, [400], x);
  });

  t.test(`${r.name}: a Content-Length that is not a number is 400, answered`, async (t) => {
    const x = todo('length-not-a-number');
    const a = await send(r.port(), {
      method: 'POST',
      path: r.path,
      headers: [...r.auth, ...json, ['Content-Length', '2abc']],
      body,
    });
    refused(t, a, [400], x);
  });

  t.test(`${r.name}: the method "post" in lower case is answered`, async (t) => {
    const x = todo('lower-case-method');
    const a = await send(r.port(), { method: 'post', path: r.path, headers: [...r.auth, ...json], body });
    refused(t, a, [400, 405], x);
  });

  // uWS holds these two until its idle timeout: once per tier is enough, with a short wait.
  if (r.name === 'surface B') continue;
  t.test(`${r.name}: 60 header fields are answered (431)`, async (t) => {
    const x = todo('many-header-fields');
    const many = Array.from({ length: 60 }, (_, i): [string, string] => [`X-H${i}`, 'v']);
    const a = await send(
      r.port(),
      { method: 'POST', path: r.path, headers: [...r.auth, ...json, ...many], body },
      STALL_MS,
    );
    refused(t, a, [400, 431], x);
  });

  t.test(`${r.name}: a control character in the request target is 400, answered`, async (t) => {
    const x = todo('control-character-in-target');
    const a = await send(
      r.port(),
      { method: 'POST', path: `${r.path}?x=a\u0001b`, headers: [...r.auth, ...json], body },
      STALL_MS,
    );
    refused(t, a, [400], x);
  });
}

t.test('48 header fields, Host and Content-Length included, are answered; a 49th is the known limit', async (t) => {
  const fill = (n: number): Array<[string, string]> => Array.from({ length: n }, (_, i) => [`X-H${i}`, 'v']);
  // Host, Authorization, Content-Type and the Content-Length the client adds: 4 besides the fill.
  const at = (n: number): Req => ({
    method: 'POST',
    path: '/v1/customers',
    headers: [...bearer, ...json, ...fill(n - 4)],
    body,
  });
  t.equal(fieldCount(at(48)), 48);
  const a = await send(api.port, at(48));
  refused(t, a, [400]);
  t.equal(knownIssue(at(48), { kind: 'no_answer', message: '' }), undefined, '48 fields are no known issue');
  const b = await send(api.port, at(49), STALL_MS);
  t.notOk(b.ok, 'the 49th field: uWS drops the request unanswered');
  t.equal(knownIssue(at(49), { kind: 'no_answer', message: '' })?.id, 'many-header-fields');
});

t.test('a restore that uWS drops for its Content-Length (2abc) is not carried out', async (t) => {
  const [customer] = await db()<{ id: string }[]>`
    INSERT INTO customers (tenant_id, name, deleted_at) VALUES (${ws.tenant_id}, 'In the trash', now())
    RETURNING id::text`;
  const path = `/v1/customers/${customer.id}/restore`;
  const dropped = await send(api.port, {
    method: 'POST',
    path,
    headers: [...bearer, ['Content-Length', '2abc']],
    body,
  });
  t.notOk(dropped.ok && dropped.status < 300, `no success (${dropped.ok ? dropped.status : dropped.failure})`);
  // Restored by the dropped request, the customer would no longer be in the trash: 404.
  refused(t, await send(api.port, { method: 'POST', path, headers: bearer }), [200]);
});

t.test('a request head of 8 KiB sent in 1 KiB pieces is answered (431)', async (t) => {
  for (const r of [routes[0], routes[2]]) {
    const headers: Array<[string, string]> = [...r.auth, ...json, ['X-Pad', 'a'.repeat(8192)]];
    const a = await send(r.port(), { method: 'POST', path: r.path, headers, body, pieces: 1024 });
    refused(t, a, [400, 431], todo('large-request-head'));
  }
});

t.test('surface B with an Idempotency-Key: an unpaired surrogate in a key costs that event only', async (t) => {
  const [customer] = await db()<{ id: string }[]>`
    INSERT INTO customers (tenant_id, name) VALUES (${ws.tenant_id}, 'Fuzz case') RETURNING id::text`;
  const events = `[{"customer_id":"${customer.id}","event_name":"login","properties":{"\\ud800":1}}]`;
  for (const path of ['/v1/events', '/v1/events/backfill']) {
    const headers: Array<[string, string]> = [...bearer, ...json, ['Idempotency-Key', `case-${path}`]];
    const a = await send(ingest.port, { method: 'POST', path, headers, body: Buffer.from(`{"events":${events}}`) });
    refused(t, a, [200, 202]);
    if (a.ok) t.equal((a.json as { errors?: Array<{ code: string }> }).errors?.[0]?.code, 'invalid_unicode', path);
  }
});

t.test('GET /v1/events while the event store does not answer: 503 with Retry-After', async (t) => {
  // A ClickHouse address nothing listens on: the store is down for this tier only.
  const lonely = await startTier(t, 'ingest', {
    INGEST_PROCESSES: '1',
    CLICKHOUSE_URL: `http://127.0.0.1:${await freePort()}`,
  });
  t.teardown(() => lonely.stop('SIGTERM'));
  const a = await send(lonely.port, { method: 'GET', path: '/v1/events', headers: bearer });
  refused(t, a, [503]);
  if (a.ok) t.match(header(a, 'retry-after') ?? '', /^\d+$/, 'Retry-After');
});

t.test('a number beyond a 64-bit float (1E400) is 400 too_large, not stored as null', async (t) => {
  const a = await send(api.port, {
    method: 'POST',
    path: '/v1/customers',
    headers: [...bearer, ...json],
    body: Buffer.from('{"name":"Huge numbers","custom_fields":{"seats":1E400}}'),
  });
  refused(t, a, [400]);
  if (a.ok) t.match(a.json, { errors: [{ field: 'custom_fields.seats', code: 'too_large' }] });
});

t.test('POST /v1/api-keys: an IPv6 zone in ip_allowlist is 400 validation_failed', async (t) => {
  const b = { name: 'CRM sync', scopes: ['customers:read'], ip_allowlist: ['fe80::1%eth0'] };
  const a = await send(api.port, {
    method: 'POST',
    path: '/v1/api-keys',
    headers: [...bearer, ...json],
    body: Buffer.from(JSON.stringify(b)),
  });
  refused(t, a, [400]);
  if (a.ok) t.match(a.json, { errors: [{ field: 'ip_allowlist[0]' }] }, 'errors[] names ip_allowlist[0]');
});

t.test('bulk import: a body one byte over 8 MiB is answered 413, not reset', async (t) => {
  const big = Buffer.alloc(8 * 1024 * 1024 + 1, ' ');
  big.write('{"customers":[]}');
  const a = await send(api.port, {
    method: 'POST',
    path: '/v1/customers/bulk-import',
    headers: [...bearer, ...json],
    body: big,
  });
  refused(t, a, [413]);
});

/** An RFC 6749 error in a problem document. */
function oauthError(t: Test, a: Answer, status: number, error = 'invalid_request', x: Extra = {}): void {
  refused(t, a, [status], x);
  if (!a.ok) return;
  t.match(header(a, 'content-type') ?? '', /^application\/problem\+json/, 'problem+json', x);
  const b = a.json as Record<string, unknown> | undefined;
  t.equal(b?.error, error, `error is ${error}: ${a.text.slice(0, 300)}`, x);
  t.type(b?.error_description, 'string', 'error_description', x);
}

const tokenForm = Buffer.from(`grant_type=refresh_token&refresh_token=rt_x&client_id=${app.client_id}&client_secret=x`);
const token = (headers: Array<[string, string]>, b: Buffer): Req => ({
  method: 'POST',
  path: '/v1/oauth/token',
  headers: [...form, ...headers],
  body: b,
});

t.test('token endpoint: a form over 16 KiB is 413 with RFC 6749 members', async (t) => {
  oauthError(t, await send(api.port, token([], Buffer.concat([tokenForm, Buffer.alloc(16 * 1024, '&')]))), 413);
});

t.test('token endpoint: Content-Encoding br is 415 with RFC 6749 members', async (t) => {
  oauthError(t, await send(api.port, token([['Content-Encoding', 'br']], tokenForm)), 415);
});

t.test('token endpoint: a gzip body that is not gzip is 415 with RFC 6749 members', async (t) => {
  const broken = zlib.gzipSync(tokenForm).subarray(0, 12);
  oauthError(t, await send(api.port, token([['Content-Encoding', 'gzip']], broken)), 415);
});

t.test('token endpoint: two different Content-Lengths are 400 with RFC 6749 members', async (t) => {
  const headers: Array<[string, string]> = [
    ['Content-Length', String(tokenForm.length)],
    ['Content-Length', String(tokenForm.length + 7)],
  ];
  oauthError(t, await send(api.port, token(headers, tokenForm)), 400);
});

t.test('token endpoint: a gzip form is read like a plain one (a wrong secret is 401 invalid_client)', async (t) => {
  oauthError(
    t,
    await send(api.port, token([['Content-Encoding', 'gzip']], zlib.gzipSync(tokenForm))),
    401,
    'invalid_client',
  );
});

t.test('ingest tier: an unknown path next to surface B is a problem+json 404', async (t) => {
  for (const path of ['/v1/events/', '//v1/events']) {
    const a = await send(ingest.port, { method: 'POST', path, headers: [...bearer, ...json], body });
    refused(t, a, [404]);
    if (a.ok) t.match(header(a, 'content-type') ?? '', /^application\/problem\+json/, `${path}: problem+json`);
  }
});

t.test('metric values with a range before 1970 or past 2106: 200 with the periods it holds', async (t) => {
  await db()`INSERT INTO event_catalog (tenant_id, event_name) VALUES (${ws.tenant_id}, 'login') ON CONFLICT DO NOTHING`;
  const metric = { name: 'Logins', source_event: 'login', calculation: 'count', window: { type: 'rolling', days: 7 } };
  const m = await send(api.port, {
    method: 'POST',
    path: '/v1/metrics',
    headers: [...bearer, ...json],
    body: Buffer.from(JSON.stringify({ ...metric, grain: 'customer' })),
  });
  refused(t, m, [201]);
  const id = m.ok ? (m.json as { id: string }).id : 'none';
  for (const q of ['to=0001-01-01T00:00:00Z', 'from=1969-12-31T23:59:59Z', 'from=2106-02-07T06:28:16Z']) {
    const a = await send(api.port, { method: 'GET', path: `/v1/metrics/${id}/values?${q}`, headers: bearer });
    refused(t, a, [200]);
  }
});

t.test('a metric proposal from 253 emoji: 201 with a well-formed name', async (t) => {
  const a = await send(api.port, {
    method: 'POST',
    path: '/v1/metrics/proposals',
    headers: [...bearer, ...json],
    body: Buffer.from(JSON.stringify({ description: '\u{1F600}'.repeat(253) })),
  });
  refused(t, a, [201]);
  if (a.ok) t.ok((a.json as { proposal: { name: string } }).proposal.name.isWellFormed(), 'no lone surrogate');
});
