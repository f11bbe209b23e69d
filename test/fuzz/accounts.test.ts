import fc from 'fast-check';
import t from '#tap';
import { client } from '../core-api/_helpers.js';
import { bootstrap, closeDb, db } from '../helpers/stack.js';
import {
  build,
  dateTimeAround,
  envelope,
  jsonDoc,
  nastyString,
  oddDateTime,
  oddUuid,
  oddValue,
  otherMethod,
  SHRINK,
  shaped,
  sized,
  type J,
} from './arbitraries.js';
import { CORE_STATUSES, including, Ledger, type Rules } from './properties.js';
import { apiTier, fuzz, settings, stillReady, type Surface } from './support.js';

// Users (invite, role change) and API keys of the core API.
const o = settings(process.env);

t.teardown(closeDb);
const [ws, api] = await Promise.all([bootstrap(), apiTier(t)]);
const c = client(api.url, ws.api_key);
const invited = await c.post('/v1/users', { email: 'invited@fuzz.example', role: 'csm' });
if (invited.status !== 201) throw new Error(`invite: ${invited.status} ${invited.text}`);
const admin = (await c.get('/v1/users')).body.data.find((u: { email: string }) => u.email === ws.admin_email);

const ledger = new Ledger(async () => {
  const [row] = await db()<{ users: string; keys: number; invites: number }[]>`
    SELECT (SELECT count(*) || ':' || md5(string_agg((u.id, u.email, u.role, u.locale, u.timezone,
              u.initial_territory_ids)::text, ',' ORDER BY u.id))
            FROM users u WHERE u.tenant_id = ${ws.tenant_id}) AS users,
           (SELECT count(*)::int FROM user_invites WHERE tenant_id = ${ws.tenant_id}) AS invites,
           (SELECT count(*)::int FROM api_keys WHERE tenant_id = ${ws.tenant_id}) AS keys`;
  return row;
});

const auth = fc.oneof(
  SHRINK,
  { weight: 20, arbitrary: fc.constant<Array<[string, string]>>([['Authorization', `Bearer ${ws.api_key}`]]) },
  {
    weight: 2,
    arbitrary: fc.constantFrom<Array<[string, string]>>(
      [],
      [['Authorization', 'Bearer ']],
      [['Authorization', `Bearer ${ws.api_key}x`]],
      [['Authorization', 'Bearer eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.AAAA']],
      [
        ['Authorization', `Bearer ${ws.api_key}`],
        ['Authorization', 'Bearer bogus'],
      ],
    ),
  },
);

const segment = (s: string) =>
  s.isWellFormed() ? encodeURIComponent(s) : encodeURIComponent(s.toWellFormed()).replace(/%EF%BF%BD/g, '%ED%A0%80');

function surface(
  name: string,
  method: string,
  path: fc.Arbitrary<string>,
  body: fc.Arbitrary<J>,
  success: Rules['success'],
): Surface {
  return {
    name,
    methods: [method],
    cases: fc
      .record({ method: otherMethod(method), path, auth, env: envelope('application/json'), body: jsonDoc(body) })
      .map((x) => build({ method: x.method, path: x.path, auth: x.auth }, x.env, x.body, 256 * 1024)),
    port: api.port,
    rules: { contract: 'problem', statuses: CORE_STATUSES, success },
    ledger,
    tiers: [api],
  };
}

const role = {
  valid: fc.constantFrom<J>('viewer', 'csm', 'admin'),
  odd: fc.oneof(SHRINK, fc.constantFrom<J>('Admin', 'owner', ''), nastyString),
};

t.test(
  'POST /v1/users and PATCH /v1/users/{id}/role: every answer documented, nothing stored when refused',
  async (t) => {
    const invite = shaped({
      email: {
        valid: fc.oneof(SHRINK, fc.constantFrom<J>('a@fuzz.example'), fc.emailAddress()),
        odd: fc.oneof(
          sized(),
          nastyString,
          fc.constantFrom<J>('a@b', '@x.io', 'a@@b.io', `${'a'.repeat(64)}@x.io`, `a@${'b'.repeat(316)}.io`),
        ),
        drop: 30,
      },
      role,
      locale: {
        valid: fc.constantFrom<J>('en', 'pt-BR', 'de-DE'),
        odd: fc.oneof(sized(['a']), fc.constantFrom<J>('e', 'en_US', 'english', 'en-')),
      },
      timezone: {
        valid: fc.constantFrom<J>('Europe/Berlin', 'UTC'),
        odd: fc.oneof(sized(), fc.constantFrom<J>('Mars/Phobos', 'utc', '+01:00')),
      },
      initial_territory_ids: {
        valid: fc.array(fc.constantFrom<J>('t-1', 't-2'), { maxLength: 2 }),
        odd: fc.oneof(
          oddValue,
          fc.constantFrom(0, 100, 101).map((n) => Array.from({ length: n }, (_, i): J => `t-${i}`)),
          fc.constant<J>(['t', 't']),
          sized().map((s): J => [s]),
        ),
      },
    });
    const user = including('id', 'tenant_id', 'email', 'role', 'status', 'created_at');
    const cases = fc.oneof(
      surface('users', 'POST', fc.constant('/v1/users'), invite, user).cases,
      surface(
        'users',
        'PATCH',
        fc
          .oneof(SHRINK, fc.constantFrom(invited.body.id as string, admin.id as string), oddUuid.map(segment))
          .map((id) => `/v1/users/${id}/role`),
        shaped({ role: { ...role, drop: 30 } }),
        user,
      ).cases,
    );
    const s = {
      ...surface('core POST /v1/users, PATCH /v1/users/{id}/role', 'POST', fc.constant(''), invite, user),
      methods: ['POST', 'PATCH'],
      cases,
    };
    await fuzz(t, s, o);
    await stillReady(t, [api]);
  },
);

t.test('POST /v1/api-keys: every answer documented, nothing stored when refused', async (t) => {
  const scope = fc.constantFrom<J>('customers:read', 'customers:write', 'events:write', 'admin:*');
  const body = shaped({
    name: { valid: fc.constantFrom<J>('CRM sync', 'k'), odd: sized(), drop: 30 },
    scopes: {
      valid: fc.array(scope, { minLength: 1, maxLength: 3 }),
      odd: fc.oneof(
        SHRINK,
        fc.constant<J>([]),
        fc.constant<J>(['customers:read', 'customers:read']),
        fc.array(nastyString, { maxLength: 2 }),
        fc.constant<J>(['users:write']),
      ),
      drop: 30,
    },
    mode: { valid: fc.constantFrom<J>('live', 'test'), odd: nastyString },
    role,
    ip_allowlist: {
      valid: fc.array(fc.constantFrom<J>('203.0.113.0/24', '2001:db8::/32', '10.1.2.3', '::1'), { maxLength: 2 }),
      odd: fc.oneof(
        fc.array(
          fc.oneof(
            fc.constantFrom<J>(
              '10.0.0.0/33',
              '::/129',
              '1.2.3.4/-1',
              '999.1.1.1',
              'fe80::1%eth0',
              ' 1.2.3.4',
              '1.2.3.4/08',
              '::ffff:1.2.3.4/128',
              '1.2.3',
              '0/0',
              '/24',
              '1.2.3.4/',
              'a'.repeat(65),
            ),
            nastyString,
          ),
          { minLength: 1, maxLength: 2 },
        ),
        fc.constantFrom(100, 101).map((n) => Array.from({ length: n }, (_, i): J => `10.0.${i}.0/24`)),
      ),
    },
    expires_at: {
      valid: dateTimeAround(1, 365).map((s): J => s),
      odd: fc.oneof(oddDateTime, dateTimeAround(-30, 0)),
    },
  });
  const key = including('id', 'name', 'prefix', 'last4', 'scopes', 'role', 'key', 'status');
  await fuzz(t, surface('core POST /v1/api-keys', 'POST', fc.constant('/v1/api-keys'), body, key), o);
  await stillReady(t, [api]);
});
