import t from '#tap';
import Type from '#typebox';
import type { Principal } from '../../lib/credentials/principal.js';
import { requireScope } from '../../lib/credentials/scopes.js';
import { ApiError } from '../../lib/problem.js';
import { buildOpenApi, type OpenApiRoute } from '../../schemas/openapi.js';

// A route's scopes as the OpenAPI document states them and as the server enforces them, from the one
// declaration (`scope`, `scopeWhen`): alternatives are several security requirement objects.

const route = (path: string, extra: Partial<OpenApiRoute>): OpenApiRoute => ({
  method: 'GET',
  path,
  summary: path,
  tag: 't',
  auth: 'bearer',
  responses: { 200: { description: 'ok' } },
  ...extra,
});
const doc = buildOpenApi(
  [
    route('/one', { scope: 'customers:read' }),
    route('/either', { scope: ['tasks:read', 'playbooks:read'] }),
    route('/anyone', { scope: null }),
    route('/admin', { scope: 'admin:*' }),
    route('/hard', {
      method: 'DELETE',
      scope: 'customers:delete',
      scopeWhen: { query: { hard: true }, scope: 'admin:*' },
      query: Type.Object({ hard: Type.Optional(Type.Boolean()) }),
    }),
    route('/users', { scope: 'users:read', role: 'admin' }),
    route('/ingest', { method: 'POST', auth: 'ingestionKey' }),
  ],
  {
    title: 'x',
    version: '1',
    description: 'x',
    baseUrl: 'http://api',
    scopes: {},
    errorCodes: {},
    problem: Type.Object({}),
    tags: [],
  },
) as { paths: Record<string, Record<string, Record<string, any>>> };
const op = (path: string, method = 'get') => doc.paths[path][method];

t.test('alternatives are one security requirement object per scope and scheme', async (t) => {
  t.same(op('/either').security, [
    { oauth2: ['tasks:read'] },
    { bearerApiKey: ['tasks:read'] },
    { oauth2: ['playbooks:read'] },
    { bearerApiKey: ['playbooks:read'] },
  ]);
  t.notOk('x-required-scope' in op('/either'), 'x-required-scope only where one scope is required');
  t.match(op('/either').description, 'Scope: `tasks:read` or `playbooks:read` (or `admin:*`).');
  t.same(op('/one').security, [{ oauth2: ['customers:read'] }, { bearerApiKey: ['customers:read'] }]);
  t.equal(op('/one')['x-required-scope'], 'customers:read');
  t.same(op('/anyone').security, [{ oauth2: [] }, { bearerApiKey: [] }], 'any valid credential');
  t.match(op('/anyone').description, 'Any valid credential.');
  t.match(op('/admin').description, 'Scope: `admin:*`.');
  t.notMatch(op('/admin').description, '(or `admin:*`)');
  t.same(op('/ingest', 'post').security, [{ ingestionKey: [] }]);
});

t.test('scopes a query value calls for, and the role, are in the document too', async (t) => {
  const hard = op('/hard', 'delete');
  t.same(hard.security, [{ oauth2: ['customers:delete'] }, { bearerApiKey: ['customers:delete'] }]);
  t.same(hard['x-security-when'], [
    { query: { hard: true }, security: [{ oauth2: ['admin:*'] }, { bearerApiKey: ['admin:*'] }] },
  ]);
  t.match(hard.description, 'With `hard=true`, scope: `admin:*`.');
  t.equal(op('/users')['x-required-role'], 'admin');
  t.notOk('x-required-role' in op('/one'));
});

t.test('requireScope: any one alternative will do; a refusal names them all and the held scopes', async (t) => {
  const p = (...scopes: string[]): Principal => ({
    tenantId: 't',
    kind: 'api_key',
    actorId: 'k',
    role: 'admin',
    scopes: new Set(scopes),
  });
  t.doesNotThrow(() => requireScope(p('playbooks:read'), ['tasks:read', 'playbooks:read']));
  t.doesNotThrow(() => requireScope(p('admin:*'), ['tasks:read', 'playbooks:read']));
  const refusal = (f: () => void) => {
    try {
      f();
    } catch (e) {
      return e as ApiError;
    }
    throw new Error('not refused');
  };
  const e = refusal(() => requireScope(p('customers:read', 'analytics:read'), ['tasks:read', 'playbooks:read']));
  t.ok(e instanceof ApiError);
  t.equal(e.code, 'insufficient_scope');
  t.equal(
    e.message,
    'This endpoint requires the scope tasks:read or playbooks:read; the credential holds: analytics:read ' +
      'customers:read.',
  );
  t.same(e.headers, [['WWW-Authenticate', 'Bearer error="insufficient_scope", scope="tasks:read playbooks:read"']]);
  t.equal(
    refusal(() => requireScope(p(), 'admin:*', 'With hard=true this endpoint')).message,
    'With hard=true this endpoint requires the scope admin:*; the credential holds: (none).',
  );
});
