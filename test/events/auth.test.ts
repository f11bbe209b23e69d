import t from '#tap';
import { closeDb, waitFor } from '../helpers/stack.js';
import { authorize, client, exchange, refresh, registerApp, startApi } from '../core-api/_helpers.js';
import { call, EVENTS, ev, expect200, ingest, isProblem, postEvents, workspace } from './support.js';

// Surface B takes the core API's bearer credentials: API keys and OAuth access tokens, with
// scopes, revocation, expiry and IP allowlists, and answers auth failures as the core API does.
t.teardown(closeDb);
const { ws, ids } = await workspace(1);
const api = await startApi(t, { ACCESS_TOKEN_TTL_S: '3600' });
// Surface B takes access tokens of one issuer only: this core-api's.
const tier = await ingest(t, { JWT_ISSUER: api.url });
const admin = client(api.url, ws.api_key);
const newKey = async (body: Record<string, unknown>) => {
  const r = await admin.post('/v1/api-keys', { name: 'k', mode: 'test', role: 'admin', ...body });
  if (r.status !== 201) throw new Error(r.text);
  return r.body as { id: string; key: string };
};
const one = [ev(ids[0])];

t.test('missing, malformed and unknown credentials: 401 unauthenticated with a Bearer challenge', async (t) => {
  const none = await call(tier.url, 'POST', EVENTS, { body: { events: one } });
  isProblem(t, none, 401, 'unauthenticated');
  t.equal(none.headers.get('www-authenticate'), 'Bearer');
  isProblem(
    t,
    await call(tier.url, 'POST', EVENTS, { body: { events: one }, headers: { authorization: 'Basic abc' } }),
    401,
    'unauthenticated',
  );
  isProblem(t, await postEvents(tier.url, 'svc_sk_test_' + 'A'.repeat(43), one), 401, 'unauthenticated');
  isProblem(t, await postEvents(tier.url, ws.ingestion_key, one), 401, 'unauthenticated');
});

t.test(
  'an API key needs events:write to post and events:read to query: 403 insufficient_scope names both',
  async (t) => {
    const reader = await newKey({ scopes: ['events:read'] });
    const r = await postEvents(tier.url, reader.key, one);
    isProblem(t, r, 403, 'insufficient_scope');
    t.match(r.body.detail, /events:write.*events:read/);
    const writer = await newKey({ scopes: ['events:write'] });
    expect200(t, await postEvents(tier.url, writer.key, one), 1);
    isProblem(t, await call(tier.url, 'GET', EVENTS, { token: writer.key }), 403, 'insufficient_scope');
    t.equal((await call(tier.url, 'GET', EVENTS, { token: reader.key })).status, 200);
  },
);

t.test('a revoked key gets 401 token_revoked within a second', async (t) => {
  const k = await newKey({ scopes: ['events:write'] });
  expect200(t, await postEvents(tier.url, k.key, one), 1);
  t.equal((await admin.del(`/v1/api-keys/${k.id}`)).status, 204);
  const started = Date.now();
  const r = await waitFor(
    'revocation',
    async () => {
      const x = await postEvents(tier.url, k.key, one);
      return x.status === 401 ? x : undefined;
    },
    5000,
    50,
  );
  t.ok(Date.now() - started < 1000, `seen in ${Date.now() - started} ms`);
  isProblem(t, r, 401, 'token_revoked');
});

t.test('an expired key gets 401 token_expired', async (t) => {
  const expiresAt = Date.now() + 1500;
  const k = await newKey({ scopes: ['events:write'], expires_at: new Date(expiresAt).toISOString() });
  expect200(t, await postEvents(tier.url, k.key, one), 1);
  // The key works until it expires; its first refusal is the expiry.
  const r = await waitFor(
    'the key to be refused',
    async () => {
      const x = await postEvents(tier.url, k.key, one);
      return x.status === 200 ? undefined : x;
    },
    10_000,
    100,
  );
  t.ok(Date.now() >= expiresAt, 'refused only once expires_at has passed');
  isProblem(t, r, 401, 'token_expired');
});

t.test('an IP allowlist is honoured: 403 ip_not_allowed outside it, allowed inside', async (t) => {
  const outside = await newKey({ scopes: ['events:write'], ip_allowlist: ['10.0.0.0/8'] });
  isProblem(t, await postEvents(tier.url, outside.key, one), 403, 'ip_not_allowed');
  const inside = await newKey({ scopes: ['events:write'], ip_allowlist: ['127.0.0.0/8', '::1/128'] });
  expect200(t, await postEvents(tier.url, inside.key, one), 1);
  // Behind the edge (a trusted proxy) the address it forwards is the caller's.
  isProblem(
    t,
    await postEvents(tier.url, inside.key, one, { 'x-forwarded-for': '203.0.113.9' }),
    403,
    'ip_not_allowed',
  );
});

t.test('an OAuth access token with events:write works; a revoked grant gets token_revoked', async (t) => {
  const app = await registerApp(api.url, ws.api_key, ['events:write', 'events:read']);
  const code = await authorize(
    api.url,
    app,
    { email: ws.admin_email, password: ws.admin_password },
    'events:write events:read',
  );
  const tok = await exchange(api.url, app, code.code!, code.pkce.verifier);
  t.equal(tok.status, 200, tok.text);
  expect200(t, await postEvents(tier.url, tok.body.access_token, one), 1);
  // Replaying a rotated refresh token revokes the whole family, access tokens included.
  const next = await refresh(api.url, app, tok.body.refresh_token);
  t.equal(next.status, 200);
  t.equal((await refresh(api.url, app, tok.body.refresh_token)).status, 400);
  const r = await waitFor(
    'family revocation',
    async () => {
      const x = await postEvents(tier.url, next.body.access_token, one);
      return x.status === 401 ? x : undefined;
    },
    5000,
    50,
  );
  isProblem(t, r, 401, 'token_revoked');
  isProblem(t, await postEvents(tier.url, 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln', one), 401, 'unauthenticated');
});

t.test(
  '60 batches per minute per workspace (here 5): 429 rate_limited with Retry-After and X-RateLimit-*',
  async (t) => {
    const { ws: w, ids: c } = await workspace(1);
    const tier = await ingest(t, { EVENTS_BATCHES_PER_MIN: '5' });
    for (let i = 0; i < 5; i++) {
      const r = await postEvents(tier.url, w.api_key, [ev(c[0])]);
      expect200(t, r, 1);
      t.equal(r.headers.get('x-ratelimit-remaining'), String(4 - i));
    }
    const r = await postEvents(tier.url, w.api_key, [ev(c[0])]);
    isProblem(t, r, 429, 'rate_limited');
    t.ok(
      Number(r.headers.get('retry-after')) >= 1 && Number(r.headers.get('retry-after')) <= 60,
      'Retry-After in seconds',
    );
    t.equal(r.headers.get('x-ratelimit-limit'), '5');
    t.equal(r.headers.get('x-ratelimit-remaining'), '0');
    t.ok(Number(r.headers.get('x-ratelimit-reset')) > Date.now() / 1000);
  },
);
