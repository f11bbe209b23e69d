import { randomBytes } from 'node:crypto';
import t from '#tap';
import { client, startApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb, db, privateJetStream, startTier, waitFor } from '../helpers/stack.js';
import { startReceiver } from '../helpers/webhook-receiver.js';

/**
 * No personal data of an erased customer is left in PostgreSQL, in the rows that carry its id and
 * in those that do not: the bulk-import rows it came in, the webhook events about it, the addresses
 * of its people in calendar meetings not yet produced. Every value of the customer carries a token
 * of its own, looked for in every text, jsonb, array and bytea column of every table (found in
 * information_schema, so a table added later is searched too). Webhook subscribers still receive
 * customer.deleted whole, one of them only after the erasure completed. Another customer of the
 * workspace keeps everything. Runs on a JetStream of its own (its webhook events).
 */
t.teardown(closeDb);

/** Columns searched: everything that can hold a name, an address or an id given by a client. */
const TYPES = ['text', 'character varying', 'character', 'json', 'jsonb', 'ARRAY', 'bytea'];

/** Where `token` occurs, as `table.column` → rows: the workspace's rows, or every row of a table without tenant_id. */
async function occurrences(tenantId: string, token: string): Promise<Record<string, number>> {
  const sql = db();
  const cols = await sql<Array<{ table: string; column: string; type: string; tenant: boolean }>>`
    SELECT c.table_name AS table, c.column_name AS column, c.data_type AS type,
      EXISTS (SELECT 1 FROM information_schema.columns x WHERE x.table_schema = c.table_schema
        AND x.table_name = c.table_name AND x.column_name = 'tenant_id') AS tenant
    FROM information_schema.columns c
    JOIN information_schema.tables tb ON tb.table_schema = c.table_schema AND tb.table_name = c.table_name
      AND tb.table_type = 'BASE TABLE'
    WHERE c.table_schema = current_schema() AND c.data_type = ANY(${TYPES})
    ORDER BY 1, 2`;
  const byTable = new Map<string, { tenant: boolean; cols: Array<{ column: string; type: string }> }>();
  for (const c of cols) {
    const e = byTable.get(c.table) ?? { tenant: c.tenant, cols: [] };
    e.cols.push(c);
    byTable.set(c.table, e);
  }
  const out: Record<string, number> = {};
  const q = (name: string) => `"${name.replaceAll('"', '""')}"`;
  for (const [table, { tenant, cols }] of byTable) {
    const counts = cols.map(({ column, type }, i) => {
      const text = type === 'bytea' ? `encode(${q(column)}, 'escape')` : `${q(column)}::text`;
      return `count(*) FILTER (WHERE strpos(lower(${text}), $2) > 0) AS c${i}`;
    });
    const [row] = await sql.unsafe<Array<Record<string, string>>>(
      `SELECT ${counts.join(', ')} FROM ${q(table)} WHERE ${tenant ? 'tenant_id = $1' : '$1::uuid IS NOT NULL'}`,
      [tenantId, token.toLowerCase()],
    );
    cols.forEach(({ column }, i) => {
      if (Number(row[`c${i}`]) > 0) out[`${table}.${column}`] = Number(row[`c${i}`]);
    });
  }
  return out;
}

const person = (token: string, company: string) => ({
  name: `${company} ${token}`,
  external_id: `${company.slice(0, 3).toLowerCase()}-${token}`,
  email_domain: `${company.toLowerCase()}-${token}.example`,
});

t.test('a permanent delete leaves no personal data of the customer in any PostgreSQL table', async (t) => {
  const gone = randomBytes(6).toString('hex');
  const kept = randomBytes(6).toString('hex');
  const target = person(gone, 'Vandelay');
  const other = person(kept, 'Kramerica');
  const ws = await bootstrap();
  const nats = await privateJetStream(t);
  const api = await startApi(t, nats.env);
  const rx = await startReceiver(t);
  await startTier(t, 'processors', {
    WEBHOOK_TENANTS: ws.tenant_id,
    WEBHOOK_POLL_MS: '50',
    // The late subscriber's endpoint fails until the test lets it answer: its delivery stays pending.
    WEBHOOK_RETRY_SCHEDULE: Array.from({ length: 400 }, () => '300').join(','),
    ERASURE_TENANTS: ws.tenant_id,
    ERASURE_POLL_MS: '100',
    ...nats.env,
  });
  const c = client(api.url, ws.api_key);
  const subscribe = async (path: string, events: string[]) => {
    const r = await c.post('/v1/webhook-subscriptions', { url: rx.url(path), events });
    t.equal(r.status, 201, `subscribed at ${path}`);
    return r.body.id as string;
  };
  const hooks = await subscribe('/hooks', ['*']);
  rx.on('/late', { status: 503 });
  await subscribe('/late', ['customer.deleted']);

  // Both customers come in through a bulk import.
  const job = await c.post('/v1/customers/bulk-import', {
    customers: [target, other],
    mode: 'create_or_update',
    conflict_resolution: 'skip',
  });
  t.equal(job.status, 202, 'the import is accepted');
  await waitFor(
    'the import finished',
    async () => (await c.get(`/v1/jobs/${job.body.job_id}`)).body.status === 'succeeded',
    30_000,
    100,
  );
  const ids = await db()<Array<{ id: string; external_id: string }>>`
    SELECT id::text, external_id FROM customers WHERE tenant_id = ${ws.tenant_id}`;
  const targetId = ids.find((r) => r.external_id === target.external_id)!.id;
  const otherId = ids.find((r) => r.external_id === other.external_id)!.id;
  const art = `art@${target.email_domain}`;
  const kel = `kel@${other.email_domain}`;
  for (const [id, name, email] of [
    [targetId, `Art ${gone}`, art],
    [otherId, `Kel ${kept}`, kel],
  ])
    t.equal((await c.post(`/v1/customers/${id}/contacts`, { name, email })).status, 201, 'a contact added');
  t.equal(
    (await c.post('/v1/tasks', { customer_id: targetId, title: `Call Art ${gone}` })).status,
    201,
    'a task for the customer',
  );

  // An import another core-api process is running (its heartbeat fresh): rows of both customers
  // among 998 others, and calendar meetings not yet produced, with their people's addresses.
  const rows = [
    { ...target, arr: 1200 },
    { ...other, arr: 900 },
    ...Array.from({ length: 998 }, (_, i) => ({ name: `Filler ${i}`, external_id: `filler-${i}` })),
  ];
  const [running] = await db()<Array<{ id: string }>>`
    INSERT INTO jobs (id, tenant_id, type, status, params, input, total, heartbeat_at, started_at)
    VALUES (gen_random_uuid(), ${ws.tenant_id}, 'customers.bulk_import', 'running',
      '{"mode": "create_or_update", "conflict_resolution": "skip"}', ${JSON.stringify(rows)}::text::jsonb,
      ${rows.length}, now() + interval '1 hour', now())
    RETURNING id::text`;
  t.teardown(
    () => db()`UPDATE jobs SET status = 'failed', finished_at = now() WHERE id = ${running.id} AND status = 'running'`,
  );
  const someone = `someone@elsewhere-${kept}.example`;
  await db()`
    INSERT INTO integration_pending_meetings (tenant_id, name, event_id, starts_at, ends_at, attendees)
    VALUES (${ws.tenant_id}, 'google_calendar', 'mixed', now() + interval '1 day', now() + interval '25 hours',
        ${[art, `bob@${target.email_domain}`, kel, someone]}::text[]),
      (${ws.tenant_id}, 'google_calendar', 'theirs', now() + interval '1 day', now() + interval '25 hours',
        ${[`bob@${target.email_domain}`]}::text[])`;

  const types = (path: string, id: string) =>
    rx
      .at(path)
      .filter((r) => r.json.data.id === id || r.json.data.customer_id === id)
      .map((r) => r.json.type);
  await waitFor(
    'the events of both customers delivered',
    () =>
      types('/hooks', targetId).includes('customer.created') &&
      types('/hooks', targetId).includes('task.created') &&
      types('/hooks', otherId).includes('customer.created'),
    20_000,
  );
  const before = await occurrences(ws.tenant_id, gone);
  for (const at of [
    'customers.name',
    'contacts.email',
    'tasks.title',
    'jobs.input',
    'integration_pending_meetings.attendees',
    'webhook_outbox.data',
    'webhook_deliveries.body',
  ])
    t.ok(before[at] > 0, `the search finds the customer in ${at}`);
  const otherBefore = await occurrences(ws.tenant_id, kept);
  const [finished] = await db()<Array<{ input: unknown[] }>>`SELECT input FROM jobs WHERE id = ${job.body.job_id}`;
  t.same(finished.input, [], 'a finished import keeps none of its rows');

  const t0 = performance.now();
  const del = await c.del(`/v1/customers/${targetId}?hard=true`);
  t.equal(del.status, 204, 'the permanent delete answers 204');
  t.comment(`DELETE ?hard=true with a running import of ${rows.length} rows: ${Math.round(performance.now() - t0)} ms`);

  const deleted = await waitFor(
    'customer.deleted delivered',
    () => rx.at('/hooks').find((r) => r.json.type === 'customer.deleted' && r.json.data.id === targetId),
    20_000,
  );
  t.equal(deleted.json.data.name, target.name, 'the subscriber is told which customer went, by id and name');
  t.equal(deleted.json.data.permanent, true, 'a permanent deletion');
  await waitFor(
    'the erasure completed',
    async () => (await c.get(`/v1/erasures/${targetId}`)).body.status === 'completed',
    60_000,
    100,
  );
  // The late subscriber's delivery is still pending: it keeps the body it will send, and only it.
  await waitFor(
    'only the pending delivery holds the customer',
    async () => JSON.stringify(Object.keys(await occurrences(ws.tenant_id, gone))) === '["webhook_deliveries.body"]',
    20_000,
    200,
  );
  const [pending] = await db()<Array<{ status: string; body: string }>>`
    SELECT status, body FROM webhook_deliveries WHERE tenant_id = ${ws.tenant_id}
      AND webhook_body_customer(event_type, body) = ${targetId} AND event_type = 'customer.deleted'
      AND subscription_id <> ${hooks}`;
  t.equal(pending.status, 'pending', 'the late delivery is pending');
  t.ok(pending.body.includes(target.name), 'and holds what it will send');

  rx.on('/late', { status: 204 });
  const late = await waitFor(
    'the late subscriber received customer.deleted',
    () => rx.at('/late').find((r) => r.json.type === 'customer.deleted' && r.json.data.id === targetId),
    20_000,
  );
  t.equal(late.json.data.name, target.name, 'sent whole after the erasure');
  await waitFor(
    'no table holds the customer',
    async () => Object.keys(await occurrences(ws.tenant_id, gone)).length === 0,
    20_000,
    200,
  );
  t.same(await occurrences(ws.tenant_id, gone), {}, 'no column of any table holds any value of the customer');

  // What stays of the delivery log: ids, event type, status and times; the body reduced to ids.
  const [log] = await db()<Array<{ body: string; status: string }>>`
    SELECT body, status FROM webhook_deliveries WHERE subscription_id = ${hooks} AND event_type = 'customer.deleted'
      AND webhook_body_customer(event_type, body) = ${targetId}`;
  t.equal(log.status, 'succeeded', 'the delivery succeeded');
  t.same(
    JSON.parse(log.body),
    { type: 'customer.deleted', timestamp: deleted.json.timestamp, data: { id: targetId, erased: true } },
    'the stored body keeps the type, the time and the ids',
  );
  const attempts = await c.get(`/v1/webhook-subscriptions/${hooks}/deliveries?limit=100`);
  t.ok(
    attempts.body.data.some(
      (a: { event_type: string; status: string }) => a.event_type === 'customer.deleted' && a.status === 'succeeded',
    ),
    'the delivery log still lists the attempt',
  );

  // The other customer keeps everything, the running import its rows (the customer's became null).
  t.same(await occurrences(ws.tenant_id, kept), otherBefore, "the other customer's data is where it was");
  t.equal((await c.get(`/v1/customers/${otherId}`)).body.name, other.name, 'the other customer is there');
  const [job2] = await db()<Array<{ input: unknown[] }>>`SELECT input FROM jobs WHERE id = ${running.id}`;
  t.same(job2.input.slice(0, 3), [null, rows[1], rows[2]], "the running import's row of the customer is null");
  t.equal(job2.input.length, rows.length, 'the import keeps its length (row errors are by index)');
  const meetings = await db()<Array<{ event_id: string; attendees: string[] }>>`
    SELECT event_id, attendees FROM integration_pending_meetings WHERE tenant_id = ${ws.tenant_id} ORDER BY 1`;
  t.same(
    meetings,
    [{ event_id: 'mixed', attendees: [kel, someone] }],
    "the customer's people leave the pending meetings; one left with nobody is dropped",
  );

  const record = (await c.get(`/v1/erasures/${targetId}`)).body;
  const tables = record.rows_removed.postgres.tables;
  t.equal(tables['jobs.input'], 1, 'the import row counted');
  t.equal(tables['integration_pending_meetings.attendees'], 3, 'the addresses counted');
  t.ok(tables['webhook_deliveries.body'] >= 2, 'the bodies of deliveries that had ended counted');
  t.notOk(JSON.stringify(record).includes(gone), 'the record holds no value of the customer');

  // The import goes on (its runner stalled: another takes it over), here with its first two rows: the
  // customer's row fails, the customer does not come back.
  await db()`
    UPDATE jobs SET input = jsonb_path_query_array(input, '$[0 to 1]'), total = 2,
      heartbeat_at = now() - interval '1 hour'
    WHERE id = ${running.id}`;
  const resumed = await waitFor(
    'the import finished',
    async () => {
      const r = await c.get(`/v1/jobs/${running.id}`);
      return r.body.status === 'succeeded' ? r.body : undefined;
    },
    30_000,
    100,
  );
  t.same(
    resumed.counts,
    { created: 0, updated: 1, skipped: 0, failed: 1 },
    'the other customer updated, one row failed',
  );
  t.match(resumed.errors, [{ index: 0, code: 'invalid_type' }], "the customer's row failed");
  t.same(await occurrences(ws.tenant_id, gone), {}, 'the customer did not come back');
});
