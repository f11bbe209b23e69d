import t from '#tap';
import { bootstrap, closeDb, db, seed } from '../helpers/stack.js';
import type { Answer } from './http.js';
import { tenantLedger } from './support.js';

// The fuzz suite's check that a refused request stored nothing (tenantLedger): it sees every
// change of content, and only changes of content, in the tables it watches.
t.teardown(closeDb);

const refused: Answer = { ok: true, status: 400, headers: new Map(), body: Buffer.alloc(0), text: '', json: undefined };
const accepted: Answer = { ...refused, status: 201 };

t.test('a refused answer after a write is a violation; a write that changes nothing is not', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 3);
  const other = await bootstrap();
  const ledger = tenantLedger(ws.tenant_id, ['customers', 'contacts (email)']);
  await ledger.start();
  t.same(await ledger.after(refused), [], 'nothing written');

  await db()`UPDATE customers SET name = name WHERE tenant_id = ${ws.tenant_id}`;
  t.same(await ledger.after(refused), [], 'rows rewritten as they were');

  await db()`UPDATE customers SET arr = arr + 1 WHERE tenant_id = ${ws.tenant_id} AND external_id = 'cust-000002'`;
  t.match(await ledger.after(refused), [{ kind: 'stored_by_rejected', message: /^400 answer, yet customers "3:/ }]);

  await seed(other.tenant_id, 2);
  t.same(await ledger.after(refused), [], "another workspace's rows are not watched");

  await db()`DELETE FROM customers WHERE tenant_id = ${ws.tenant_id} AND external_id = 'cust-000003'`;
  t.same(await ledger.after(accepted), [], 'an accepted answer may store');
  t.same(await ledger.after(refused), [], 'measured from the snapshot after it');

  const [c] = await db()<Array<{ id: string }>>`
    SELECT id FROM customers WHERE tenant_id = ${ws.tenant_id} AND external_id = 'cust-000001'`;
  await db()`INSERT INTO contacts (tenant_id, customer_id, email, name) VALUES (${ws.tenant_id}, ${c.id}, 'a@x.example', 'A')`;
  t.match(await ledger.after(refused), [{ message: /contacts "0:" became "1:/ }], 'an insert');
  await db()`UPDATE contacts SET name = 'B' WHERE tenant_id = ${ws.tenant_id}`;
  t.same(await ledger.after(refused), [], 'a column the ledger does not read');
});

t.test('a table watched WHERE a condition holds sees only the rows that meet it', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 2);
  const ledger = tenantLedger(ws.tenant_id, ["customers (external_id) WHERE x.status = 'active'"]);
  await ledger.start();
  await db()`UPDATE customers SET status = 'churned' WHERE tenant_id = ${ws.tenant_id} AND external_id = 'cust-000001'`;
  t.match(await ledger.after(refused), [{ message: /customers "2:\w*" became "1:/ }], 'a row leaving the condition');
  await db()`UPDATE customers SET external_id = 'moved' WHERE tenant_id = ${ws.tenant_id} AND status = 'churned'`;
  t.same(await ledger.after(refused), [], 'a change outside the condition');
});
