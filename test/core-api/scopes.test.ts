import t from '#tap';
import { INGEST_ROUTES } from '../../schemas/ingest-routes.js';
import { ROLE_SCOPES, SCOPES } from '../../schemas/core/scopes.js';
import { DAY, ingest, postEvents, BACKFILL } from '../events/support.js';
import { bootstrap, closeDb } from '../helpers/stack.js';
import { call, client, isProblem, randomUuid, sharedApi, type Res } from './_helpers.js';

// The OpenAPI document's `security` is what a generated client and a reader go by: for every
// operation with a bearer credential, a key holding one scope of the catalogue gets 403
// insufficient_scope exactly when that scope is none of the document's alternatives (admin:*
// satisfies every one), and a csm key holding every scope its role allows gets 403 exactly when
// the document asks for a scope it lacks or for the admin role. A boolean query parameter is tried
// set as well: the scopes it calls for (x-security-when) must be in the document too.
t.teardown(closeDb);
const api = await sharedApi(t);
const tier = await ingest(t);
const ws = await bootstrap();
const admin = client(api.url, ws.api_key);
const onIngest = new Set(Object.values(INGEST_ROUTES).map((r) => `${r.method} ${r.path}`));

async function newKey(name: string, scopes: readonly string[], role = 'admin'): Promise<string> {
  const r = await admin.post('/v1/api-keys', { name, scopes, role, mode: 'test' });
  if (r.status !== 201) throw new Error(`key ${name}: ${r.status} ${r.text}`);
  return r.body.key;
}
const keys = new Map<string, string>(await Promise.all(SCOPES.map(async (s) => [s, await newKey(s, [s])] as const)));
const csmScopes = ROLE_SCOPES.csm;
const csmKey = await newKey('csm, every scope', csmScopes, 'csm');
const doc = (await call(api.url, 'GET', '/v1/openapi.json')).body;

type Security = Array<Record<string, string[]>>;
/** The scopes of a bearer operation's alternatives; `null`: any valid credential. */
function accepted(security: Security): Set<string> | null {
  const out = new Set<string>();
  for (const req of security) for (const s of [...(req.oauth2 ?? []), ...(req.bearerApiKey ?? [])]) out.add(s);
  return out.size ? out : null;
}
const bearer = (security: Security | undefined) => (security ?? []).some((r) => 'bearerApiKey' in r || 'oauth2' in r);

interface Case {
  method: string;
  url: string;
  label: string;
  scopes: Set<string> | null;
  role?: string;
}

/** Each bearer operation, and again with each of its boolean query parameters set. */
const cases: Case[] = [];
for (const [path, methods] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
  for (const [m, op] of Object.entries(methods)) {
    if (!bearer(op.security)) continue;
    const method = m.toUpperCase();
    const base = onIngest.has(`${method} ${path}`) ? tier.url : api.url;
    const url = base + path.replace(/\{\w+\}/g, () => randomUuid());
    const role = op['x-required-role'];
    cases.push({ method, url, label: `${method} ${path}`, scopes: accepted(op.security), role });
    for (const p of op.parameters ?? []) {
      if (p.in !== 'query' || p.schema?.type !== 'boolean') continue;
      const when = (op['x-security-when'] ?? []).find((w: any) => w.query?.[p.name] === true);
      cases.push({
        method,
        url: `${url}?${p.name}=true`,
        label: `${method} ${path}?${p.name}=true`,
        scopes: accepted(when ? when.security : op.security),
        role,
      });
    }
  }
}

/** `fn` over `items`, `n` at a time. */
async function inBatches<T, R>(items: T[], n: number, fn: (x: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += n) out.push(...(await Promise.all(items.slice(i, i + n).map(fn))));
  return out;
}

const send = (c: Case, token: string) =>
  call(c.url, c.method, '', { token, body: c.method === 'GET' || c.method === 'DELETE' ? undefined : {} });
const code = (r: Res) => (r.status === 403 ? String(r.body?.type ?? '').replace(/^.*\/errors\//, '') : 'not 403');

t.test('every bearer operation: a key of each single scope gets 403 exactly when the document says', async (t) => {
  t.ok(cases.length >= 80, `${cases.length} operations and variants`);
  const calls = cases.flatMap((c) => SCOPES.map((scope) => ({ c, scope })));
  const answers = await inBatches(calls, 24, async ({ c, scope }) => ({
    c,
    scope,
    r: await send(c, keys.get(scope)!),
  }));
  const wrong: string[] = [];
  const namesScopes: string[] = [];
  for (const { c, scope, r } of answers) {
    const refused = c.scopes !== null && scope !== 'admin:*' && !c.scopes.has(scope);
    const got = code(r);
    if (got !== (refused ? 'insufficient_scope' : 'not 403'))
      wrong.push(
        `${c.label} with ${scope}: ${r.status} ${got}; the document accepts ` +
          `${c.scopes ? [...c.scopes].join(' or ') : 'any credential'}`,
      );
    else if (refused && ![scope, ...c.scopes!].every((s) => r.body.detail.includes(s)))
      namesScopes.push(`${c.label} with ${scope}: ${r.body.detail}`);
  }
  t.same(wrong, [], 'the document and the answers agree');
  t.same(namesScopes, [], '403 names the accepted scopes and the held one');
});

t.test('a csm key with every scope its role allows: 403 where the document asks for more', async (t) => {
  const answers = await inBatches(cases, 24, async (c) => ({ c, r: await send(c, csmKey) }));
  const wrong: string[] = [];
  for (const { c, r } of answers) {
    const lacks = c.scopes !== null && ![...c.scopes].some((s) => (csmScopes as readonly string[]).includes(s));
    const want = lacks ? 'insufficient_scope' : c.role === 'admin' ? 'insufficient_role' : 'not 403';
    const got = code(r);
    if (got !== want) wrong.push(`${c.label}: ${r.status} ${got}, the document says ${want}`);
  }
  t.same(wrong, [], 'the document and the answers agree');
});

t.test('GET /v1/jobs/{id}: the scope of the job kind, after the look-up', async (t) => {
  const customer = await admin.post('/v1/customers', { name: 'Acme' });
  t.equal(customer.status, 201);
  const imported = await admin.post('/v1/customers/bulk-import', {
    customers: [{ name: 'Row' }],
    mode: 'create_or_update',
    conflict_resolution: 'skip',
  });
  t.equal(imported.status, 202);
  const event = { customer_id: customer.body.id, event_name: 'login', timestamp: new Date(Date.now() - 40 * DAY) };
  const backfill = await postEvents(tier.url, ws.api_key, [event], {}, BACKFILL);
  t.equal(backfill.status, 202);
  const job = (id: string, scope: string) => client(api.url, keys.get(scope)).get(`/v1/jobs/${id}`);
  const importId = imported.body.job_id;
  const backfillId = backfill.body.job_id;
  t.equal((await job(importId, 'customers:read')).status, 200);
  t.equal((await job(backfillId, 'events:read')).status, 200);
  t.equal((await job(backfillId, 'events:write')).status, 200);
  for (const scope of ['events:read', 'events:write']) {
    const r = await job(importId, scope);
    isProblem(t, r, 403, 'insufficient_scope');
    t.match(r.body.detail, 'customers:read', `a bulk import with ${scope}`);
  }
  const r = await job(backfillId, 'customers:read');
  isProblem(t, r, 403, 'insufficient_scope');
  t.match(r.body.detail, /events:read.*events:write|events:write.*events:read/, 'a backfill with customers:read');
  isProblem(t, await job(importId, 'tasks:read'), 403, 'insufficient_scope');
  isProblem(t, await job(randomUuid(), 'tasks:read'), 403, 'insufficient_scope');
  t.match(doc.paths['/v1/jobs/{id}'].get.description, /customers:read.*events:read/s, 'the document says so');
});
