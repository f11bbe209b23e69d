import t from '#tap';
import { uuidv7 } from '../../lib/ids.js';
import { bootstrap, closeDb, db, seed, startTier, waitFor } from '../helpers/stack.js';

// An outbox row no retry can publish (an occurred_at past what csp.events' DateTime holds, as pushed
// activity could carry before the API refused it) is set aside with its reason, and the relay goes on
// at its pace: before, every poll failed on it and the relay spent up to 10 s in backoff between polls,
// holding back every generated event of every workspace.
t.teardown(closeDb);

t.test('an unpublishable outbox row is set aside; the rows after it are relayed at once', async (t) => {
  const ws = await bootstrap();
  await seed(ws.tenant_id, 1);
  const [{ id: customer }] = await db()<Array<{ id: string }>>`
    SELECT id::text FROM customers WHERE tenant_id = ${ws.tenant_id} LIMIT 1`;
  const poison = uuidv7();
  await db()`
    INSERT INTO event_outbox (id, tenant_id, customer_id, event_name, properties, occurred_at, surface)
    VALUES (${poison}, ${ws.tenant_id}, ${customer}, 'email_sent', '{}', '6408-09-18T00:00:00Z', 'integration')`;
  await startTier(t, 'processors', { OUTBOX_TENANTS: ws.tenant_id });

  const row = (id: string) =>
    db()<Array<{ published_at: Date | null; unpublishable: string | null }>>`
      SELECT published_at, unpublishable FROM event_outbox WHERE id = ${id}`.then((r) => r[0]);
  const aside = await waitFor('the row set aside', async () => (await row(poison)).unpublishable ?? undefined, 30_000);
  t.match(aside, /out of range/i, `the reason: ${aside}`);
  t.ok((await row(poison)).published_at, 'marked published, so no relay takes it again');

  // Several rows one after the other: each is relayed within a few polls, none waits out a backoff.
  for (let i = 0; i < 3; i++) {
    const id = uuidv7();
    const inserted = Date.now();
    await db()`
      INSERT INTO event_outbox (id, tenant_id, customer_id, event_name, properties)
      VALUES (${id}, ${ws.tenant_id}, ${customer}, 'task_created', '{}')`;
    await waitFor('the next row relayed', async () => Boolean((await row(id)).published_at), 30_000, 20);
    const ms = Date.now() - inserted;
    t.ok(ms < 5000, `row ${i + 1} relayed ${ms} ms after it was written`);
    t.equal((await row(id)).unpublishable, null);
  }
});
