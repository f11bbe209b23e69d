import t from '#tap';
import { type Method, type Route, Router } from '../../core-api/http/router.js';

// The core API's route table: which handler a request reaches, and what 404 and 405 mean.

const route = (method: Method, path: string): Route => ({
  method,
  path,
  summary: `${method} ${path}`,
  tag: 't',
  auth: 'bearer',
  responses: {},
  handler: async () => ({ status: 200 }),
});
const router = new Router([
  route('GET', '/v1/customers/{id}'),
  route('PATCH', '/v1/customers/{id}'),
  route('DELETE', '/v1/customers/{id}'),
  route('GET', '/v1/customers/trash'),
  route('GET', '/v1/customers'),
  route('POST', '/v1/customers'),
  route('GET', '/v1/customers/{id}/health'),
]);
const matched = (method: string, path: string) => {
  const m = router.match(method, path);
  return m && 'route' in m ? { path: m.route.path, method: m.route.method, params: m.params } : m;
};

t.test('a static segment beats a parameter, whatever the declaration order', async (t) => {
  t.same(matched('GET', '/v1/customers/trash'), { path: '/v1/customers/trash', method: 'GET', params: {} });
  t.same(matched('GET', '/v1/customers/c1'), { path: '/v1/customers/{id}', method: 'GET', params: { id: 'c1' } });
  t.same(matched('GET', '/v1/customers/c1/health'), {
    path: '/v1/customers/{id}/health',
    method: 'GET',
    params: { id: 'c1' },
  });
  t.same(
    matched('PATCH', '/v1/customers/trash'),
    { path: '/v1/customers/{id}', method: 'PATCH', params: { id: 'trash' } },
    'a method the static route lacks falls through to the parameter route',
  );
});

t.test('a known path with another method lists the allowed methods (405)', async (t) => {
  t.same(matched('PUT', '/v1/customers'), { allowed: ['GET', 'POST'] });
  const m = router.match('POST', '/v1/customers/c1');
  t.same(m && 'allowed' in m ? [...m.allowed].sort() : m, ['DELETE', 'GET', 'PATCH']);
});

t.test('unknown paths are not found (404)', async (t) => {
  t.equal(router.match('GET', '/v1/nothing'), null);
  t.equal(router.match('GET', '/v1/customers/c1/health/extra'), null);
  t.equal(router.match('GET', '/v1/customers//health'), null, 'an empty parameter matches nothing');
});

t.test('parameters are percent-decoded; malformed encoding matches nothing instead of throwing', async (t) => {
  t.same(matched('GET', '/v1/customers/a%2Fb%20c'), {
    path: '/v1/customers/{id}',
    method: 'GET',
    params: { id: 'a/b c' },
  });
  t.equal(router.match('GET', '/v1/customers/%E0%A4%A'), null);
  t.equal(router.match('GET', '/v1/customers/%'), null);
  t.same(
    matched('GET', '/v1/customers/trash/'),
    { path: '/v1/customers/trash', method: 'GET', params: {} },
    'a trailing slash is ignored',
  );
});
