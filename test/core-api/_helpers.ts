import { createHash, randomBytes } from 'node:crypto';
import { startTier, type Teardowns, type Tier } from '../helpers/stack.js';

export interface Res {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

/**
 * The core-api of a run, started once by dist/test/run.js with startApi's settings (its URL in
 * TEST_SHARED_API), for the files that only send it requests: a core-api start costs about a CPU-second,
 * and some thirty files need nothing else. A file run on its own (`npx tap <file>`) starts its own.
 * What only a process of the file's own can give (its output, a stop, settings of its own, two
 * processes) is startApi's.
 */
export async function sharedApi(t: Teardowns): Promise<Pick<Tier, 'url' | 'port'>> {
  const url = process.env.TEST_SHARED_API;
  if (url) return { url, port: Number(new URL(url).port) };
  return startApi(t);
}

/** A core-api process on a free port with limits high enough not to interfere, unless overridden. */
export async function startApi(t: Teardowns, env: Record<string, string> = {}): Promise<Tier> {
  const port = env.API_PORT ?? String(await (await import('../helpers/stack.js')).freePort());
  return startTier(t, 'core-api', {
    API_PORT: port,
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
    API_READS_PER_MIN: '1000000',
    API_WRITES_PER_MIN: '1000000',
    API_BULK_IMPORTS_PER_HOUR: '1000',
    ...env,
  });
}

export async function call(
  base: string,
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; raw?: string | Uint8Array; headers?: Record<string, string> } = {},
): Promise<Res> {
  const headers: Record<string, string> = { ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}) };
  let body: string | Uint8Array | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] = 'application/json';
  }
  const res = await fetch(base + path, { method, headers: { ...headers, ...opts.headers }, body, redirect: 'manual' });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

/** A client bound to one API origin and credential. */
export function client(base: string, token?: string) {
  return {
    get: (p: string, h?: Record<string, string>) => call(base, 'GET', p, { token, headers: h }),
    post: (p: string, body?: unknown, h?: Record<string, string>) => call(base, 'POST', p, { token, body, headers: h }),
    patch: (p: string, body?: unknown, h?: Record<string, string>) =>
      call(base, 'PATCH', p, { token, body, headers: h }),
    del: (p: string, h?: Record<string, string>) => call(base, 'DELETE', p, { token, headers: h }),
    raw: (method: string, p: string, raw: string | Uint8Array, h?: Record<string, string>) =>
      call(base, method, p, { token, raw, headers: h }),
  };
}

export function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();

export async function postForm(
  base: string,
  path: string,
  fields: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<Res> {
  return call(base, 'POST', path, {
    raw: form(fields),
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
  });
}

/** Hidden inputs of the consent page, as the browser would send them. */
export function hiddenFields(html: string): Record<string, string> {
  const out: Record<string, string> = {};
  const unesc = (s: string) =>
    s
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&amp;/g, '&');
  for (const m of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g))
    out[unesc(m[1])] = unesc(m[2]);
  return out;
}

export interface App {
  client_id: string;
  client_secret: string;
  redirect_uris: string[];
}

export async function registerApp(
  base: string,
  adminKey: string,
  scopes: string[],
  redirect = 'https://app.example.com/cb',
): Promise<App> {
  const r = await client(base, adminKey).post('/v1/oauth/apps', {
    name: 'Test app',
    redirect_uris: [redirect],
    scopes,
  });
  if (r.status !== 201) throw new Error(`app registration: ${r.status} ${r.text}`);
  return r.body as App;
}

/** Signs in through the HTML form (without a browser) and returns the code from the redirect. */
export async function authorize(
  base: string,
  app: App,
  user: { email: string; password: string },
  scope: string,
  p = pkce(),
  state = 'st-' + randomBytes(4).toString('hex'),
) {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: app.client_id,
    redirect_uri: app.redirect_uris[0],
    scope,
    state,
    code_challenge: p.challenge,
    code_challenge_method: 'S256',
  });
  const page = await call(base, 'GET', `/v1/oauth/authorize?${q}`);
  if (page.status !== 200) throw new Error(`authorize page: ${page.status} ${page.text}`);
  const submit = await postForm(base, '/v1/oauth/authorize', {
    ...hiddenFields(page.text),
    email: user.email,
    password: user.password,
    decision: 'approve',
  });
  const loc = new URL(submit.headers.get('location') ?? 'http://invalid/');
  return {
    status: submit.status,
    code: loc.searchParams.get('code'),
    state: loc.searchParams.get('state'),
    location: loc,
    expectedState: state,
    pkce: p,
  };
}

export async function exchange(
  base: string,
  app: App,
  code: string,
  verifier: string,
  extra: Record<string, string> = {},
): Promise<Res> {
  return postForm(base, '/v1/oauth/token', {
    grant_type: 'authorization_code',
    code,
    redirect_uri: app.redirect_uris[0],
    client_id: app.client_id,
    client_secret: app.client_secret,
    code_verifier: verifier,
    ...extra,
  });
}

export async function refresh(base: string, app: App, token: string): Promise<Res> {
  return postForm(base, '/v1/oauth/token', {
    grant_type: 'refresh_token',
    refresh_token: token,
    client_id: app.client_id,
    client_secret: app.client_secret,
  });
}

export const randomUuid = () => '0192f0c4-8a55-7b3e-9d1c-' + randomBytes(6).toString('hex');

export function isProblem(
  t: { equal: Function; match: Function; ok: Function; notMatch: Function },
  r: Res,
  status: number,
  code: string,
  base?: string,
): void {
  t.equal(r.status, status, `status ${status} (${r.text.slice(0, 300)})`);
  t.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/, 'problem+json');
  t.ok(r.body && typeof r.body === 'object', 'JSON body');
  if (!r.body) return;
  t.match(
    r.body.type,
    base ? `${base}/errors/${code}` : new RegExp(`/errors/${code}$`),
    `type ends with /errors/${code}`,
  );
  t.equal(r.body.status, status);
  t.ok(
    typeof r.body.title === 'string' &&
      typeof r.body.detail === 'string' &&
      typeof r.body.instance === 'string' &&
      typeof r.body.trace_id === 'string',
    'title, detail, instance, trace_id',
  );
  t.equal(r.body.trace_id, r.headers.get('x-trace-id'), 'trace_id equals X-Trace-Id');
  t.notMatch(r.text, /\n\s+at\s|\.js:\d+/, 'no stack trace');
}
