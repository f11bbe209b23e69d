import t, { type Test } from '#tap';
import { connect } from 'nats';
import { subjects } from '../../lib/nats.js';
import { bootstrap, closeDb, db, freePort, privateNats, urls, type Workspace } from '../helpers/stack.js';
import { client, isProblem, randomUuid, startApi, type Res } from '../core-api/_helpers.js';

// The health endpoints of the core API over HTTP. Scores are written straight into PostgreSQL and
// csp.health_history here (the scorer has its own tests); recalculation is driven through NATS.
t.teardown(closeDb);
const api = await startApi(t);
const ws = await bootstrap();
const other = await bootstrap();
const admin = client(api.url, ws.api_key);

const DEFAULT_MODEL = {
  weights: { usage_frequency: 0.25, breadth: 0.15, active_users: 0.2, key_events: 0.15, payment_health: 0.25 },
  thresholds: { healthy: 70, at_risk: 40 },
  active_dimensions: ['usage_frequency', 'breadth', 'active_users', 'key_events', 'payment_health'],
  key_events: { positive: [], negative: [] },
  drivers: [],
};
const UNITS = ['days_per_week', 'distinct_events', 'dau_mau_ratio', 'net_key_events', 'unresolved_billing_issues'];

const today = new Date().toISOString().slice(0, 10);
const addDays = (date: string, n: number) =>
  new Date(Date.parse(`${date}T00:00:00Z`) + n * 86_400_000).toISOString().slice(0, 10);

async function customer(w: Workspace, name: string): Promise<string> {
  const r = await client(api.url, w.api_key).post('/v1/customers', { name });
  if (r.status !== 201) throw new Error(`${r.status} ${r.text}`);
  return r.body.id;
}

async function key(w: Workspace, role: string, scopes: string[]): Promise<string> {
  const r = await client(api.url, w.api_key).post('/v1/api-keys', { name: `${role} key`, role, scopes });
  if (r.status !== 201) throw new Error(`${r.status} ${r.text}`);
  return r.body.key;
}

const breakdown = (score: number) =>
  DEFAULT_MODEL.active_dimensions.map((k, i) => ({
    key: k,
    active: k !== 'key_events',
    weight: DEFAULT_MODEL.weights[k as keyof typeof DEFAULT_MODEL.weights],
    score: k === 'key_events' ? null : score,
    value: k === 'key_events' ? null : i,
    unit: UNITS[i],
  }));

/** What the scorer writes for a customer. */
async function scored(tenantId: string, customerId: string, score: number, status: string, at = new Date()) {
  await db()`
    INSERT INTO customer_health (customer_id, tenant_id, score, status, dimensions, calculated_at)
    VALUES (${customerId}, ${tenantId}, ${score}, ${status}, ${JSON.stringify(breakdown(score))}::text::jsonb, ${at})
    ON CONFLICT (customer_id) DO UPDATE SET score = EXCLUDED.score, status = EXCLUDED.status,
      dimensions = EXCLUDED.dimensions, calculated_at = EXCLUDED.calculated_at`;
}

/** One INSERT (one part) per call, so the rows of one day are not merged before the read. */
async function historyRows(
  tenantId: string,
  customerId: string,
  rows: Array<{ day: string; time: string; score: number; status: string }>,
) {
  const body = rows
    .map((r) =>
      JSON.stringify({
        tenant_id: tenantId,
        customer_id: customerId,
        day: r.day,
        score: r.score,
        status: r.status,
        calculated_at: `${r.day} ${r.time}`,
      }),
    )
    .join('\n');
  const q = encodeURIComponent('INSERT INTO csp.health_history FORMAT JSONEachRow');
  const res = await fetch(`${urls.CLICKHOUSE_URL}/?query=${q}`, { method: 'POST', body });
  if (!res.ok) throw new Error(`ClickHouse: ${await res.text()}`);
}

function fieldOf(t: Test, r: Res, field: string, what: string) {
  isProblem(t, r, 400, 'validation_failed');
  t.ok(
    (r.body?.errors ?? []).some((e: { field: string }) => e.field === field),
    `${what}: errors[] names ${field} (${JSON.stringify(r.body?.errors)})`,
  );
}

t.test('model: defaults, merge one level deep, the whole model answered', async (t) => {
  const w = await bootstrap();
  const c = client(api.url, w.api_key);
  const d = await c.get('/v1/health/model');
  t.equal(d.status, 200);
  t.same(d.body, { ...DEFAULT_MODEL, updated_at: null }, 'defaults, never updated');
  t.ok(d.headers.get('x-ratelimit-limit') && d.headers.get('x-ratelimit-remaining'), 'rate-limit headers');

  const before = Date.now();
  const p = await c.patch('/v1/health/model', { weights: { breadth: 0.5 }, thresholds: { at_risk: 30 } });
  t.equal(p.status, 200, p.text);
  t.same(p.body.weights, { ...DEFAULT_MODEL.weights, breadth: 0.5 }, 'weights merged key by key');
  t.same(p.body.thresholds, { healthy: 70, at_risk: 30 }, 'thresholds merged key by key');
  t.same(p.body.active_dimensions, DEFAULT_MODEL.active_dimensions);
  t.ok(Date.parse(p.body.updated_at) >= before - 5000, 'updated_at set');

  const a = await c.patch('/v1/health/model', { active_dimensions: ['payment_health', 'usage_frequency'] });
  t.same(a.body.active_dimensions, ['payment_health', 'usage_frequency'], 'active_dimensions replaced as sent');
  t.equal(a.body.weights.breadth, 0.5, 'earlier changes kept');

  const k1 = await c.patch('/v1/health/model', {
    key_events: { positive: ['report_exported', 'seat_added'], negative: ['seat_removed'] },
  });
  t.same(k1.body.key_events, { positive: ['report_exported', 'seat_added'], negative: ['seat_removed'] });
  const k2 = await c.patch('/v1/health/model', { key_events: { negative: ['ticket_escalated'] } });
  t.same(k2.body.key_events, { positive: [], negative: ['ticket_escalated'] }, 'key_events replaced as sent');

  const g = await c.get('/v1/health/model');
  t.same(g.body, k2.body, 'GET answers what PATCH stored');
  const [row] = await db()`SELECT model FROM health_models WHERE tenant_id = ${w.tenant_id}`;
  t.same(row.model.weights, k2.body.weights, 'stored in health_models');
  t.same(
    (await admin.get('/v1/health/model')).body.weights,
    DEFAULT_MODEL.weights,
    'another workspace keeps its own model',
  );
});

t.test('model: each validation error names the field and changes nothing', async (t) => {
  const w = await bootstrap();
  const c = client(api.url, w.api_key);
  const bad = async (body: unknown, field: string, what: string) =>
    fieldOf(t, await c.patch('/v1/health/model', body), field, what);
  await bad({ weights: { breadth: -0.1 } }, 'weights.breadth', 'negative weight');
  await bad({ weights: { breadth: 'heavy' } }, 'weights.breadth', 'non-numeric weight');
  await bad({ weights: { breadth: null } }, 'weights.breadth', 'null weight');
  await bad({ weights: { happiness: 1 } }, 'weights.happiness', 'unknown dimension in weights');
  await bad(
    { active_dimensions: ['usage_frequency', 'breadth', 'happiness'] },
    'active_dimensions[2]',
    'unknown dimension in active_dimensions',
  );
  await bad({ thresholds: { at_risk: 70 } }, 'thresholds.at_risk', 'at_risk equal to healthy');
  await bad({ thresholds: { at_risk: 80 } }, 'thresholds.at_risk', 'at_risk above healthy');
  await bad({ thresholds: { healthy: 30 } }, 'thresholds.healthy', 'healthy below the stored at_risk');
  await bad({ thresholds: { healthy: 101 } }, 'thresholds.healthy', 'healthy above 100');
  await bad({ thresholds: { at_risk: -1 } }, 'thresholds.at_risk', 'at_risk below 0');
  await bad({ active_dimensions: [] }, 'active_dimensions', 'no dimension active');
  await bad(
    { active_dimensions: ['key_events'] },
    'active_dimensions',
    'only key_events active while no event is flagged',
  );
  await bad(
    { active_dimensions: ['breadth', 'payment_health'], weights: { breadth: 0, payment_health: 0 } },
    'weights.breadth',
    'all active weights 0',
  );
  await bad({ key_events: { positive: ['Report Exported'] } }, 'key_events.positive[0]', 'not snake_case');
  await bad({ key_events: { negative: ['a'.repeat(256)] } }, 'key_events.negative[0]', 'name over 255 characters');
  await bad({ key_events: { positive: [''] } }, 'key_events.positive[0]', 'empty name');
  await bad(
    { key_events: { positive: Array.from({ length: 101 }, (_, i) => `event_${i}`) } },
    'key_events.positive',
    'more than 100 names',
  );
  await bad(
    { key_events: { positive: ['login'], negative: ['logout', 'login'] } },
    'key_events.negative[1]',
    'a name in both lists',
  );
  await bad({ colour: 'red' }, 'colour', 'unknown top-level field');
  isProblem(t, await c.patch('/v1/health/model', {}), 400, 'validation_failed');

  const g = await c.get('/v1/health/model');
  t.same(g.body, { ...DEFAULT_MODEL, updated_at: null }, 'no rejected PATCH changed the model');
  t.equal(
    (await c.patch('/v1/health/model', { active_dimensions: ['key_events'], key_events: { positive: ['login'] } }))
      .status,
    200,
    'key_events alone is enough once an event is flagged',
  );
  t.equal(
    (await c.patch('/v1/health/model', { weights: { key_events: 0, breadth: 0 } })).status,
    400,
    'the only active dimension cannot weigh 0',
  );
});

t.test('scopes and roles', async (t) => {
  const id = await customer(ws, 'Scoped Co');
  const csm = client(api.url, await key(ws, 'csm', ['health:read', 'health:write']));
  const viewer = client(api.url, await key(ws, 'viewer', ['health:read', 'customers:read']));
  const noHealth = client(api.url, await key(ws, 'csm', ['customers:read', 'customers:write']));

  isProblem(t, await csm.patch('/v1/health/model', { weights: { breadth: 1 } }), 403, 'insufficient_role');
  isProblem(t, await viewer.patch('/v1/health/model', { weights: { breadth: 1 } }), 403, 'insufficient_scope');
  t.equal((await csm.get('/v1/health/model')).status, 200, 'a csm may read the model');
  t.equal((await viewer.get(`/v1/customers/${id}/health`)).status, 200, 'a viewer may read scores');
  t.equal((await viewer.get(`/v1/customers/${id}/health/history`)).status, 200);
  isProblem(t, await viewer.post(`/v1/customers/${id}/health/recalculate`), 403, 'insufficient_scope');

  for (const [method, path] of [
    ['GET', '/v1/health/model'],
    ['PATCH', '/v1/health/model'],
    ['GET', `/v1/customers/${id}/health`],
    ['GET', `/v1/customers/${id}/health/history`],
    ['POST', `/v1/customers/${id}/health/recalculate`],
  ]) {
    const r =
      method === 'GET'
        ? await noHealth.get(path)
        : method === 'POST'
          ? await noHealth.post(path)
          : await noHealth.patch(path, { weights: { breadth: 1 } });
    isProblem(t, r, 403, 'insufficient_scope');
    t.match(r.body.detail, /health:(read|write)/, `${method} ${path}: detail names the scope`);
  }
  t.same((await admin.get('/v1/health/model')).body.weights, DEFAULT_MODEL.weights, 'nothing changed');
});

t.test('current health: never scored, scored, customer detail and the health_status filter', async (t) => {
  const w = await bootstrap();
  const c = client(api.url, w.api_key);
  const healthy = await customer(w, 'Healthy Co');
  const risky = await customer(w, 'Risky Co');
  const fresh = await customer(w, 'Fresh Co');

  const u = await c.get(`/v1/customers/${fresh}/health`);
  t.equal(u.status, 200);
  t.same(u.body, {
    customer_id: fresh,
    score: null,
    status: null,
    calculated_at: null,
    dimensions: DEFAULT_MODEL.active_dimensions.map((k, i) => ({
      key: k,
      active: k !== 'key_events',
      weight: DEFAULT_MODEL.weights[k as keyof typeof DEFAULT_MODEL.weights],
      score: null,
      value: null,
      unit: UNITS[i],
    })),
  });
  t.ok(u.headers.get('x-ratelimit-reset'), 'rate-limit headers');

  await c.patch('/v1/health/model', {
    weights: { breadth: 0.4 },
    active_dimensions: ['breadth', 'key_events'],
    key_events: { positive: ['report_exported'] },
  });
  const m = await c.get(`/v1/customers/${fresh}/health`);
  t.same(
    m.body.dimensions.map((x: { key: string; active: boolean; weight: number }) => [x.key, x.active, x.weight]),
    [
      ['usage_frequency', false, 0.25],
      ['breadth', true, 0.4],
      ['active_users', false, 0.2],
      ['key_events', true, 0.15],
      ['payment_health', false, 0.25],
    ],
    'an unscored breakdown follows the current model; key_events active once an event is flagged',
  );

  const at = new Date(Date.now() - 60_000);
  await scored(w.tenant_id, healthy, 82, 'healthy', at);
  await scored(w.tenant_id, risky, 21, 'at_risk', at);
  const h = await c.get(`/v1/customers/${healthy}/health`);
  t.same(h.body, {
    customer_id: healthy,
    score: 82,
    status: 'healthy',
    calculated_at: at.toISOString(),
    dimensions: breakdown(82),
  });

  const detail = await c.get(`/v1/customers/${healthy}`);
  t.same(detail.body.health, { score: 82, status: 'healthy', calculated_at: at.toISOString() });
  t.equal(detail.body.health_status, 'healthy');
  t.equal((await c.get(`/v1/customers/${fresh}`)).body.health, null, 'never scored: health null');

  const ids = async (q: string) =>
    (await c.get(`/v1/customers?health_status=${q}`)).body.data.map((x: { id: string }) => x.id).sort();
  t.same(await ids('healthy'), [healthy]);
  t.same(await ids('healthy,at_risk'), [healthy, risky].sort());
  t.same(await ids('neutral'), [], 'customers never scored match none');
  t.same(await ids('healthy,neutral,at_risk'), [healthy, risky].sort(), 'unscored match none of the three');
  const all = (await c.get('/v1/customers')).body.data as Array<{ id: string; health_status: string | null }>;
  t.same(
    Object.fromEntries(all.map((x) => [x.id, x.health_status])),
    { [healthy]: 'healthy', [risky]: 'at_risk', [fresh]: null },
    'list items carry the current status',
  );
  fieldOf(t, await c.get('/v1/customers?health_status=great'), 'health_status', 'unknown status');

  const patched = await c.patch(`/v1/customers/${healthy}`, { arr: 5000 });
  t.equal(patched.body.health_status, 'healthy', 'a PATCH answer carries the current status');
});

t.test('history: daily and weekly, oldest first, last calculation wins, default 90 days', async (t) => {
  const w = await bootstrap();
  const c = client(api.url, w.api_key);
  const x = await customer(w, 'Daily Co');
  const y = await customer(w, 'Weekly Co');
  const none = await customer(w, 'Quiet Co');

  const d2 = addDays(today, -2);
  await historyRows(w.tenant_id, x, [{ day: d2, time: '20:00:00', score: 75, status: 'healthy' }]);
  await historyRows(w.tenant_id, x, [
    { day: d2, time: '08:00:00', score: 30, status: 'at_risk' },
    { day: addDays(today, -89), time: '12:00:00', score: 50, status: 'neutral' },
    { day: addDays(today, -90), time: '12:00:00', score: 10, status: 'at_risk' },
  ]);

  const def = await c.get(`/v1/customers/${x}/health/history`);
  t.equal(def.status, 200, def.text);
  t.same(def.body, {
    customer_id: x,
    granularity: 'daily',
    from: addDays(today, -89),
    to: today,
    data: [
      { date: addDays(today, -89), score: 50, status: 'neutral' },
      { date: d2, score: 75, status: 'healthy' },
    ],
  });
  t.ok(def.headers.get('x-ratelimit-limit'), 'rate-limit headers');

  const wide = await c.get(`/v1/customers/${x}/health/history?from=${addDays(today, -90)}&to=${d2}&granularity=daily`);
  t.same(
    wide.body.data.map((p: { date: string; score: number }) => [p.date, p.score]),
    [
      [addDays(today, -90), 10],
      [addDays(today, -89), 50],
      [d2, 75],
    ],
    'explicit range, both ends included',
  );
  // 23:00 at UTC−2 is 01:00 UTC of the next day.
  const to = encodeURIComponent(`${d2}T10:00:00+00:00`);
  const dt = await c.get(`/v1/customers/${x}/health/history?from=${addDays(today, -90)}T23:00:00-02:00&to=${to}`);
  t.equal(dt.status, 200, dt.text);
  t.equal(dt.body.from, addDays(today, -89), 'a date-time counts as its UTC date');
  t.equal(dt.body.data.length, 2);
  const early = await c.get(`/v1/customers/${x}/health/history?to=${addDays(today, -60)}`);
  t.same([early.body.from, early.body.to], [addDays(today, -149), addDays(today, -60)], '90 days ending at to');
  t.same(
    early.body.data.map((p: { date: string }) => p.date),
    [addDays(today, -90), addDays(today, -89)],
  );

  // Weekly: ISO weeks from Monday, dated by the Monday, the week's last calculation.
  const back = new Date(Date.parse(`${addDays(today, -21)}T00:00:00Z`));
  const monday = addDays(addDays(today, -21), -((back.getUTCDay() + 6) % 7));
  await historyRows(w.tenant_id, y, [
    { day: monday, time: '10:00:00', score: 40, status: 'neutral' },
    { day: addDays(monday, 6), time: '09:00:00', score: 60, status: 'neutral' },
    { day: addDays(monday, 7), time: '09:00:00', score: 65, status: 'neutral' },
    { day: addDays(monday, 9), time: '10:00:00', score: 72, status: 'healthy' },
  ]);
  await historyRows(w.tenant_id, y, [{ day: addDays(monday, 9), time: '09:00:00', score: 20, status: 'at_risk' }]);
  const weekly = await c.get(
    `/v1/customers/${y}/health/history?granularity=weekly&from=${monday}&to=${addDays(monday, 13)}`,
  );
  t.equal(weekly.status, 200, weekly.text);
  t.same(weekly.body, {
    customer_id: y,
    granularity: 'weekly',
    from: monday,
    to: addDays(monday, 13),
    data: [
      { date: monday, score: 60, status: 'neutral' },
      { date: addDays(monday, 7), score: 72, status: 'healthy' },
    ],
  });
  const daily = await c.get(`/v1/customers/${y}/health/history?from=${monday}&to=${addDays(monday, 13)}`);
  t.same(
    daily.body.data.map((p: { date: string; score: number }) => [p.date, p.score]),
    [
      [monday, 40],
      [addDays(monday, 6), 60],
      [addDays(monday, 7), 65],
      [addDays(monday, 9), 72],
    ],
  );
  const partial = await c.get(
    `/v1/customers/${y}/health/history?granularity=weekly&from=${addDays(monday, 1)}&to=${addDays(monday, 7)}`,
  );
  t.same(
    partial.body.data,
    [
      { date: monday, score: 60, status: 'neutral' },
      { date: addDays(monday, 7), score: 65, status: 'neutral' },
    ],
    'only days inside the range count; a week is still dated by its Monday',
  );

  t.same((await c.get(`/v1/customers/${none}/health/history`)).body.data, [], 'no calculation yet: no points');
  t.same(
    (await c.get(`/v1/customers/${x}/health/history?from=${addDays(today, -730)}&to=${today}`)).status,
    200,
    '731 days is the longest range',
  );
});

t.test('history: 400 naming the parameter', async (t) => {
  const id = await customer(ws, 'Range Co');
  const h = (q: string) => admin.get(`/v1/customers/${id}/health/history?${q}`);
  fieldOf(t, await h('from=yesterday'), 'from', 'unparsable from');
  fieldOf(t, await h('to=2026-02-30'), 'to', 'impossible date');
  fieldOf(t, await h('to=2026-13-01'), 'to', 'month 13');
  fieldOf(t, await h('from=2026-01-01T25:00:00Z'), 'from', 'hour 25');
  fieldOf(t, await h('from=2026-03-02&to=2026-03-01'), 'from', 'from after to');
  fieldOf(t, await h(`from=${addDays(today, 1)}`), 'from', 'from after the default to (today)');
  fieldOf(t, await h('granularity=monthly'), 'granularity', 'unknown granularity');
  fieldOf(t, await h(`from=${addDays(today, -731)}&to=${today}`), 'from', 'a range over 731 days');
  fieldOf(t, await h('from=2020-01-01'), 'from', 'a range over two years ending today');
  fieldOf(t, await h('since=2026-01-01'), 'since', 'unknown parameter');
});

t.test("another workspace's, a deleted or a malformed customer: 404 on every customer route", async (t) => {
  const mine = await customer(ws, 'Mine Co');
  await scored(ws.tenant_id, mine, 90, 'healthy');
  const o = client(api.url, other.api_key);
  for (const path of [`/v1/customers/${mine}/health`, `/v1/customers/${mine}/health/history`]) {
    isProblem(t, await o.get(path), 404, 'not_found');
    t.equal((await admin.get(path)).status, 200, `${path} answers its own workspace`);
  }
  isProblem(t, await o.post(`/v1/customers/${mine}/health/recalculate`), 404, 'not_found');

  const gone = await customer(ws, 'Gone Co');
  await scored(ws.tenant_id, gone, 50, 'neutral');
  t.equal((await admin.del(`/v1/customers/${gone}`)).status, 204);
  isProblem(t, await admin.get(`/v1/customers/${gone}/health`), 404, 'not_found');
  isProblem(t, await admin.get(`/v1/customers/${gone}/health/history`), 404, 'not_found');
  isProblem(t, await admin.post(`/v1/customers/${gone}/health/recalculate`), 404, 'not_found');
  for (const id of ['not-a-uuid', randomUuid()]) {
    isProblem(t, await admin.get(`/v1/customers/${id}/health`), 404, 'not_found');
    isProblem(t, await admin.get(`/v1/customers/${id}/health/history`), 404, 'not_found');
    isProblem(t, await admin.post(`/v1/customers/${id}/health/recalculate`), 404, 'not_found');
  }
});

t.test('OpenAPI: the health operations, their curves and decisions', async (t) => {
  const doc = (await admin.get('/v1/openapi.json')).body;
  const ops = doc.paths as Record<string, Record<string, { description: string; tags: string[] }>>;
  for (const [path, method] of [
    ['/v1/customers/{id}/health', 'get'],
    ['/v1/customers/{id}/health/history', 'get'],
    ['/v1/customers/{id}/health/recalculate', 'post'],
    ['/v1/health/model', 'get'],
    ['/v1/health/model', 'patch'],
  ])
    t.same(ops[path]?.[method]?.tags, ['Health'], `${method.toUpperCase()} ${path}`);
  const text = JSON.stringify(doc);
  for (const want of ['min(100, round(value ÷ 5 × 100))', 'clamp(50 + 10 × value, 0, 100)', 'two years'])
    t.ok(text.includes(want), `documents ${want}`);
  t.equal(doc['x-error-codes'].scorer_unavailable.status, 503);
});

// Recalculation and outages against a core-api of its own: a private NATS server (so no scorer of
// another test answers) and a ClickHouse address nothing listens on.
const { url: privateNatsUrl } = await privateNats(t);
const isolated = await startApi(t, {
  NATS_URL: privateNatsUrl,
  CLICKHOUSE_URL: `http://127.0.0.1:${await freePort()}`,
  HEALTH_RECALC_TIMEOUT_MS: '1500',
  HEALTH_HISTORY_TIMEOUT_MS: '1000',
});
const nc = await connect({ servers: privateNatsUrl });
t.teardown(() => nc.close());
const iso = client(isolated.url, ws.api_key);

function scorerUnavailable(t: Test, r: Res) {
  isProblem(t, r, 503, 'scorer_unavailable');
  t.equal(r.headers.get('retry-after'), '10', 'Retry-After: 10');
  t.ok(r.headers.get('x-ratelimit-limit'), 'rate-limit headers');
}

t.test('recalculate: no scorer, a silent one, a failing one → 503 scorer_unavailable', async (t) => {
  const id = await customer(ws, 'Recalc Co');
  await scored(ws.tenant_id, id, 55, 'neutral');
  scorerUnavailable(t, await iso.post(`/v1/customers/${id}/health/recalculate`));

  const silent = nc.subscribe(subjects.healthRecalculate, { queue: 'health-scorer' });
  await nc.flush();
  const started = Date.now();
  scorerUnavailable(t, await iso.post(`/v1/customers/${id}/health/recalculate`));
  t.ok(Date.now() - started >= 1400, 'waited HEALTH_RECALC_TIMEOUT_MS');
  silent.unsubscribe();

  const failing = nc.subscribe(subjects.healthRecalculate, {
    queue: 'health-scorer',
    callback: (_e, m) => m.respond(JSON.stringify({ ok: false, error: 'ClickHouse unavailable' })),
  });
  await nc.flush();
  scorerUnavailable(t, await iso.post(`/v1/customers/${id}/health/recalculate`));
  failing.unsubscribe();
  await nc.flush();
  const h = await iso.get(`/v1/customers/${id}/health`);
  t.same([h.body.score, h.body.status], [55, 'neutral'], 'the stored score is unchanged');
});

t.test('recalculate: the scorer replies after writing, the answer is the new score', async (t) => {
  const id = await customer(ws, 'Rescored Co');
  await scored(ws.tenant_id, id, 55, 'neutral', new Date(Date.now() - 3600_000));
  const requests: unknown[] = [];
  const scorer = nc.subscribe(subjects.healthRecalculate, {
    queue: 'health-scorer',
    callback: (_e, m) => {
      const req = JSON.parse(m.string()) as { tenant_id: string; customer_id: string };
      requests.push(req);
      scored(req.tenant_id, req.customer_id, 77, 'healthy').then(
        () => m.respond(JSON.stringify({ ok: true })),
        (err: unknown) => m.respond(JSON.stringify({ ok: false, error: String(err) })),
      );
    },
  });
  t.teardown(() => scorer.unsubscribe());
  await nc.flush();
  const before = Date.now();
  const r = await iso.post(`/v1/customers/${id}/health/recalculate`);
  t.equal(r.status, 200, r.text);
  t.same(requests, [{ tenant_id: ws.tenant_id, customer_id: id }], 'one request {tenant_id, customer_id}');
  t.match(r.body, { customer_id: id, score: 77, status: 'healthy', dimensions: breakdown(77) });
  t.ok(Date.parse(r.body.calculated_at) >= before - 5000, 'calculated now');
  t.same(r.body, (await iso.get(`/v1/customers/${id}/health`)).body, 'the same body as GET');
  t.ok(r.headers.get('x-ratelimit-limit'), 'rate-limit headers');
});

t.test('history: ClickHouse unreachable → 503 with Retry-After', async (t) => {
  const id = await customer(ws, 'Outage Co');
  const r = await iso.get(`/v1/customers/${id}/health/history`);
  isProblem(t, r, 503, 'service_unavailable');
  t.ok(Number(r.headers.get('retry-after')) > 0, 'Retry-After');
  t.notMatch(r.text, /ClickHouse|ECONNREFUSED|fetch failed/i, 'no internals leak');
  t.equal((await iso.get(`/v1/customers/${id}/health`)).status, 200, 'the current score does not need ClickHouse');
});
