import t from '#tap';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { bootstrap, closeDb, freePort } from '../helpers/stack.js';
import { type App, client, exchange, pkce, sharedApi } from './_helpers.js';

const CHROMIUM = '/usr/bin/chromium';
if (!fs.existsSync(CHROMIUM))
  execFileSync('apt-get', ['install', '-y', 'chromium'], {
    stdio: 'ignore',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });

t.teardown(closeDb);

t.test('a real browser signs in, consents, and the app exchanges the code', async (t) => {
  const api = await sharedApi(t);
  const ws = await bootstrap();
  // The third-party app: receives the redirect and exchanges the code server-side.
  const cbPort = await freePort();
  const redirect = `http://127.0.0.1:${cbPort}/cb`;
  const ownApp = await client(api.url, ws.api_key).post('/v1/oauth/apps', {
    name: 'Browser app',
    redirect_uris: [redirect],
    scopes: ['customers:read', 'customers:write'],
  });
  const registered = ownApp.body as App;
  const p = pkce();
  const state = 'browser-state-1';
  let tokens: any;
  const srv = http.createServer((req, res) => {
    const u = new URL(req.url!, redirect);
    void (async () => {
      if (u.searchParams.get('state') !== state) {
        res.writeHead(400).end('state mismatch');
        return;
      }
      const code = u.searchParams.get('code');
      if (!code) {
        res
          .writeHead(200, { 'content-type': 'text/html' })
          .end(`<p id="result">error=${u.searchParams.get('error')}</p>`);
        return;
      }
      const r = await exchange(api.url, registered, code, p.verifier);
      tokens = r.body;
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(`<p id="result">signed in: ${r.status} ${tokens.scope}</p>`);
    })();
  });
  await new Promise<void>((r) => srv.listen(cbPort, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => srv.close(() => r())));

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csp-chromium-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const ctx = await chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  t.teardown(() => ctx.close());
  const page = ctx.pages()[0] ?? (await ctx.newPage());
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: registered.client_id,
    redirect_uri: redirect,
    scope: 'customers:read customers:write',
    state,
    code_challenge: p.challenge,
    code_challenge_method: 'S256',
  });
  await page.goto(`${api.url}/v1/oauth/authorize?${q}`);
  t.match(await page.title(), 'Authorize Browser app');
  t.match(await page.locator('#scopes').innerText(), 'customers:write');

  // A wrong password keeps the user on the page with an error.
  await page.fill('#email', ws.admin_email);
  await page.fill('#password', 'not the password');
  await page.click('#approve');
  await page.waitForSelector('#error');
  t.match(await page.locator('#error').innerText(), 'not correct');

  await page.fill('#password', ws.admin_password);
  await Promise.all([page.waitForURL(`${redirect}?**`), page.click('#approve')]);
  await page.waitForSelector('#result');
  t.equal(await page.locator('#result').innerText(), 'signed in: 200 customers:read customers:write');
  t.ok(tokens?.access_token);
  const me = await client(api.url, tokens.access_token).get('/v1/users/me');
  t.equal(me.body.email, ws.admin_email);
  t.equal(
    (await client(api.url, tokens.access_token).post('/v1/customers', { name: 'Made from the browser grant' })).status,
    201,
  );

  // Deny sends access_denied back with the state.
  await page.goto(`${api.url}/v1/oauth/authorize?${q}`);
  await Promise.all([page.waitForURL(`${redirect}?**`), page.click('#deny')]);
  t.equal(await page.locator('#result').innerText(), 'error=access_denied');
});
