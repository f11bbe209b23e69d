import t, { type Test } from '#tap';
import { client, sharedApi } from '../core-api/_helpers.js';
import { send } from '../fuzz/http.js';
import { bootstrap, closeDb } from '../helpers/stack.js';

// A request whose body length cannot be known (a Content-Length that is not a plain number) is
// dropped by uWS v20.30, its connection closed unanswered, after it has called the route's handler.
// The client never learns what became of it, so nothing of it may happen: routes that take no body
// (a soft delete, a restore) must not act on it either.
t.teardown(closeDb);
const api = await sharedApi(t);
const ws = await bootstrap();
const c = client(api.url, ws.api_key);
const auth: [string, string] = ['Authorization', `Bearer ${ws.api_key}`];

/** The request with a Content-Length in doubt: whatever comes back, it is no success. */
async function doubtful(t: Test, method: string, path: string, length: string): Promise<void> {
  const a = await send(api.port, {
    method,
    path,
    headers: [auth, ['Content-Length', length]],
    body: Buffer.from('{}'),
  });
  t.notOk(a.ok && a.status < 300, `${method} ${path} with Content-Length ${length}: ${a.ok ? a.status : a.failure}`);
}

// uWS v20.30 takes 1 to 9 digits; ten are too many for it, whatever their value.
for (const length of ['2abc', 'abc', '-2', '2, 2', '0x2', '2.0', '+2', '0000000002']) {
  t.test(`Content-Length: ${length}: neither a soft delete nor a restore happens`, async (t) => {
    const created = await c.post('/v1/customers', { name: `Doubt ${length}` });
    t.equal(created.status, 201);
    const id = created.body.id as string;
    await doubtful(t, 'DELETE', `/v1/customers/${id}`, length);
    // Had the dropped request deleted it, the customer would already be in the trash: 404.
    t.equal((await c.del(`/v1/customers/${id}`)).status, 204, 'the customer was still there to delete');
    await doubtful(t, 'POST', `/v1/customers/${id}/restore`, length);
    t.equal((await c.post(`/v1/customers/${id}/restore`)).status, 200, 'it was still in the trash to restore');
  });
}

t.test('a Content-Length of plain digits is taken as before', async (t) => {
  const created = await c.post('/v1/customers', { name: 'Plain length' });
  const id = created.body.id as string;
  for (const [method, path, status] of [
    ['DELETE', `/v1/customers/${id}`, 204],
    ['POST', `/v1/customers/${id}/restore`, 200],
  ] as const) {
    const a = await send(api.port, {
      method,
      path,
      headers: [auth, ['Content-Length', '02']],
      body: Buffer.from('{}'),
    });
    t.equal(a.ok && a.status, status, `${method} ${path} with Content-Length 02`);
  }
});
