import t from '#tap';
import { bootstrap, closeDb, db, urls, type Workspace } from '../helpers/stack.js';
import { client, isProblem, randomUuid, sharedApi } from '../core-api/_helpers.js';

// The metrics library's endpoints over HTTP: scopes and roles, every definition rule, PATCH and
// DELETE, the event catalog, usage widgets and proposals. Catalog names are written where the
// processors write them (event_catalog) and events straight into csp.events; the values of
// metrics over events sent through ingestion are in values.test.ts.
t.teardown(closeDb);
const api = await sharedApi(t);
const ws = await bootstrap();
const other = await bootstrap();
const admin = client(api.url, ws.api_key);

async function known(w: Workspace, ...names: string[]) {
  for (const n of names)
    await db()`INSERT INTO event_catalog (tenant_id, event_name) VALUES (${w.tenant_id}, ${n}) ON CONFLICT DO NOTHING`;
}

async function key(w: Workspace, role: string, scopes: string[]): Promise<{ key: string; scopes: string[] }> {
  const r = await client(api.url, w.api_key).post('/v1/api-keys', { name: `${role} key`, role, scopes });
  if (r.status !== 201) throw new Error(`${r.status} ${r.text}`);
  return { key: r.body.key, scopes: r.body.scopes };
}

/** Events written as the sink writes them (JSONEachRow into csp.events). */
async function stored(tenantId: string, rows: Array<{ name: string; ts: string; props: Record<string, string> }>) {
  const body = rows
    .map((r) =>
      JSON.stringify({
        tenant_id: tenantId,
        customer_id: randomUuid(),
        event_name: r.name,
        ts: r.ts,
        ts_ms: 0,
        event_id: randomUuid(),
        batch_id: randomUuid(),
        received_at: r.ts,
        surface: 'a',
        properties: JSON.stringify(r.props),
        prop_keys: Object.keys(r.props),
        prop_values: Object.values(r.props),
      }),
    )
    .join('\n');
  const q = encodeURIComponent('INSERT INTO csp.events FORMAT JSONEachRow');
  const res = await fetch(`${urls.CLICKHOUSE_URL}/?query=${q}`, { method: 'POST', body });
  if (!res.ok) throw new Error(`ClickHouse: ${await res.text()}`);
}

const base = {
  name: 'Reports exported',
  source_event: 'report_exported',
  calculation: 'count',
  window: { type: 'rolling', days: 30 },
  grain: 'customer',
};

await known(ws, 'report_exported', 'order_placed', 'login');

t.test('create: the metric as answered and stored, slug from the name', async (t) => {
  const r = await admin.post('/v1/metrics', {
    ...base,
    name: 'Exports (PDF & CSV), 30 days',
    description: 'Exports by format',
    filter: [{ field: 'properties.format', op: 'in', value: ['pdf', 'csv'] }],
    unit: 'reports',
  });
  t.equal(r.status, 201, r.text);
  t.match(r.body, {
    id: /^[0-9a-f-]{36}$/,
    slug: 'exports_pdf_csv_30_days',
    name: 'Exports (PDF & CSV), 30 days',
    description: 'Exports by format',
    source_event: 'report_exported',
    calculation: 'count',
    target_property: null,
    filter: [{ field: 'properties.format', op: 'in', value: ['pdf', 'csv'] }],
    window: { type: 'rolling', days: 30 },
    grain: 'customer',
    unit: 'reports',
    status: 'active',
    consumers: { objectives: 0, health_drivers: 0, playbook_triggers: 0 },
  });
  t.equal(r.body.created_at, r.body.updated_at);
  t.same((await admin.get(`/v1/metrics/${r.body.id}`)).body, r.body, 'GET answers the same');
  const s = await admin.post('/v1/metrics', {
    ...base,
    name: 'Order total',
    slug: 'order_total',
    source_event: 'order_placed',
    calculation: 'sum',
    target_property: 'amount',
    window: { type: 'calendar', unit: 'quarter' },
    grain: 'portfolio',
  });
  t.equal(s.status, 201, s.text);
  t.match(s.body, { slug: 'order_total', target_property: 'amount', grain: 'portfolio', unit: null });
});

t.test('every rule answers with errors[] naming the field', async (t) => {
  const cases: Array<[string, Record<string, unknown>, number, string, string]> = [
    ['unknown event', { source_event: 'never_sent' }, 422, 'unknown_event', 'source_event'],
    ['sum without target', { calculation: 'sum' }, 400, 'validation_failed', 'target_property'],
    ['avg without target', { calculation: 'avg' }, 400, 'validation_failed', 'target_property'],
    ['max without target', { calculation: 'max' }, 400, 'validation_failed', 'target_property'],
    ['distinct without target', { calculation: 'distinct_count' }, 400, 'validation_failed', 'target_property'],
    ['calculation outside the seven', { calculation: 'median' }, 400, 'validation_failed', 'calculation'],
    [
      'filter op outside the eight',
      { filter: [{ field: 'user_id', op: 'like', value: 'x' }] },
      400,
      'validation_failed',
      'filter[0].op',
    ],
    [
      'filter field neither properties.<name> nor an event field',
      { filter: [{ field: 'plan', op: 'eq', value: 'x' }] },
      400,
      'validation_failed',
      'filter[0].field',
    ],
    [
      'in without an array',
      { filter: [{ field: 'properties.plan', op: 'in', value: 'pro' }] },
      400,
      'validation_failed',
      'filter[0].value',
    ],
    [
      'gt without a number',
      { filter: [{ field: 'properties.n', op: 'gt', value: 'ten' }] },
      400,
      'validation_failed',
      'filter[0].value',
    ],
    ['window days 0', { window: { type: 'rolling', days: 0 } }, 400, 'validation_failed', 'window.days'],
    ['window days 366', { window: { type: 'rolling', days: 366 } }, 400, 'validation_failed', 'window.days'],
    ['rolling without days', { window: { type: 'rolling' } }, 400, 'validation_failed', 'window.days'],
    ['calendar year', { window: { type: 'calendar', unit: 'year' } }, 400, 'validation_failed', 'window.unit'],
    ['window type', { window: { type: 'sliding', days: 3 } }, 400, 'validation_failed', 'window.type'],
    ['grain', { grain: 'user' }, 400, 'validation_failed', 'grain'],
    ['slug format', { slug: 'Not A Slug' }, 400, 'validation_failed', 'slug'],
    ['unknown field', { colour: 'red' }, 400, 'validation_failed', 'colour'],
  ];
  for (const [what, patch, status, code, field] of cases) {
    const r = await admin.post('/v1/metrics', { ...base, ...patch });
    isProblem(t, r, status, code);
    t.ok(
      r.body.errors?.some((e: { field: string }) => e.field === field),
      `${what}: errors[] names ${field} (${JSON.stringify(r.body.errors)})`,
    );
  }
  const missing = await admin.post('/v1/metrics', { calculation: 'count' });
  isProblem(t, missing, 400, 'validation_failed');
  for (const f of ['name', 'source_event', 'window', 'grain'])
    t.ok(
      missing.body.errors.some((e: { field: string; code: string }) => e.field === f && e.code === 'required'),
      f,
    );
  t.equal((await admin.get('/v1/metrics?limit=200')).body.data.filter((m: any) => m.name === base.name).length, 0);
});

t.test('slug: unique in the workspace (409), free in another; fixed after creation', async (t) => {
  const a = await admin.post('/v1/metrics', { ...base, name: 'Logins', source_event: 'login' });
  t.equal(a.status, 201, a.text);
  const again = await admin.post('/v1/metrics', { ...base, name: 'logins!', source_event: 'login' });
  isProblem(t, again, 409, 'slug_taken');
  t.same(
    again.body.errors.map((e: any) => [e.field, e.code]),
    [['slug', 'slug_taken']],
  );
  await known(other, 'login');
  const elsewhere = await client(api.url, other.api_key).post('/v1/metrics', {
    ...base,
    name: 'Logins',
    source_event: 'login',
  });
  t.equal(elsewhere.status, 201, 'the same slug in another workspace');
  const renamed = await admin.patch(`/v1/metrics/${a.body.id}`, { name: 'Sign-ins', unit: 'logins', description: 'd' });
  t.equal(renamed.status, 200, renamed.text);
  t.match(renamed.body, { name: 'Sign-ins', unit: 'logins', description: 'd', slug: 'logins' });
  t.ok(renamed.body.updated_at > a.body.updated_at, 'updated_at moves');
  const cleared = await admin.patch(`/v1/metrics/${a.body.id}`, { description: null });
  t.equal(cleared.body.description, null);
  for (const field of ['slug', 'source_event', 'calculation', 'target_property', 'filter', 'window', 'grain']) {
    const r = await admin.patch(`/v1/metrics/${a.body.id}`, { name: 'x', [field]: null });
    isProblem(t, r, 422, 'immutable_field');
    t.same(
      r.body.errors.map((e: any) => [e.field, e.code]),
      [[field, 'immutable_field']],
      field,
    );
  }
  t.equal((await admin.get(`/v1/metrics/${a.body.id}`)).body.name, 'Sign-ins', 'nothing changed');
  isProblem(t, await admin.patch(`/v1/metrics/${a.body.id}`, {}), 400, 'validation_failed');
});

t.test('list: cursor pages, oldest first; delete hides, include_deleted shows, GET keeps it', async (t) => {
  const w = await bootstrap();
  await known(w, 'login');
  const c = client(api.url, w.api_key);
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const r = await c.post('/v1/metrics', { ...base, name: `Metric ${i}`, source_event: 'login' });
    ids.push(r.body.id);
  }
  const seen: string[] = [];
  let cursor = '';
  for (;;) {
    const r = await c.get(`/v1/metrics?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(r.status, 200, r.text);
    seen.push(...r.body.data.map((m: any) => m.id));
    if (!r.body.has_more) break;
    cursor = r.body.next_cursor;
  }
  t.same(seen, ids, 'every metric once, in creation order');
  const del = await c.del(`/v1/metrics/${ids[1]}`);
  t.equal(del.status, 204, del.text);
  t.equal((await c.del(`/v1/metrics/${ids[1]}`)).status, 204, 'deleting again changes nothing');
  const gone = await c.get(`/v1/metrics/${ids[1]}`);
  t.equal(gone.status, 200);
  t.equal(gone.body.status, 'deleted');
  t.same(
    (await c.get('/v1/metrics')).body.data.map((m: any) => m.id),
    ids.filter((_, i) => i !== 1),
  );
  t.same(
    (await c.get('/v1/metrics?include_deleted=true')).body.data.map((m: any) => m.id),
    ids,
  );
  isProblem(t, await c.patch(`/v1/metrics/${ids[1]}`, { name: 'late' }), 409, 'conflict');
  const reuse = await c.post('/v1/metrics', { ...base, name: 'Metric 1', source_event: 'login' });
  isProblem(t, reuse, 409, 'slug_taken');
  isProblem(t, await c.get('/v1/metrics?cursor=nonsense'), 400, 'invalid_cursor');
});

t.test('another workspace and unknown ids: 404, nothing changes', async (t) => {
  const mine = await admin.post('/v1/metrics', { ...base, name: 'Private one' });
  const theirs = client(api.url, other.api_key);
  for (const r of [
    await theirs.get(`/v1/metrics/${mine.body.id}`),
    await theirs.patch(`/v1/metrics/${mine.body.id}`, { name: 'stolen' }),
    await theirs.del(`/v1/metrics/${mine.body.id}`),
    await admin.get(`/v1/metrics/${randomUuid()}`),
    await admin.get('/v1/metrics/not-a-uuid'),
  ])
    isProblem(t, r, 404, 'not_found');
  t.match((await admin.get(`/v1/metrics/${mine.body.id}`)).body, { name: 'Private one', status: 'active' });
});

t.test('scopes and roles: admins write; csm and viewer read; metrics:write is never a csm scope', async (t) => {
  const refused = await admin.post('/v1/api-keys', { name: 'csm', role: 'csm', scopes: ['metrics:write'] });
  isProblem(t, refused, 400, 'validation_failed');
  t.same(
    refused.body.errors.map((e: any) => [e.field, e.code]),
    [['scopes', 'not_allowed_for_role']],
  );
  const csm = await key(ws, 'csm', ['metrics:read']);
  const viewer = await key(ws, 'viewer', ['metrics:read', 'events:read']);
  const readOnlyAdmin = await key(ws, 'admin', ['metrics:read']);
  const noMetrics = await key(ws, 'admin', ['customers:read']);
  const m = await admin.post('/v1/metrics', { ...base, name: 'Scoped' });
  for (const k of [csm, viewer, readOnlyAdmin]) {
    const c = client(api.url, k.key);
    t.equal((await c.get('/v1/metrics')).status, 200);
    t.equal((await c.get(`/v1/metrics/${m.body.id}`)).status, 200);
    const w = await c.post('/v1/metrics', { ...base, name: 'Not allowed' });
    isProblem(t, w, 403, 'insufficient_scope');
    isProblem(t, await c.patch(`/v1/metrics/${m.body.id}`, { name: 'x' }), 403, 'insufficient_scope');
    isProblem(t, await c.del(`/v1/metrics/${m.body.id}`), 403, 'insufficient_scope');
    isProblem(t, await c.post('/v1/metrics/proposals', { description: 'count logins' }), 403, 'insufficient_scope');
    isProblem(
      t,
      await c.post('/v1/usage-widgets', { name: 'w', aggregation: 'count', period: '7d' }),
      403,
      'insufficient_scope',
    );
  }
  isProblem(t, await client(api.url, noMetrics.key).get('/v1/metrics'), 403, 'insufficient_scope');
  const doc = (await admin.get('/v1/openapi.json')).body;
  t.ok(doc.paths['/v1/metrics'].post, 'in the OpenAPI document');
  t.ok(doc.paths['/v1/event-catalog'].get);
  t.equal(doc['x-error-codes'].metric_in_use.status, 409);
  t.equal(doc['x-error-codes'].unknown_event.status, 422);
});

t.test('event catalog: names from the catalog, last_seen_at and keys by frequency, pages', async (t) => {
  const w = await bootstrap();
  await known(w, 'b_event', 'a_event', 'c_event');
  await stored(w.tenant_id, [
    { name: 'a_event', ts: '2026-01-02 03:04:05', props: { plan: 'pro', seats: '3' } },
    { name: 'a_event', ts: '2026-01-05 00:00:00', props: { plan: 'basic' } },
    { name: 'a_event', ts: '2026-01-01 00:00:00', props: { plan: 'x', zeta: '1', alpha: '2' } },
    { name: 'b_event', ts: '2026-02-01 00:00:00', props: {} },
  ]);
  const c = client(api.url, w.api_key);
  const r = await c.get('/v1/event-catalog');
  t.equal(r.status, 200, r.text);
  t.same(
    r.body.data.map((e: any) => [e.event_name, e.last_seen_at, e.property_keys]),
    [
      ['a_event', '2026-01-05T00:00:00.000Z', ['plan', 'alpha', 'seats', 'zeta']],
      ['b_event', '2026-02-01T00:00:00.000Z', []],
      ['c_event', null, []],
    ],
  );
  t.ok(
    r.body.data.every((e: any) => Date.parse(e.first_seen_at) > 0),
    'first_seen_at',
  );
  const p1 = await c.get('/v1/event-catalog?limit=2');
  t.same(
    p1.body.data.map((e: any) => e.event_name),
    ['a_event', 'b_event'],
  );
  t.equal(p1.body.has_more, true);
  const p2 = await c.get(`/v1/event-catalog?limit=2&cursor=${p1.body.next_cursor}`);
  t.same(
    p2.body.data.map((e: any) => e.event_name),
    ['c_event'],
  );
  t.equal(p2.body.has_more, false);
  const analytics = await key(w, 'viewer', ['analytics:read']);
  t.equal((await client(api.url, analytics.key).get('/v1/event-catalog')).status, 200, 'analytics:read suffices');
  const none = await key(w, 'viewer', ['customers:read']);
  isProblem(t, await client(api.url, none.key).get('/v1/event-catalog'), 403, 'insufficient_scope');
  t.equal(
    (await client(api.url, other.api_key).get('/v1/event-catalog')).body.data.some(
      (e: any) => e.event_name === 'a_event',
    ),
    false,
  );
});

t.test('event catalog: key counts kept from before the key sets exist add to the new ones', async (t) => {
  const w = await bootstrap();
  await known(w, 'a_event');
  await stored(w.tenant_id, [
    { name: 'a_event', ts: '2026-01-02 00:00:00', props: { plan: 'pro', seats: '3' } },
    { name: 'a_event', ts: '2026-01-03 00:00:00', props: { plan: 'basic', seats: '1' } },
    { name: 'a_event', ts: '2026-01-04 00:00:00', props: { plan: 'basic' } },
  ]);
  // Per-key counts as an installation's earlier view wrote them, for events stored before.
  const q = encodeURIComponent('INSERT INTO csp.event_property_keys FORMAT JSONEachRow');
  const before = [
    { key: 'legacy', events: 5 },
    { key: 'seats', events: 2 },
  ].map((r) => JSON.stringify({ tenant_id: w.tenant_id, event_name: 'a_event', ...r }));
  t.ok((await fetch(`${urls.CLICKHOUSE_URL}/?query=${q}`, { method: 'POST', body: before.join('\n') })).ok);
  const r = await client(api.url, w.api_key).get('/v1/event-catalog');
  t.same(
    r.body.data.map((e: any) => [e.event_name, e.property_keys]),
    [['a_event', ['legacy', 'seats', 'plan']]],
    'legacy 5; seats 2 before + 2 since; plan 3 since',
  );
});

t.test('usage widgets: 8 per workspace, the 9th 409; delete; unknown event 422; isolation', async (t) => {
  const w = await bootstrap();
  await known(w, 'login');
  const c = client(api.url, w.api_key);
  const created = await Promise.all(
    Array.from({ length: 9 }, (_, i) =>
      c.post('/v1/usage-widgets', { name: `W${i}`, event_name: 'login', aggregation: 'count', period: '7d' }),
    ),
  );
  t.equal(created.filter((r) => r.status === 201).length, 8, 'eight created, even concurrently');
  const refused = created.find((r) => r.status !== 201)!;
  isProblem(t, refused, 409, 'widget_limit_reached');
  const list = await c.get('/v1/usage-widgets');
  t.equal(list.body.data.length, 8);
  t.match(list.body.data[0], { id: /^[0-9a-f-]{36}$/, event_name: 'login', aggregation: 'count', period: '7d' });
  const id = list.body.data[0].id;
  isProblem(t, await client(api.url, other.api_key).del(`/v1/usage-widgets/${id}`), 404, 'not_found');
  t.equal((await c.del(`/v1/usage-widgets/${id}`)).status, 204);
  isProblem(t, await c.del(`/v1/usage-widgets/${id}`), 404, 'not_found');
  const unknown = await c.post('/v1/usage-widgets', {
    name: 'x',
    event_name: 'nope',
    aggregation: 'count',
    period: '7d',
  });
  isProblem(t, unknown, 422, 'unknown_event');
  t.same(
    unknown.body.errors.map((e: any) => e.field),
    ['event_name'],
  );
  isProblem(
    t,
    await c.post('/v1/usage-widgets', { name: 'x', aggregation: 'sum', period: '7d' }),
    400,
    'validation_failed',
  );
  isProblem(
    t,
    await c.post('/v1/usage-widgets', { name: 'x', aggregation: 'count', period: '14d' }),
    400,
    'validation_failed',
  );
  const all = await c.post('/v1/usage-widgets', { name: 'All usage', aggregation: 'frequency', period: '30d' });
  t.equal(all.status, 201, 'the ninth fits again, without event_name');
  t.equal(all.body.event_name, null);
  const cust = await c.post('/v1/customers', { name: 'Quiet Co' });
  const v = await c.get(`/v1/usage-widgets/${all.body.id}/value?customer_id=${cust.body.id}`);
  t.equal(v.status, 200, v.text);
  t.match(v.body, { widget_id: all.body.id, customer_id: cust.body.id, value: 0 });
  isProblem(t, await c.get(`/v1/usage-widgets/${all.body.id}/value?customer_id=${randomUuid()}`), 404, 'not_found');
  isProblem(t, await c.get(`/v1/usage-widgets/${all.body.id}/value`), 400, 'validation_failed');
});

t.test('proposals: parsed against the catalog, accepted once, rejected once', async (t) => {
  const w = await bootstrap();
  await known(w, 'report_exported', 'order_placed');
  await stored(w.tenant_id, [
    { name: 'order_placed', ts: '2026-01-02 03:04:05', props: { order_value: '3', plan: 'pro' } },
  ]);
  const c = client(api.url, w.api_key);
  const p = await c.post('/v1/metrics/proposals', {
    description: 'Total order value per customer over the last 7 days where plan is pro',
  });
  t.equal(p.status, 201, p.text);
  t.match(p.body, {
    id: /^[0-9a-f-]{36}$/,
    status: 'proposed',
    description: 'Total order value per customer over the last 7 days where plan is pro',
    proposal: {
      source_event: 'order_placed',
      calculation: 'sum',
      target_property: 'order_value',
      filter: [{ field: 'properties.plan', op: 'eq', value: 'pro' }],
      window: { type: 'rolling', days: 7 },
      grain: 'customer',
    },
    validation: { valid: true, errors: [] },
    metric_id: null,
  });
  t.ok(p.body.proposal.confidence > 0.5 && p.body.proposal.confidence <= 1);
  t.same((await c.get(`/v1/metrics/proposals/${p.body.id}`)).body, p.body);
  const accepted = await c.post(`/v1/metrics/proposals/${p.body.id}/accept`, { name: 'Pro order value', unit: 'USD' });
  t.equal(accepted.status, 201, accepted.text);
  t.match(accepted.body, {
    name: 'Pro order value',
    slug: 'pro_order_value',
    unit: 'USD',
    source_event: 'order_placed',
    calculation: 'sum',
    target_property: 'order_value',
    status: 'active',
  });
  t.match((await c.get(`/v1/metrics/proposals/${p.body.id}`)).body, {
    status: 'accepted',
    metric_id: accepted.body.id,
  });
  isProblem(t, await c.post(`/v1/metrics/proposals/${p.body.id}/accept`, {}), 409, 'proposal_closed');
  isProblem(t, await c.post(`/v1/metrics/proposals/${p.body.id}/reject`), 409, 'proposal_closed');

  const unknown = await c.post('/v1/metrics/proposals', { description: 'number of widgets created this month' });
  t.equal(unknown.status, 201);
  t.match(unknown.body.proposal, { source_event: 'widget_created', calculation: 'count' });
  t.equal(unknown.body.validation.valid, false);
  t.same(
    unknown.body.validation.errors.map((e: any) => [e.field, e.code]),
    [['source_event', 'unknown_event']],
  );
  isProblem(t, await c.post(`/v1/metrics/proposals/${unknown.body.id}/accept`, {}), 422, 'unknown_event');
  const fixed = await c.post(`/v1/metrics/proposals/${unknown.body.id}/accept`, { source_event: 'report_exported' });
  t.equal(fixed.status, 201, 'an override repairs it');
  t.equal(fixed.body.source_event, 'report_exported');

  const r = await c.post('/v1/metrics/proposals', { description: 'How many reports exported this week' });
  const rejected = await c.post(`/v1/metrics/proposals/${r.body.id}/reject`);
  t.equal(rejected.status, 200);
  t.equal(rejected.body.status, 'rejected');
  isProblem(t, await c.post(`/v1/metrics/proposals/${r.body.id}/accept`, {}), 409, 'proposal_closed');
  isProblem(t, await client(api.url, other.api_key).get(`/v1/metrics/proposals/${r.body.id}`), 404, 'not_found');
  isProblem(
    t,
    await client(api.url, other.api_key).post(`/v1/metrics/proposals/${r.body.id}/reject`),
    404,
    'not_found',
  );
  isProblem(t, await c.post('/v1/metrics/proposals', { description: ' ' }), 400, 'validation_failed');
});
