import t from '#tap';
import { client, isProblem, startApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb, seed } from '../helpers/stack.js';
import { apiKey } from '../metrics/support.js';

// The erasure records are the workspace's proof that a customer's data went (docs/erasure.md): an
// admin's to read. A csm key, even one that reads customers, is refused both the list and a record.
t.teardown(closeDb);

t.test('GET /v1/erasures and /v1/erasures/{id}: admins only', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 1);
  const api = await startApi(t);
  const admin = client(api.url, ws.api_key);
  const [customer] = (await admin.get('/v1/customers')).body.data;
  t.equal((await admin.del(`/v1/customers/${customer.id}?hard=true`)).status, 204);

  t.equal((await admin.get('/v1/erasures')).body.data[0]?.customer_id, customer.id, 'an admin reads the list');
  t.equal((await admin.get(`/v1/erasures/${customer.id}`)).status, 200, 'and the record');
  const csm = client(api.url, await apiKey(api.url, ws, 'csm', ['customers:read', 'customers:write']));
  t.equal((await csm.get('/v1/customers')).status, 200, 'the csm key reads customers');
  isProblem(t, await csm.get('/v1/erasures'), 403, 'insufficient_role');
  isProblem(t, await csm.get(`/v1/erasures/${customer.id}`), 403, 'insufficient_role');
});
