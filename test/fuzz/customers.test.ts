import fc from 'fast-check';
import t from '#tap';
import { client } from '../core-api/_helpers.js';
import { bootstrap, closeDb, db } from '../helpers/stack.js';
import {
  build,
  dateAround,
  envelope,
  fromJs,
  freeObject,
  jsonDoc,
  nastyString,
  oddDate,
  oddNumber,
  oddUuid,
  oddValue,
  otherMethod,
  params,
  SHRINK,
  shaped,
  sized,
  sizedList,
  type J,
} from './arbitraries.js';
import { CORE_STATUSES, exactly, including, Ledger, type Rules } from './properties.js';
import { apiTier, fuzz, settings, stillReady, type Surface } from './support.js';
import { bearer } from './workspace.js';

// The core API's customer surfaces: POST and PATCH /v1/customers, contacts, the list's query
// string and bulk import.
const o = settings(process.env);

t.teardown(closeDb);
const [ws, api] = await Promise.all([bootstrap(), apiTier(t)]);
const c = client(api.url, ws.api_key);
const fixture = await c.post('/v1/customers', {
  name: 'Fixture',
  external_id: 'fixture',
  custom_fields: { tier: 'gold' },
});
if (fixture.status !== 201) throw new Error(`fixture customer: ${fixture.status} ${fixture.text}`);
const id = fixture.body.id as string;

/** Every customer and contact of the workspace, as data (health columns are the scorer's). */
const ledger = new Ledger(async () => {
  const [row] = await db()<{ customers: string; contacts: string }[]>`
    SELECT (SELECT count(*) || ':' || coalesce(md5(string_agg((c.id, c.name, c.email_domain, c.arr, c.owner_email,
              c.status, c.renewal_date, c.custom_fields, c.external_id, c.external_source, c.updated_at,
              c.deleted_at)::text, ',' ORDER BY c.id)), '')
            FROM customers c WHERE c.tenant_id = ${ws.tenant_id}) AS customers,
           (SELECT count(*) || ':' || coalesce(md5(string_agg(k::text, ',' ORDER BY k.id)), '')
            FROM contacts k WHERE k.tenant_id = ${ws.tenant_id}) AS contacts`;
  return row;
});

const auth = bearer(ws);

const idempotency = fc.oneof(
  SHRINK,
  { weight: 12, arbitrary: fc.constant<Array<[string, string]>>([]) },
  {
    weight: 2,
    arbitrary: fc
      .oneof(fc.constantFrom('k-1', 'k-2'), fc.constantFrom('', 'a b', 'clé', 'x'.repeat(255), 'x'.repeat(256)))
      .map((k): Array<[string, string]> => [['Idempotency-Key', k]]),
  },
);

const domain = fc.constantFrom<J>(
  'ACME.COM',
  'a..b',
  '-a.com',
  'a_b.com',
  'bücher.de',
  'localhost',
  '1.2.3.4',
  `${'a'.repeat(64)}.com`,
  `${'a.'.repeat(126)}a`,
  `${'a.'.repeat(127)}a`,
);

const customerFields = (nullable: boolean) => {
  const maybeNull = (a: fc.Arbitrary<J>) => (nullable ? fc.oneof(SHRINK, a, fc.constant<J>(null)) : a);
  return {
    name: {
      valid: fc.string({ minLength: 1, maxLength: 20 }).map((s): J => `Acme ${s}`),
      odd: sized(),
      drop: nullable ? 3 : 30,
    },
    email_domain: {
      valid: maybeNull(fc.oneof(SHRINK, fc.constant<J>('acme.com'), fc.domain())),
      odd: domain,
      drop: nullable ? 3 : 4,
    },
    arr: { valid: maybeNull(fc.double({ min: 0.01, max: 1e9, noNaN: true })), odd: oddNumber, drop: nullable ? 3 : 4 },
    owner_email: {
      valid: maybeNull(fc.constantFrom<J>('jane@yourco.com', 'a@b.io')),
      odd: fc.oneof(sized(), nastyString),
      drop: nullable ? 3 : 4,
    },
    status: {
      valid: fc.constantFrom<J>('active', 'trial', 'churned', 'paused'),
      odd: nastyString,
      drop: nullable ? 3 : 4,
    },
    renewal_date: {
      valid: maybeNull(dateAround(0, 700)),
      odd: fc.oneof(oddDate, dateAround(-400, -1)),
      drop: nullable ? 3 : 4,
    },
    custom_fields: {
      valid: fc
        .dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 })
        .map(fromJs),
      odd: freeObject,
      drop: nullable ? 3 : 4,
    },
    external_id: { valid: maybeNull(fc.constantFrom<J>('e-1', 'e-2', 'e-3')), odd: sized(), drop: 3 },
    external_source: {
      valid: fc.constantFrom<J>('internal', 'stripe', 'hubspot'),
      odd: fc.oneof(sized(['a', 'A', '-']), nastyString),
      drop: 3,
    },
  };
};

const customerBody = shaped(customerFields(false));
const patchBody = shaped(customerFields(true));
const customerPath = fc.oneof(
  SHRINK,
  { weight: 12, arbitrary: fc.constant(id) },
  { weight: 1, arbitrary: oddUuid.map(encodeURIComponentSafe) },
  { weight: 1, arbitrary: fc.uuid() },
);

/** A path segment from any string (a lone surrogate cannot go through encodeURIComponent). */
function encodeURIComponentSafe(s: string): string {
  return s.isWellFormed()
    ? encodeURIComponent(s)
    : encodeURIComponent(s.toWellFormed()).replace(/%EF%BF%BD/g, '%ED%A0%80');
}

function surface(
  name: string,
  method: string,
  path: fc.Arbitrary<string>,
  body: fc.Arbitrary<J> | undefined,
  success: Rules['success'],
  maxBytes = 256 * 1024,
): Surface {
  return {
    name,
    methods: [method],
    cases: fc
      .record({
        method: otherMethod(method),
        path,
        auth,
        key: method === 'POST' ? idempotency : fc.constant<Array<[string, string]>>([]),
        env: envelope('application/json'),
        body: body ? jsonDoc(body) : fc.constant(undefined),
      })
      .map((x) => build({ method: x.method, path: x.path, auth: x.auth, headers: x.key }, x.env, x.body, maxBytes)),
    port: api.port,
    rules: { contract: 'problem', statuses: CORE_STATUSES, success },
    ledger,
    tiers: [api],
  };
}

const customer = including('id', 'tenant_id', 'name', 'status', 'custom_fields', 'created_at', 'updated_at');

t.test('POST /v1/customers: every answer documented, nothing stored when refused', async (t) => {
  await fuzz(t, surface('core POST /v1/customers', 'POST', fc.constant('/v1/customers'), customerBody, customer), o);
  await stillReady(t, [api]);
});

t.test('PATCH /v1/customers/{id}: every answer documented, nothing changed when refused', async (t) => {
  const s = surface(
    'core PATCH /v1/customers/{id}',
    'PATCH',
    customerPath.map((p) => `/v1/customers/${p}`),
    patchBody,
    customer,
  );
  await fuzz(t, s, o);
  await stillReady(t, [api]);
});

t.test('POST /v1/customers/{id}/contacts: every answer documented, nothing stored when refused', async (t) => {
  const contact = shaped({
    name: { valid: fc.constantFrom<J>('Jo', 'Ann Lee'), odd: sized(), drop: 30 },
    email: { valid: fc.constantFrom<J>('jo@acme.com', 'ann@acme.com'), odd: fc.oneof(sized(), nastyString) },
    title: { valid: fc.constantFrom<J>('CTO', ''), odd: sized() },
    is_champion: { valid: fc.boolean(), odd: fc.constantFrom<J>('true', 1, 0, null) },
    whatsapp_number: {
      valid: fc.constantFrom<J>('+4915112345678', '+12025550123'),
      odd: fc.constantFrom<J>(
        '+1234567',
        '+123456',
        '+1234567890123456',
        '+0123456789',
        '4915112345678',
        '+49 151',
        '+',
      ),
    },
  });
  const s = surface(
    'core POST /v1/customers/{id}/contacts',
    'POST',
    customerPath.map((p) => `/v1/customers/${p}/contacts`),
    contact,
    including('id', 'customer_id', 'name', 'is_champion', 'created_at'),
  );
  await fuzz(t, s, o);
  await stillReady(t, [api]);
});

const listCursor = fc.oneof(
  SHRINK,
  fc
    .tuple(
      fc.oneof(
        fc.constantFrom(
          '2026-05-01 12:00:00.123456+00',
          '2026-02-30 12:00:00+00',
          '0000-01-01 00:00:00+00',
          '2026-05-01 25:00:00+00',
        ),
        nastyString,
      ),
      fc.oneof(fc.uuid(), oddUuid),
    )
    .map((v) => Buffer.from(JSON.stringify(v)).toString('base64url')),
  fc.jsonValue({ maxDepth: 2 }).map((v) => Buffer.from(JSON.stringify(v) ?? '').toString('base64url')),
  fc.base64String({ maxLength: 40 }),
  sized(['A']),
  nastyString,
);
const arrText = fc.oneof(
  SHRINK,
  fc.constantFrom(
    '1000',
    '0',
    '-0',
    '1e-9',
    '4.9e-324',
    '1e308',
    '1e309',
    'NaN',
    'Infinity',
    '-1',
    '0x10',
    ' 5',
    '5 ',
    '1,000',
    '',
  ),
  fc.double().map(String),
);

t.test('GET /v1/customers query strings: every answer documented', async (t) => {
  const query = params(
    {
      status: fc.oneof(
        SHRINK,
        fc.constantFrom('active', 'active,trial', 'active,', ',', 'ACTIVE', 'active,active'),
        nastyString,
      ),
      owner_id: fc.oneof(SHRINK, fc.uuid(), oddUuid),
      segment_id: fc.oneof(SHRINK, fc.constantFrom('s-1'), sized(), nastyString),
      health_status: fc.oneof(SHRINK, fc.constantFrom('healthy', 'at_risk,neutral', 'unknown'), nastyString),
      min_arr: arrText,
      max_arr: arrText,
      renewal_within_days: fc.constantFrom('30', '60', '90', '45', '30.0', '3e1', '-30', ''),
      q: fc.oneof(SHRINK, fc.constantFrom('acme', 'ac', "&|!():*'\\", 'a & b', '!!', ':*'), sized(), nastyString),
      limit: fc.constantFrom('50', '1', '200', '0', '201', '-1', '1.5', '1e2', '', 'abc'),
      cursor: listCursor,
    },
    3,
  );
  const s: Surface = {
    name: 'core GET /v1/customers',
    methods: ['GET'],
    cases: fc
      .record({ method: otherMethod('GET'), auth, qs: query, env: envelope('application/json') })
      .map((x) =>
        build({ method: x.method, path: `/v1/customers?${x.qs}`, auth: x.auth }, x.env, undefined, 256 * 1024),
      ),
    port: api.port,
    rules: { contract: 'problem', statuses: CORE_STATUSES, success: exactly('data', 'has_more', 'next_cursor') },
    ledger,
    tiers: [api],
  };
  await fuzz(t, s, o);
  await stillReady(t, [api]);
});

t.test('POST /v1/customers/bulk-import: every answer documented, no job when refused', async (t) => {
  // Rows of a large list are copies of one row with an external id: at most one customer each.
  const row = shaped(customerFields(false));
  const keyed = row.map((r) => ({
    ...r,
    entries: [...r.entries.filter(([k]) => k !== 'external_id'), ['external_id', 'bulk-1'] as [string, J]],
  }));
  const body = shaped({
    customers: {
      valid: fc.oneof(SHRINK, fc.array(row, { minLength: 1, maxLength: 3 }), sizedList(keyed, 1000)),
      odd: oddValue,
      drop: 30,
    },
    mode: { valid: fc.constantFrom<J>('create_or_update', 'create_only', 'update_only'), odd: nastyString },
    conflict_resolution: { valid: fc.constantFrom<J>('skip', 'abort'), odd: nastyString },
  });
  const jobs = new Ledger(async () => {
    const [row] = await db()<{ n: number }[]>`SELECT count(*)::int AS n FROM jobs WHERE tenant_id = ${ws.tenant_id}`;
    return row.n;
  });
  const s = surface(
    'core POST /v1/customers/bulk-import',
    'POST',
    fc.constant('/v1/customers/bulk-import'),
    body,
    exactly('job_id', 'status', 'status_url'),
    8 * 1024 * 1024,
  );
  await fuzz(t, { ...s, ledger: jobs }, o);
  await stillReady(t, [api]);
});
