import t from '#tap';
import { client, isProblem, randomUuid, sharedApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb, db } from '../helpers/stack.js';
import { apiKey } from '../metrics/support.js';

// The segment endpoints over HTTP: create, read, list, change, delete; every rule error names its
// rule; names unique per workspace; membership as GET /v1/customers?segment_id= and the customer
// detail's `segments` see it (rules evaluated now, health included); a segment a playbook names
// cannot be deleted or renamed; scopes; another workspace's segments answer 404.
t.teardown(closeDb);
const api = await sharedApi(t);
const ws = await bootstrap();
const other = await bootstrap();
const admin = client(api.url, ws.api_key);

const customer = async (body: object): Promise<string> => {
  const r = await admin.post('/v1/customers', body);
  if (r.status !== 201) throw new Error(r.text);
  return r.body.id;
};
const inDays = (n: number) => new Date(Date.now() + n * 86_400_000).toISOString().slice(0, 10);

const big = await customer({ name: 'Big', arr: 250_000, custom_fields: { tier: 'gold' }, renewal_date: inDays(20) });
const mid = await customer({ name: 'Mid', arr: 90_000, custom_fields: { tier: 'silver', seats: 40 } });
const small = await customer({ name: 'Small', arr: 5_000, status: 'trial', owner_email: 'Ann@Example.com' });
const none = await customer({ name: 'None' });
await db()`
  INSERT INTO customer_health (customer_id, tenant_id, score, status, dimensions, calculated_at)
  VALUES (${mid}, ${ws.tenant_id}, 32, 'at_risk', '{}', now())`;

const members = async (segmentId: string): Promise<string[]> => {
  const r = await admin.get(`/v1/customers?segment_id=${segmentId}&limit=200`);
  if (r.status !== 200) throw new Error(r.text);
  return r.body.data.map((c: { id: string }) => c.id).sort();
};
const sorted = (...ids: string[]) => [...ids].sort();

t.test('create, read, list, change, delete', async (t) => {
  const made = await admin.post('/v1/segments', {
    name: ' Large ',
    description: 'Big accounts',
    rules: [{ field: 'arr', op: 'gte', value: 100_000 }],
  });
  t.equal(made.status, 201, made.text);
  t.equal(made.headers.get('location'), `${api.url}/v1/segments/${made.body.id}`);
  t.match(made.body, { name: 'Large', description: 'Big accounts', match: 'all' });
  t.same(made.body.rules, [{ field: 'arr', op: 'gte', value: 100_000 }]);
  t.same((await admin.get(`/v1/segments/${made.body.id}`)).body, made.body, 'GET shows what POST answered');

  const second = (await admin.post('/v1/segments', { name: 'Anyone', rules: [], match: 'any' })).body;
  const first = await admin.get('/v1/segments?limit=1');
  t.equal(first.body.data.length, 1);
  t.equal(first.body.has_more, true);
  const next = await admin.get(`/v1/segments?limit=1&cursor=${first.body.next_cursor}`);
  t.same([first.body.data[0].id, next.body.data[0].id], [made.body.id, second.id], 'oldest first, cursor pages');

  const changed = await admin.patch(`/v1/segments/${made.body.id}`, {
    rules: [{ field: 'arr', op: 'gt', value: 200_000 }],
    description: null,
  });
  t.equal(changed.status, 200, changed.text);
  t.match(changed.body, { name: 'Large', description: null, rules: [{ op: 'gt', value: 200_000 }] });
  t.ok(changed.body.updated_at >= made.body.updated_at);
  t.same(await members(made.body.id), [big], 'members follow the new rules at once');
  t.same(await members(second.id), sorted(big, mid, small, none), 'no rules: every customer');

  t.equal((await admin.del(`/v1/segments/${made.body.id}`)).status, 204);
  isProblem(t, await admin.get(`/v1/segments/${made.body.id}`), 404, 'not_found');
  isProblem(t, await admin.del(`/v1/segments/${made.body.id}`), 404, 'not_found');
  await admin.del(`/v1/segments/${second.id}`);
});

t.test('every rule error names its rule', async (t) => {
  const bad = async (rules: unknown, field: string, code: string) => {
    const r = await admin.post('/v1/segments', { name: `bad ${randomUuid()}`, rules });
    isProblem(t, r, 400, 'validation_failed');
    t.match(r.body.errors, [{ field, code }], `${JSON.stringify(rules)} → ${field} ${code}`);
  };
  await bad([{ field: 'plan', op: 'eq', value: 'pro' }], 'rules[0].field', 'unknown_field');
  await bad(
    [
      { field: 'arr', op: 'gt', value: 1 },
      { field: 'arr', op: 'between', value: 1 },
    ],
    'rules[1].op',
    'unknown_op',
  );
  await bad([{ field: 'arr', op: 'gt', value: 'lots' }], 'rules[0].value', 'invalid_value');
  await bad([{ field: 'status', op: 'lt', value: 'active' }], 'rules[0].value', 'invalid_value');
  await bad([{ field: 'renewal_date', op: 'lt', value: '2030-13-01' }], 'rules[0].value', 'invalid_value');
  await bad([{ field: 'custom_fields.tier', op: 'in', value: [] }], 'rules[0].value', 'invalid_value');
  await bad([{ field: 'custom_fields.tier', op: 'in', value: ['a', 1] }], 'rules[0].value', 'invalid_value');
  await bad([{ field: 'custom_fields.', op: 'eq', value: 'a' }], 'rules[0].field', 'unknown_field');

  isProblem(t, await admin.post('/v1/segments', { name: 'No rules' }), 400, 'validation_failed');
  isProblem(t, await admin.post('/v1/segments', { name: 'x', rules: [], match: 'some' }), 400, 'validation_failed');
  isProblem(t, await admin.post('/v1/segments', { name: '  ', rules: [] }), 400, 'validation_failed');
  isProblem(t, await admin.post('/v1/segments', { name: 'x', rules: [], extra: 1 }), 400, 'validation_failed');
  const seg = (await admin.post('/v1/segments', { name: 'Patchable', rules: [] })).body;
  const r = await admin.patch(`/v1/segments/${seg.id}`, { rules: [{ field: 'nope', op: 'eq', value: 1 }] });
  isProblem(t, r, 400, 'validation_failed');
  t.match(r.body.errors, [{ field: 'rules[0].field', code: 'unknown_field' }]);
  isProblem(t, await admin.patch(`/v1/segments/${seg.id}`, {}), 400, 'validation_failed');
  t.same((await admin.get(`/v1/segments/${seg.id}`)).body.rules, [], 'a refused change stores nothing');
  await admin.del(`/v1/segments/${seg.id}`);
});

t.test('names are unique per workspace, case-insensitively', async (t) => {
  const a = (await admin.post('/v1/segments', { name: 'Gold', rules: [] })).body;
  const b = (await admin.post('/v1/segments', { name: 'Silver', rules: [] })).body;
  isProblem(t, await admin.post('/v1/segments', { name: 'GOLD', rules: [] }), 409, 'segment_name_taken');
  isProblem(t, await admin.patch(`/v1/segments/${b.id}`, { name: 'gold' }), 409, 'segment_name_taken');
  const theirs = await client(api.url, other.api_key).post('/v1/segments', { name: 'Gold', rules: [] });
  t.equal(theirs.status, 201, 'another workspace may use the name');
  const renamed = await admin.patch(`/v1/segments/${a.id}`, { name: 'gold' });
  t.equal(renamed.body.name, 'gold', 'a segment may change the case of its own name');
  await admin.del(`/v1/segments/${a.id}`);
  await admin.del(`/v1/segments/${b.id}`);
});

t.test('membership: the customers list and the customer detail', async (t) => {
  const seg = async (name: string, rules: object[], match = 'all') => {
    const r = await admin.post('/v1/segments', { name, rules, match });
    t.equal(r.status, 201, r.text);
    return r.body.id as string;
  };
  const gold = await seg('Gold tier', [{ field: 'custom_fields.tier', op: 'eq', value: 'gold' }]);
  const paying = await seg('Paying over 50k', [
    { field: 'status', op: 'eq', value: 'active' },
    { field: 'arr', op: 'gt', value: 50_000 },
  ]);
  const either = await seg(
    'Trial or at risk',
    [
      { field: 'status', op: 'eq', value: 'trial' },
      { field: 'health_status', op: 'eq', value: 'at_risk' },
    ],
    'any',
  );
  const renewing = await seg('Renewing soon', [{ field: 'days_to_renewal', op: 'lte', value: 30 }]);
  const annOwned = await seg('Ann', [{ field: 'owner_email', op: 'eq', value: 'ann@EXAMPLE.com' }]);
  const noTier = await seg('Not gold', [{ field: 'custom_fields.tier', op: 'neq', value: 'gold' }]);
  const seats = await seg('Many seats', [{ field: 'custom_fields.seats', op: 'gte', value: 40 }]);
  const scored = await seg('Scored low', [{ field: 'health_score', op: 'lt', value: 50 }]);

  t.same(await members(gold), [big]);
  t.same(await members(paying), sorted(big, mid));
  t.same(await members(either), sorted(mid, small), 'any: trial or at_risk');
  t.same(await members(renewing), [big], 'days_to_renewal; no renewal date matches nothing');
  t.same(await members(annOwned), [small], 'e-mail compares case-insensitively');
  t.same(await members(noTier), sorted(mid, small, none), 'neq is true where the field is missing');
  t.same(await members(seats), [mid], 'a numeric custom field compares as a number');
  t.same(await members(scored), [mid], 'an unscored customer has no health_score');

  const combined = await admin.get(`/v1/customers?segment_id=${paying}&status=active&min_arr=100000`);
  t.same(
    combined.body.data.map((c: { id: string }) => c.id),
    [big],
    'segment_id combines with the other filters',
  );

  const detail = await admin.get(`/v1/customers/${mid}`);
  t.equal(detail.status, 200, detail.text);
  t.same(
    detail.body.segments.map((s: { name: string }) => s.name),
    ['Many seats', 'Not gold', 'Paying over 50k', 'Scored low', 'Trial or at risk'],
    'the detail lists the segments the customer is in, by name',
  );
  t.same((await admin.get(`/v1/customers/${none}`)).body.segments, [{ id: noTier, name: 'Not gold' }]);

  await admin.patch(`/v1/customers/${mid}`, { status: 'paused' });
  t.same(await members(paying), [big], 'a changed customer leaves the segment at once');

  const r = await admin.get(`/v1/customers?segment_id=${randomUuid()}`);
  isProblem(t, r, 400, 'validation_failed');
  t.match(r.body.errors, [{ field: 'segment_id', code: 'unknown_segment' }]);
  isProblem(t, await admin.get('/v1/customers?segment_id=gold'), 400, 'validation_failed');
  for (const id of [gold, paying, either, renewing, annOwned, noTier, seats, scored])
    await admin.del(`/v1/segments/${id}`);
});

t.test('a segment a playbook names cannot be deleted or renamed; its rules can change', async (t) => {
  const seg = (await admin.post('/v1/segments', { name: 'Enterprise', rules: [] })).body;
  const pb = await admin.post('/v1/playbooks', {
    name: 'Enterprise at risk',
    trigger: { type: 'condition', expression: 'segment == "enterprise" and health_score < 40' },
    actions: [{ type: 'create_task', title: 'Call', assignee: 'owner' }],
  });
  t.equal(pb.status, 201, pb.text);

  const del = await admin.del(`/v1/segments/${seg.id}`);
  isProblem(t, del, 409, 'segment_in_use');
  t.same(del.body.used_by, [{ type: 'playbook', id: pb.body.id, name: 'Enterprise at risk' }]);
  isProblem(t, await admin.patch(`/v1/segments/${seg.id}`, { name: 'Big' }), 409, 'segment_in_use');
  const rules = await admin.patch(`/v1/segments/${seg.id}`, {
    name: 'ENTERPRISE',
    rules: [{ field: 'arr', op: 'gte', value: 1 }],
  });
  t.equal(rules.status, 200, 'new rules and a change of case only');

  await admin.patch(`/v1/playbooks/${pb.body.id}`, { trigger: { type: 'condition', expression: 'arr > 1' } });
  t.equal((await admin.del(`/v1/segments/${seg.id}`)).status, 204, 'free once no playbook names it');
  const stale = await admin.post('/v1/playbooks', {
    name: 'Stale',
    trigger: { type: 'condition', expression: 'segment == "Enterprise"' },
    actions: [{ type: 'create_task', title: 'Call', assignee: 'owner' }],
  });
  isProblem(t, stale, 400, 'unknown_variable');
  await admin.del(`/v1/playbooks/${pb.body.id}`);
});

t.test('scopes and another workspace', async (t) => {
  const seg = (await admin.post('/v1/segments', { name: 'Mine', rules: [] })).body;
  const reader = client(api.url, await apiKey(api.url, ws, 'viewer', ['customers:read']));
  t.equal((await reader.get('/v1/segments')).status, 200);
  t.equal((await reader.get(`/v1/segments/${seg.id}`)).status, 200);
  const denied = await reader.post('/v1/segments', { name: 'Nope', rules: [] });
  isProblem(t, denied, 403, 'insufficient_scope');
  isProblem(t, await reader.patch(`/v1/segments/${seg.id}`, { name: 'Nope' }), 403, 'insufficient_scope');
  isProblem(t, await reader.del(`/v1/segments/${seg.id}`), 403, 'insufficient_scope');
  const noScope = client(api.url, await apiKey(api.url, ws, 'viewer', ['health:read']));
  isProblem(t, await noScope.get('/v1/segments'), 403, 'insufficient_scope');

  const them = client(api.url, other.api_key);
  isProblem(t, await them.get(`/v1/segments/${seg.id}`), 404, 'not_found');
  isProblem(t, await them.patch(`/v1/segments/${seg.id}`, { name: 'Taken' }), 404, 'not_found');
  isProblem(t, await them.del(`/v1/segments/${seg.id}`), 404, 'not_found');
  const filter = await them.get(`/v1/customers?segment_id=${seg.id}`);
  isProblem(t, filter, 400, 'validation_failed', undefined);
  t.notOk(
    (await them.get('/v1/segments')).body.data.some((s: { id: string }) => s.id === seg.id),
    'not listed to another workspace',
  );
  t.equal((await admin.get(`/v1/segments/${seg.id}`)).body.name, 'Mine', 'unchanged by the other workspace');
});
