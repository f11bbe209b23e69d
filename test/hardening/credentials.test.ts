import { createHmac, randomUUID, sign as edSign } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import t, { type Test } from '#tap';
import { closeDb, db } from '../helpers/stack.js';
import { call, isProblem, registerApp, type Res, sharedApi } from '../core-api/_helpers.js';
import { EVENTS, ev, ingest, workspace } from '../events/support.js';
import { send } from '../fuzz/http.js';

// The token endpoint decodes its form and HTTP Basic credentials strictly and answers RFC 6749
// errors; access tokens are verified the same way everywhere: EdDSA, exp, iss and aud required.
t.teardown(closeDb);
const { ws, ids } = await workspace(1);
const api = await sharedApi(t);
const tier = await ingest(t, { JWT_ISSUER: api.url });
const app = await registerApp(api.url, ws.api_key, ['customers:read', 'events:write', 'events:read']);

const token = (body: string | Buffer, headers: Record<string, string> = {}) =>
  call(api.url, 'POST', '/v1/oauth/token', {
    raw: body,
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
  });

/** An RFC 6749 §5.2 error in the token endpoint's shape: problem+json carrying `error`. */
function oauthError(t: Test, r: Res, status: number, error: string): void {
  isProblem(t, r, status, error);
  t.equal(r.body?.error, error, `error is ${error}`);
  t.equal(typeof r.body?.error_description, 'string', 'error_description');
}

t.test('form decoding errors at the token endpoint: 400 invalid_request, never 500', async (t) => {
  const base = `grant_type=authorization_code&code=abc&code_verifier=${'v'.repeat(43)}&client_secret=s`;
  for (const bad of [
    `${base}&client_id=%00`,
    `${base}&client_id=cli%00x`,
    `${base}&client_id=%`,
    `${base}&client_id=%zz`,
    `${base}&client_id=%E0%A4%A`,
    `${base}&client_id=%ff%fe`,
    `${base}&%00=1&client_id=x`,
    `${base}&client_id=a&client_id=b`,
  ])
    oauthError(t, await token(bad), 400, 'invalid_request');
  const rawBytes = Buffer.concat([Buffer.from(`${base}&client_id=`), Buffer.from([0xc3, 0x28, 0xff])]);
  oauthError(t, await token(rawBytes), 400, 'invalid_request');
  // The same decoding serves the sign-in form.
  isProblem(
    t,
    await call(api.url, 'POST', '/v1/oauth/authorize', {
      raw: `client_id=${app.client_id}&email=%00`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    }),
    400,
    'invalid_request',
  );
  isProblem(t, await call(api.url, 'GET', '/v1/oauth/authorize?client_id=%00'), 400, 'validation_failed');
});

t.test('undecodable HTTP Basic credentials: 401 invalid_client with a Basic challenge', async (t) => {
  const form = `grant_type=refresh_token&refresh_token=rt_x`;
  for (const creds of [
    Buffer.from(`${app.client_id}%00:${app.client_secret}`),
    Buffer.from(`${app.client_id}:%`),
    Buffer.from(`%zz:${app.client_secret}`),
    Buffer.from(`${app.client_id}:%ff`),
    Buffer.concat([Buffer.from(`${app.client_id}:`), Buffer.from([0xff, 0xfe])]),
  ]) {
    const r = await token(form, { authorization: `Basic ${creds.toString('base64')}` });
    oauthError(t, r, 401, 'invalid_client');
    t.match(r.headers.get('www-authenticate') ?? '', /^Basic/);
  }
  // Correct credentials get past client authentication (the refresh token itself is unknown).
  const ok = await token(form, {
    authorization: `Basic ${Buffer.from(`${app.client_id}:${app.client_secret}`).toString('base64')}`,
  });
  oauthError(t, ok, 400, 'invalid_grant');
});

t.test('errors raised before the form is read carry RFC 6749 members too', async (t) => {
  const form = Buffer.from(`grant_type=refresh_token&refresh_token=rt_x&client_id=${app.client_id}&client_secret=x`);
  /** The transport's own problem type, with `error` and `error_description` besides. */
  const transport = (r: Res, status: number, type: string) => {
    isProblem(t, r, status, type);
    t.equal(r.body?.error, 'invalid_request', `${type}: error is invalid_request`);
    t.equal(typeof r.body?.error_description, 'string', 'error_description');
  };
  transport(await token(Buffer.concat([form, Buffer.alloc(16 * 1024, '&')])), 413, 'payload_too_large');
  transport(await token(form, { 'content-encoding': 'br' }), 415, 'unsupported_media_type');
  transport(await token(gzipSync(form).subarray(0, 12), { 'content-encoding': 'gzip' }), 415, 'unsupported_media_type');
  // Two Content-Lengths that differ: only a raw socket sends them.
  const a = await send(api.port, {
    method: 'POST',
    path: '/v1/oauth/token',
    headers: [
      ['Content-Type', 'application/x-www-form-urlencoded'],
      ['Content-Length', String(form.length)],
      ['Content-Length', String(form.length + 7)],
    ],
    body: form,
  });
  t.ok(a.ok && a.status === 400, `400 (${a.ok ? a.text : a.detail})`);
  if (a.ok)
    t.match(a.json, { type: /\/errors\/invalid_request$/, error: 'invalid_request', error_description: /Length/ });
  // A gzip form is read like a plain one: the client secret is checked (and wrong).
  oauthError(t, await token(gzipSync(form), { 'content-encoding': 'gzip' }), 401, 'invalid_client');
});

t.test('access tokens need exp, iss and aud, exactly, on the core API, /v1/users/me and surface B', async (t) => {
  const [{ private_pem: key }] = await db()<
    { private_pem: string }[]
  >`SELECT private_pem FROM signing_keys WHERE kid = 'default'`;
  const [{ id: userId }] = await db()<
    { id: string }[]
  >`SELECT id::text FROM users WHERE tenant_id = ${ws.tenant_id} AND role = 'admin' LIMIT 1`;
  const now = Math.floor(Date.now() / 1000);
  const claims = {
    sub: userId,
    tid: ws.tenant_id,
    role: 'admin',
    scope: 'customers:read events:write events:read',
    act: 'user',
    cid: app.client_id,
    fam: randomUUID(),
    jti: randomUUID(),
    iat: now,
  };
  // Signed by hand: a signing library refuses to make most of the tokens below.
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const sign = (payload: Record<string, unknown>, alg: 'EdDSA' | 'HS256' = 'EdDSA') => {
    const data = `${b64({ alg, typ: 'JWT' })}.${b64(payload)}`;
    const sig =
      alg === 'EdDSA' ? edSign(null, Buffer.from(data), key) : createHmac('sha256', 'secret').update(data).digest();
    return `${data}.${sig.toString('base64url')}`;
  };
  const good = { ...claims, exp: now + 600, iss: api.url, aud: `${api.url}/v1` };
  const uses = (tok: string) => [
    call(api.url, 'GET', '/v1/customers', { token: tok }),
    call(api.url, 'GET', '/v1/users/me', { token: tok }),
    call(tier.url, 'POST', EVENTS, { token: tok, body: { events: [ev(ids[0])] } }),
    call(tier.url, 'GET', EVENTS, { token: tok }),
  ];
  const statuses = (await Promise.all(uses(sign(good)))).map((r) => r.status);
  t.same(statuses, [200, 200, 200, 200], 'a complete token is accepted everywhere');

  const { exp: _e, ...noExp } = good;
  const { iss: _i, ...noIss } = good;
  const { aud: _a, ...noAud } = good;
  for (const [what, tok] of [
    ['no exp', sign(noExp)],
    ['no iss', sign(noIss)],
    ['no aud', sign(noAud)],
    ['another issuer', sign({ ...good, iss: 'https://elsewhere.example.com' })],
    ['another audience', sign({ ...good, aud: 'https://elsewhere.example.com/v1' })],
    ['exp not a number', sign({ ...good, exp: String(now + 600) })],
    ['HS256', sign(good, 'HS256')],
  ] as Array<[string, string]>) {
    for (const r of await Promise.all(uses(tok))) {
      t.equal(r.status, 401, `${what}: 401 (${r.text.slice(0, 200)})`);
      t.match(r.body?.type ?? '', /\/errors\/unauthenticated$/, `${what}: unauthenticated`);
    }
  }
  for (const r of await Promise.all(uses(sign({ ...good, exp: now - 10 })))) {
    t.equal(r.status, 401);
    t.match(r.body?.type ?? '', /\/errors\/token_expired$/, 'expired: token_expired as before');
  }
});
