import t from '#tap';
import { bootstrap, closeDb, db, waitFor } from '../helpers/stack.js';
import {
  authorize,
  call,
  client,
  exchange,
  hiddenFields,
  isProblem,
  pkce,
  postForm,
  refresh,
  registerApp,
  sharedApi,
  startApi,
} from './_helpers.js';

t.teardown(closeDb);
const api = await sharedApi(t);
const ws = await bootstrap();
const admin = client(api.url, ws.api_key);
const adminUser = { email: ws.admin_email, password: ws.admin_password };
const app = await registerApp(api.url, ws.api_key, ['customers:read', 'customers:write', 'users:read', 'admin:*']);

function oauthProblem(t: any, r: any, status: number, error: string) {
  isProblem(t, r, status, error);
  t.equal(r.body.error, error, `error=${error}`);
  t.type(r.body.error_description, 'string');
}

t.test('apps: registered by an admin, secret shown once', async (t) => {
  t.match(app.client_id, /^cli_/);
  t.match(app.client_secret, /^cs_/);
  const list = await admin.get('/v1/oauth/apps');
  t.ok(list.body.data.some((a: any) => a.client_id === app.client_id));
  t.notMatch(list.text, app.client_secret);
  const bad = await admin.post('/v1/oauth/apps', {
    name: 'x',
    redirect_uris: ['http://evil.example.com/cb'],
    scopes: ['customers:read'],
  });
  isProblem(t, bad, 400, 'validation_failed');
  t.equal(bad.body.errors[0].code, 'invalid_redirect_uri');
  t.equal(
    (
      await admin.post('/v1/oauth/apps', {
        name: 'local',
        redirect_uris: ['http://127.0.0.1:9999/cb'],
        scopes: ['customers:read'],
      })
    ).status,
    201,
  );
});

t.test('authorization code flow with PKCE, token response, access token use', async (t) => {
  const a = await authorize(api.url, app, adminUser, 'customers:read users:read');
  t.equal(a.status, 303);
  t.equal(a.location.origin + a.location.pathname, 'https://app.example.com/cb');
  t.equal(a.state, a.expectedState, 'state echoed');
  t.ok(a.code);
  const tok = await exchange(api.url, app, a.code!, a.pkce.verifier);
  t.equal(tok.status, 200, tok.text);
  t.equal(tok.headers.get('cache-control'), 'no-store');
  t.same(Object.keys(tok.body).sort(), [
    'access_token',
    'expires_in',
    'refresh_token',
    'scope',
    'tenant_id',
    'token_type',
  ]);
  t.match(tok.body, {
    token_type: 'Bearer',
    expires_in: 3600,
    scope: 'customers:read users:read',
    tenant_id: ws.tenant_id,
  });
  const u = client(api.url, tok.body.access_token);
  const me = await u.get('/v1/users/me');
  t.match(me.body, {
    kind: 'user',
    email: ws.admin_email,
    role: 'admin',
    scopes: ['customers:read', 'users:read'],
    client_id: app.client_id,
  });
  t.equal((await u.get('/v1/customers')).status, 200);
  const denied = await u.post('/v1/customers', { name: 'x' });
  isProblem(t, denied, 403, 'insufficient_scope');
  t.match(denied.body.detail, /customers:write.*customers:read users:read/);
  t.equal((await u.get('/v1/users')).status, 200, 'admin user with users:read');
  // The code is single-use: replay fails and revokes what it issued.
  const again = await exchange(api.url, app, a.code!, a.pkce.verifier);
  oauthProblem(t, again, 400, 'invalid_grant');
  isProblem(t, await u.get('/v1/customers'), 401, 'token_revoked');
  oauthProblem(t, await refresh(api.url, app, tok.body.refresh_token), 400, 'invalid_grant');
});

t.test('sign-in page: wrong password, deny, HTML safety headers', async (t) => {
  const p = pkce();
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: app.client_id,
    redirect_uri: app.redirect_uris[0],
    scope: 'customers:read',
    state: '<x>"',
    code_challenge: p.challenge,
    code_challenge_method: 'S256',
  });
  const page = await call(api.url, 'GET', `/v1/oauth/authorize?${q}`);
  t.equal(page.status, 200);
  t.match(page.headers.get('content-type'), 'text/html');
  t.equal(page.headers.get('x-frame-options'), 'DENY');
  t.match(page.headers.get('content-security-policy'), "frame-ancestors 'none'");
  t.notMatch(page.text, '<x>"', 'state is escaped');
  t.match(page.text, 'customers:read');
  const hidden = hiddenFields(page.text);
  t.equal(hidden.state, '<x>"');
  const wrong = await postForm(api.url, '/v1/oauth/authorize', {
    ...hidden,
    email: ws.admin_email,
    password: 'wrong',
    decision: 'approve',
  });
  t.equal(wrong.status, 401);
  t.equal(wrong.headers.get('location'), null, 'no redirect');
  t.match(wrong.text, 'not correct');
  const unknown = await postForm(api.url, '/v1/oauth/authorize', {
    ...hidden,
    email: 'nobody@example.com',
    password: 'x',
    decision: 'approve',
  });
  t.equal(unknown.status, 401);
  const deny = await postForm(api.url, '/v1/oauth/authorize', { ...hidden, decision: 'deny' });
  t.equal(deny.status, 303);
  const loc = new URL(deny.headers.get('location')!);
  t.equal(loc.searchParams.get('error'), 'access_denied');
  t.equal(loc.searchParams.get('state'), '<x>"');
});

t.test('authorize errors follow RFC 6749 4.1.2.1', async (t) => {
  const p = pkce();
  const base = {
    response_type: 'code',
    client_id: app.client_id,
    redirect_uri: app.redirect_uris[0],
    scope: 'customers:read',
    state: 's1',
    code_challenge: p.challenge,
    code_challenge_method: 'S256',
  };
  const get = (over: Record<string, string | undefined>) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries({ ...base, ...over })) if (v !== undefined) q.set(k, v);
    return call(api.url, 'GET', `/v1/oauth/authorize?${q}`);
  };
  for (const over of [
    { client_id: 'cli_unknown' },
    { client_id: undefined },
    { redirect_uri: 'https://attacker.example.com/cb' },
    { redirect_uri: 'https://app.example.com/cb/extra' },
  ]) {
    const r = await get(over);
    t.equal(r.status, 400, JSON.stringify(over));
    t.equal(r.headers.get('location'), null, 'never redirected to an unverified URI');
    t.match(r.headers.get('content-type'), 'text/html');
  }
  const cases: Array<[Record<string, string | undefined>, string]> = [
    [{ code_challenge: undefined }, 'invalid_request'],
    [{ code_challenge_method: 'plain' }, 'invalid_request'],
    [{ code_challenge_method: undefined }, 'invalid_request'],
    [{ code_challenge: 'short' }, 'invalid_request'],
    [{ response_type: 'token' }, 'unsupported_response_type'],
    [{ response_type: undefined }, 'invalid_request'],
    [{ scope: 'tasks:write' }, 'invalid_scope'],
    [{ scope: 'bogus' }, 'invalid_scope'],
  ];
  for (const [over, error] of cases) {
    const r = await get(over);
    t.equal(r.status, 303, JSON.stringify(over));
    const loc = new URL(r.headers.get('location')!);
    t.equal(loc.origin + loc.pathname, app.redirect_uris[0]);
    t.equal(loc.searchParams.get('error'), error, JSON.stringify(over));
    t.equal(loc.searchParams.get('state'), 's1');
  }
  const noRedirect = await get({ redirect_uri: undefined });
  t.equal(noRedirect.status, 200, 'the single registered URI is used when none is sent');
});

t.test('PKCE and code attacks', async (t) => {
  const a = await authorize(api.url, app, adminUser, 'customers:read');
  oauthProblem(t, await exchange(api.url, app, a.code!, pkce().verifier), 400, 'invalid_grant');
  oauthProblem(
    t,
    await postForm(api.url, '/v1/oauth/token', {
      grant_type: 'authorization_code',
      code: a.code!,
      redirect_uri: app.redirect_uris[0],
      client_id: app.client_id,
      client_secret: app.client_secret,
    }),
    400,
    'invalid_request',
  );
  oauthProblem(t, await exchange(api.url, app, a.code!, 'short'), 400, 'invalid_request');
  oauthProblem(
    t,
    await exchange(api.url, app, a.code!, a.pkce.verifier, { redirect_uri: 'https://app.example.com/other' }),
    400,
    'invalid_grant',
  );
  oauthProblem(
    t,
    await exchange(api.url, { ...app, client_secret: 'cs_wrong' }, a.code!, a.pkce.verifier),
    401,
    'invalid_client',
  );
  const other = await registerApp(api.url, ws.api_key, ['customers:read']);
  oauthProblem(
    t,
    await exchange(api.url, { ...other, redirect_uris: app.redirect_uris }, a.code!, a.pkce.verifier),
    400,
    'invalid_grant',
  );
  t.equal(
    (await exchange(api.url, app, a.code!, a.pkce.verifier)).status,
    200,
    'failed attempts do not burn the code for its owner',
  );
  const b = await authorize(api.url, app, adminUser, 'customers:read');
  await db()`UPDATE oauth_codes SET expires_at = now() - interval '1 second'
    WHERE used_at IS NULL AND tenant_id = ${ws.tenant_id}`;
  oauthProblem(t, await exchange(api.url, app, b.code!, b.pkce.verifier), 400, 'invalid_grant');
  oauthProblem(
    t,
    await postForm(api.url, '/v1/oauth/token', {
      grant_type: 'password',
      client_id: app.client_id,
      client_secret: app.client_secret,
    }),
    400,
    'unsupported_grant_type',
  );
  const json = await call(api.url, 'POST', '/v1/oauth/token', { body: { grant_type: 'authorization_code' } });
  isProblem(t, json, 415, 'unsupported_media_type');
  t.equal(json.body.error, 'invalid_request');
  const basic = await authorize(api.url, app, adminUser, 'customers:read');
  const viaBasic = await postForm(
    api.url,
    '/v1/oauth/token',
    {
      grant_type: 'authorization_code',
      code: basic.code!,
      redirect_uri: app.redirect_uris[0],
      code_verifier: basic.pkce.verifier,
    },
    { authorization: `Basic ${Buffer.from(`${app.client_id}:${app.client_secret}`).toString('base64')}` },
  );
  t.equal(viaBasic.status, 200, 'HTTP Basic client authentication');
});

t.test('refresh tokens rotate; reuse of a rotated token revokes the family', async (t) => {
  const a = await authorize(api.url, app, adminUser, 'customers:read customers:write');
  const t1 = (await exchange(api.url, app, a.code!, a.pkce.verifier)).body;
  const r2 = await refresh(api.url, app, t1.refresh_token);
  t.equal(r2.status, 200);
  t.not(r2.body.refresh_token, t1.refresh_token);
  t.equal(r2.body.scope, 'customers:read customers:write');
  const narrowed = await postForm(api.url, '/v1/oauth/token', {
    grant_type: 'refresh_token',
    refresh_token: r2.body.refresh_token,
    client_id: app.client_id,
    client_secret: app.client_secret,
    scope: 'customers:read',
  });
  t.equal(narrowed.status, 200);
  t.equal(narrowed.body.scope, 'customers:read');
  const t3 = narrowed.body;
  t.equal((await client(api.url, t3.access_token).get('/v1/customers')).status, 200);
  // The attacker replays the first refresh token.
  oauthProblem(t, await refresh(api.url, app, t1.refresh_token), 400, 'invalid_grant');
  oauthProblem(t, await refresh(api.url, app, t3.refresh_token), 400, 'invalid_grant');
  isProblem(t, await client(api.url, t3.access_token).get('/v1/customers'), 401, 'token_revoked');
  isProblem(t, await client(api.url, t1.access_token).get('/v1/customers'), 401, 'token_revoked');
  const [{ n }] =
    await db()`SELECT count(*)::int AS n FROM oauth_refresh_tokens r JOIN oauth_refresh_tokens f ON f.family_id = r.family_id WHERE r.token_hash = sha256(${t1.refresh_token}::bytea) AND f.revoked_at IS NULL`;
  t.equal(n, 0, 'every token of the family revoked');
  oauthProblem(t, await refresh(api.url, app, 'rt_unknown'), 400, 'invalid_grant');
});

t.test('invited users, roles and what a grant may hold', async (t) => {
  const inv = await admin.post('/v1/users', {
    email: 'viewer@example.com',
    role: 'viewer',
    locale: 'pt-BR',
    timezone: 'America/Sao_Paulo',
    initial_territory_ids: ['latam'],
  });
  t.equal(inv.status, 201);
  t.match(inv.body, {
    email: 'viewer@example.com',
    role: 'viewer',
    status: 'invited',
    locale: 'pt-BR',
    timezone: 'America/Sao_Paulo',
    initial_territory_ids: ['latam'],
  });
  t.match(inv.body.invite.token, /^inv_/);
  isProblem(t, await admin.post('/v1/users', { email: 'VIEWER@example.com', role: 'csm' }), 409, 'conflict');
  isProblem(
    t,
    await admin.post('/v1/users', { email: 'x@example.com', timezone: 'Mars/Base' }),
    400,
    'validation_failed',
  );
  isProblem(t, await admin.post('/v1/users', { email: 'x@example.com', role: 'owner' }), 400, 'validation_failed');
  const user = { email: 'viewer@example.com', password: 'a long enough password' };
  const early = await authorize(api.url, app, user, 'customers:read');
  t.equal(early.status, 401, 'no sign-in before the password is set');
  isProblem(
    t,
    await call(api.url, 'POST', '/v1/invites/accept', { body: { token: inv.body.invite.token, password: 'short' } }),
    400,
    'validation_failed',
  );
  const acc = await call(api.url, 'POST', '/v1/invites/accept', {
    body: { token: inv.body.invite.token, password: user.password },
  });
  t.equal(acc.status, 200);
  t.equal(acc.body.status, 'active');
  isProblem(
    t,
    await call(api.url, 'POST', '/v1/invites/accept', {
      body: { token: inv.body.invite.token, password: user.password },
    }),
    404,
    'not_found',
  );
  const a = await authorize(api.url, app, user, 'customers:read customers:write admin:*');
  const tok = (await exchange(api.url, app, a.code!, a.pkce.verifier)).body;
  t.equal(tok.scope, 'customers:read', 'a viewer grant holds only read scopes, never admin:*');
  isProblem(t, await client(api.url, tok.access_token).post('/v1/customers', { name: 'x' }), 403, 'insufficient_scope');
  const adminGrant = await authorize(api.url, app, adminUser, 'admin:*');
  const at = (await exchange(api.url, app, adminGrant.code!, adminGrant.pkce.verifier)).body;
  t.equal(at.scope, 'admin:*');
  t.equal((await client(api.url, at.access_token).post('/v1/customers', { name: 'by admin grant' })).status, 201);

  const list = await admin.get('/v1/users');
  t.same(list.body.data.map((u: any) => u.email).sort(), [ws.admin_email, 'viewer@example.com'].sort());
  const viewerId = inv.body.id;
  const up = await admin.patch(`/v1/users/${viewerId}/role`, { role: 'csm' });
  t.equal(up.status, 200);
  t.equal(up.body.role, 'csm');
  isProblem(t, await admin.patch(`/v1/users/${viewerId}/role`, { role: 'boss' }), 400, 'validation_failed');
  const [me] = await db()`SELECT id::text FROM users WHERE tenant_id = ${ws.tenant_id} AND role = 'admin'`;
  isProblem(t, await admin.patch(`/v1/users/${me.id}/role`, { role: 'viewer' }), 409, 'last_admin');
  // The new role applies at the next refresh.
  const r = await refresh(api.url, app, tok.refresh_token);
  t.equal(r.body.scope, 'customers:read');
  const b = await authorize(api.url, app, user, 'customers:read customers:write');
  t.equal(
    (await exchange(api.url, app, b.code!, b.pkce.verifier)).body.scope,
    'customers:read customers:write',
    'csm may write customers',
  );
});

t.test('access tokens expire after their lifetime: 401 token_expired', async (t) => {
  const short = await startApi(t, { ACCESS_TOKEN_TTL_S: '1' });
  const a = await authorize(short.url, app, adminUser, 'customers:read');
  const tok = (await exchange(short.url, app, a.code!, a.pkce.verifier)).body;
  t.equal(tok.expires_in, 1);
  const r = await waitFor(
    'token expiry',
    async () => {
      const x = await client(short.url, tok.access_token).get('/v1/customers');
      return x.status === 401 ? x : undefined;
    },
    5000,
    200,
  );
  isProblem(t, r, 401, 'token_expired');
  t.equal((await refresh(short.url, app, tok.refresh_token)).status, 200, 'refresh still works');
});

t.test(
  'sign-in attempts per account are limited: past 20 in 15 minutes even the right password is refused',
  async (t) => {
    const other = await bootstrap();
    const otherApp = await registerApp(api.url, other.api_key, ['customers:read']);
    const p = pkce();
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: otherApp.client_id,
      redirect_uri: otherApp.redirect_uris[0],
      scope: 'customers:read',
      state: 's',
      code_challenge: p.challenge,
      code_challenge_method: 'S256',
    });
    const hidden = hiddenFields((await call(api.url, 'GET', `/v1/oauth/authorize?${q}`)).text);
    for (let i = 0; i < 20; i++) {
      const wrong = await postForm(api.url, '/v1/oauth/authorize', {
        ...hidden,
        email: other.admin_email,
        password: `guess-${i}`,
        decision: 'approve',
      });
      if (wrong.status !== 401) t.fail(`attempt ${i + 1} answered ${wrong.status}`);
    }
    const right = await postForm(api.url, '/v1/oauth/authorize', {
      ...hidden,
      email: other.admin_email,
      password: other.admin_password,
      decision: 'approve',
    });
    t.equal(right.status, 429, 'the 21st attempt is refused');
    t.equal(right.headers.get('location'), null, 'no code is issued');
    t.ok(Number(right.headers.get('retry-after')) > 0, 'Retry-After says when to come back');
    t.match(right.text, 'Too many sign-in attempts');
    // Another account of the same workspace is not affected.
    const stranger = await postForm(api.url, '/v1/oauth/authorize', {
      ...hidden,
      email: 'someone-else@example.com',
      password: 'x',
      decision: 'approve',
    });
    t.equal(stranger.status, 401);
  },
);
