import t from '#tap';
import { bootstrap, closeDb, freePort, waitFor } from '../helpers/stack.js';
import { call, client, isProblem, startApi } from './_helpers.js';

t.teardown(closeDb);

// Fixed one-minute windows: start a run early in a window so it cannot straddle two.
const earlyInMinute = () =>
  waitFor('start of a minute window', () => Date.now() % 60_000 < 40_000 || undefined, 25_000, 200);

t.test('limits are shared by several processes serving one workspace', async (t) => {
  const env = {
    API_READS_PER_MIN: '20',
    API_WRITES_PER_MIN: '10',
    API_BULK_IMPORTS_PER_HOUR: '2',
    API_PLAN_LIMITS: '{"enterprise":{"reads_per_min":7}}',
  };
  // Two processes on one port (SO_REUSEPORT), as API_PROCESSES would run them, plus one on its own port.
  const port = String(await freePort());
  const one = await startApi(t, { ...env, API_PORT: port });
  const two = await startApi(t, { ...env, API_PORT: port });
  const three = await startApi(t, env);
  t.equal(one.url, two.url);
  const ws = await bootstrap(['--plan', 'starter']);
  await earlyInMinute();
  const hosts = [one.url, three.url];
  const reset: string[] = [];
  for (let i = 0; i < 20; i++) {
    const r = await client(hosts[i % 2], ws.api_key).get('/v1/customers?limit=1');
    t.equal(r.status, 200);
    t.equal(r.headers.get('x-ratelimit-limit'), '20');
    t.equal(r.headers.get('x-ratelimit-remaining'), String(19 - i), `remaining after ${i + 1}`);
    reset.push(r.headers.get('x-ratelimit-reset')!);
  }
  const resetAt = Number(reset[0]);
  t.ok(resetAt > Date.now() / 1000 && resetAt <= Date.now() / 1000 + 60, 'reset is a unix timestamp within the minute');
  const over = await client(three.url, ws.api_key).get('/v1/customers');
  isProblem(t, over, 429, 'rate_limited');
  t.equal(over.headers.get('x-ratelimit-remaining'), '0');
  const retry = Number(over.headers.get('retry-after'));
  t.ok(retry >= 1 && retry <= 60, `Retry-After ${retry}`);
  isProblem(t, await client(one.url, ws.api_key).get('/v1/customers'), 429, 'rate_limited');

  // Writes have their own bucket.
  const w = await client(one.url, ws.api_key).post('/v1/customers', { name: 'still writable' });
  t.equal(w.status, 201);
  t.equal(w.headers.get('x-ratelimit-limit'), '10');

  // Bulk imports: 2 per hour here.
  for (let i = 0; i < 2; i++) {
    const r = await client(hosts[i], ws.api_key).post('/v1/customers/bulk-import', { customers: [{ name: `b${i}` }] });
    t.equal(r.status, 202);
    t.equal(r.headers.get('x-ratelimit-limit'), '2');
  }
  const third = await client(one.url, ws.api_key).post('/v1/customers/bulk-import', { customers: [{ name: 'b3' }] });
  isProblem(t, third, 429, 'rate_limited');
  t.ok(Number(third.headers.get('retry-after')) > 0);

  // Another workspace is not affected; its plan has its own figure.
  const ent = await bootstrap();
  const e = await client(one.url, ent.api_key).get('/v1/customers');
  t.equal(e.status, 200);
  t.equal(e.headers.get('x-ratelimit-limit'), '7', 'per-plan limit');
});

t.test('rate-limit headers on every authenticated response, errors included', async (t) => {
  const api = await startApi(t);
  const ws = await bootstrap();
  const c = client(api.url, ws.api_key);
  const k = await c.post('/v1/api-keys', { name: 'narrow', scopes: ['analytics:read'] });
  for (const r of [
    await c.get('/v1/customers'),
    await c.get('/v1/customers/00000000-0000-4000-8000-000000000000'),
    await c.post('/v1/customers', {}),
    await client(api.url, k.body.key).get('/v1/customers'),
    await c.del('/v1/api-keys/00000000-0000-4000-8000-000000000000'),
  ]) {
    t.ok(
      r.headers.get('x-ratelimit-limit') &&
        r.headers.get('x-ratelimit-remaining') &&
        r.headers.get('x-ratelimit-reset'),
      `headers on ${r.status}`,
    );
    t.ok(r.headers.get('x-trace-id'));
  }
  const anon = await call(api.url, 'GET', '/v1/customers');
  t.equal(anon.status, 401);
  t.ok(anon.headers.get('x-trace-id'), 'X-Trace-Id even without a workspace');
});
