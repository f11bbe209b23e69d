import t from '#tap';
import { client, isProblem, startApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb, waitFor } from '../helpers/stack.js';
import { apiCustomer, key, scored } from './support.js';

// GET /v1/analytics/portfolio over HTTP on a hand-built workspace. This core API never caches
// (ANALYTICS_CACHE_TTL_MS=0) so that every answer reflects the data; caching has its own test.
t.teardown(closeDb);
const api = await startApi(t, { ANALYTICS_CACHE_TTL_MS: '0' });
const ws = await bootstrap();
const other = await bootstrap();
const admin = client(api.url, ws.api_key);

async function customer(c: Parameters<typeof apiCustomer>[2], health?: [number, string]): Promise<string> {
  const id = await apiCustomer(api.url, ws, c);
  if (health) await scored(ws, id, health[0], health[1]);
  return id;
}

async function remove(id: string): Promise<void> {
  const r = await admin.del(`/v1/customers/${id}`);
  if (r.status !== 204) throw new Error(`DELETE: ${r.status} ${r.text}`);
}

const p1 = await customer({ name: 'P1', arr: 100_000, renewal_date: '2031-03-01', owner_email: 'ana@example.com' }, [
  20,
  'at_risk',
]);
// Same arr as P1, sooner renewal: listed first.
const p2 = await customer({ name: 'P2', arr: 100_000, renewal_date: '2031-01-15' }, [25, 'at_risk']);
const p3 = await customer({ name: 'P3', arr: 50_000.5, status: 'trial' }, [30, 'at_risk']);
// No arr: last of the at-risk customers, and out of the top 10.
await customer({ name: 'P4', status: 'paused' }, [10, 'at_risk']);
const small: string[] = [];
for (let i = 1; i <= 8; i++) small.push(await customer({ name: `S${i}`, arr: 1000 + i }, [35, 'at_risk']));
await customer({ name: 'H1', arr: 20_000 }, [80, 'healthy']);
await customer({ name: 'N1', arr: 5000, status: 'trial' }, [55, 'neutral']);
await customer({ name: 'U1', arr: 7000 });
// Churned: counted by status only, never in ARR, health or risks, however large.
await customer({ name: 'C1', arr: 999_999, status: 'churned' }, [5, 'at_risk']);
// Soft-deleted: counted nowhere.
const gone = await customer({ name: 'D1', arr: 888_888 }, [1, 'at_risk']);
await remove(gone);
// Another workspace's customer: never counted here.
const otherId = await apiCustomer(api.url, other, { name: 'Elsewhere', arr: 12_345 });
await scored(other, otherId, 3, 'at_risk');

t.test('every figure of the portfolio', async (t) => {
  const before = Date.now();
  const r = await admin.get('/v1/analytics/portfolio');
  t.equal(r.status, 200, r.text);
  t.equal(r.headers.get('cache-control'), 'no-store', 'caching is off on this server');
  const asOf = Date.parse(r.body.as_of);
  t.ok(asOf >= before - 1000 && asOf <= Date.now() + 1000, 'as_of is the time of the computation');
  const { as_of: _asOf, top_risks, ...figures } = r.body;
  t.same(figures, {
    total_arr: 100_000 + 100_000 + 50_000.5 + 8036 + 20_000 + 5000 + 7000,
    customer_count: 16,
    customers_by_status: { active: 12, trial: 2, churned: 1, paused: 1 },
    health_distribution: { healthy: 1, neutral: 1, at_risk: 12, unscored: 1 },
    arr_by_health: { healthy: 20_000, neutral: 5000, at_risk: 258_036.5, unscored: 7000 },
  });
  t.equal(top_risks.length, 10, 'at most 10 risks');
  t.same(
    top_risks.map((x: any) => x.customer_id),
    [p2, p1, p3, ...small.slice(1).reverse()],
    'largest arr first, then the soonest renewal; no arr last',
  );
  t.same(top_risks[1], {
    customer_id: p1,
    name: 'P1',
    arr: 100_000,
    health_score: 20,
    health_status: 'at_risk',
    renewal_date: '2031-03-01',
    owner_email: 'ana@example.com',
  });
  t.same(top_risks[2], {
    customer_id: p3,
    name: 'P3',
    arr: 50_000.5,
    health_score: 30,
    health_status: 'at_risk',
    renewal_date: null,
    owner_email: null,
  });
});

t.test('a restored customer counts again; another workspace sees only its own', async (t) => {
  t.equal((await admin.post(`/v1/customers/${gone}/restore`)).status, 200);
  const r = await admin.get('/v1/analytics/portfolio');
  t.equal(r.body.customer_count, 17);
  t.equal(r.body.top_risks[0].customer_id, gone, 'the largest at-risk customer again');
  t.equal((await admin.del(`/v1/customers/${gone}`)).status, 204);

  const o = await client(api.url, other.api_key).get('/v1/analytics/portfolio');
  t.equal(o.status, 200);
  t.match(o.body, {
    total_arr: 12_345,
    customer_count: 1,
    customers_by_status: { active: 1, trial: 0, churned: 0, paused: 0 },
    health_distribution: { healthy: 0, neutral: 0, at_risk: 1, unscored: 0 },
    arr_by_health: { healthy: 0, neutral: 0, at_risk: 12_345, unscored: 0 },
  });
  t.same(
    o.body.top_risks.map((x: any) => x.customer_id),
    [otherId],
  );
});

t.test('an empty workspace: zeros, no risks', async (t) => {
  const empty = await bootstrap();
  const r = await client(api.url, empty.api_key).get('/v1/analytics/portfolio');
  t.equal(r.status, 200);
  const { as_of: _a, ...rest } = r.body;
  t.same(rest, {
    total_arr: 0,
    customer_count: 0,
    customers_by_status: { active: 0, trial: 0, churned: 0, paused: 0 },
    health_distribution: { healthy: 0, neutral: 0, at_risk: 0, unscored: 0 },
    arr_by_health: { healthy: 0, neutral: 0, at_risk: 0, unscored: 0 },
    top_risks: [],
  });
});

t.test('scopes: analytics:read on every endpoint', async (t) => {
  const viewer = client(api.url, await key(api.url, ws, 'viewer', ['analytics:read']));
  const narrow = client(api.url, await key(api.url, ws, 'csm', ['customers:read']));
  for (const path of ['/v1/analytics/portfolio', '/v1/analytics/renewals', '/v1/analytics/cohorts']) {
    t.equal((await viewer.get(path)).status, 200, `${path} with analytics:read`);
    const r = await narrow.get(path);
    isProblem(t, r, 403, 'insufficient_scope');
    t.match(r.body.detail, 'analytics:read', `${path}: the detail names the scope`);
    t.equal((await client(api.url).get(path)).status, 401, `${path} without a credential`);
  }
});

t.test('answers are cached per workspace for the configured time', async (t) => {
  const cached = await startApi(t, { ANALYTICS_CACHE_TTL_MS: '3000' });
  const c = client(cached.url, ws.api_key);
  const first = await c.get('/v1/analytics/portfolio');
  t.match(first.headers.get('cache-control'), /^private, max-age=[0-3]$/);
  const id = await apiCustomer(api.url, ws, { name: 'Late', arr: 1 });
  const again = await c.get('/v1/analytics/portfolio');
  t.same(again.body, first.body, 'the cached answer, as_of included');
  const o = await client(cached.url, other.api_key).get('/v1/analytics/portfolio');
  t.equal(o.body.customer_count, 1, 'another workspace gets its own answer');
  const fresh = await waitFor(
    'the cache to expire',
    async () => {
      const r = await c.get('/v1/analytics/portfolio');
      return r.body.customer_count === first.body.customer_count + 1 ? r : undefined;
    },
    10_000,
    200,
  );
  t.not(fresh.body.as_of, first.body.as_of);
  t.equal((await admin.del(`/v1/customers/${id}`)).status, 204);
});
