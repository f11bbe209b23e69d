import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { portOpen } from '../../infra/proc.js';
import { stackProfile, stackUrls } from '../../infra/stack.js';
import { buildRelease, checkoutRelease, DATA_DIR, fromCommit, type Release, runIn } from './release.js';
import { chExec, chRows } from './snapshot.js';

/**
 * node dist/test/upgrade/measure.js [--from <commit>] [--customers 100000] [--events 10000000]
 *
 * How long the upgrade from `--from` (test/upgrade/FROM by default) to this checkout takes on a
 * large workspace (docs/upgrading.md quotes it): the old version's stack on the dev profile's
 * ports, one workspace filled straight into the stores (customers by the old version's `seed`, a
 * week of webhook outbox rows and deliveries, finished bulk-import jobs with their rows, `--events`
 * events in ClickHouse of which a third carry a surface-B key), the old servers stopped, then the
 * new version's `infra:up` on the same data timed (servers, migrations, definitions), against the
 * same step on an empty data folder, and the statement that fills ClickHouse's key table from the
 * events stored before run again on its own. Prints one JSON line; leaves nothing running.
 */
const { values } = parseArgs({
  options: {
    from: { type: 'string', default: '' },
    customers: { type: 'string', default: '100000' },
    events: { type: 'string', default: '10000000' },
  },
});
const customers = Number(values.customers);
const events = Number(values.events);
const dev = stackProfile('dev');
const urls = stackUrls(dev);
const CH = `http://127.0.0.1:${dev.chHttpPort}`;
const say = (line: string) => process.stderr.write(`measure: ${line}\n`);

for (const port of [dev.natsPort, dev.chHttpPort, dev.pgPort, dev.edgePort])
  if (await portOpen(port)) throw new Error(`dev-profile port ${port} in use: stop the dev stack first`);

const old = buildRelease(fromCommit(values.from), say);
const head = checkoutRelease(say);
const down = (r: Release) => runIn(r, 'infra/cli.js', ['down', '--profile', 'dev']);
const fresh = () => {
  if (fs.existsSync(path.join(DATA_DIR, 'dev'))) down(old);
  fs.rmSync(path.join(DATA_DIR, 'dev'), { recursive: true, force: true });
};
const timed = (r: Release) => {
  const t0 = Date.now();
  runIn(r, 'infra/cli.js', ['up', '--profile', 'dev'], {}, say);
  return Date.now() - t0;
};

const figures: Record<string, number | string> = { from: old.label, customers, events };
try {
  // The upgrade's own cost on an empty data folder: servers, every migration, the definitions.
  fresh();
  timed(old);
  down(old);
  figures.empty_upgrade_ms = timed(head);
  down(head);

  fresh();
  timed(old);
  const ws = JSON.parse(runIn(old, 'infra/bin/bootstrap.js', ['--json', '--name', 'Measure'])) as {
    tenant_id: string;
  };
  const tenant = ws.tenant_id;
  let t0 = Date.now();
  runIn(old, 'infra/bin/seed.js', ['--tenant', tenant, '--customers', String(customers)]);
  figures.seed_customers_ms = Date.now() - t0;

  const sql = postgres(urls.DATABASE_URL, { max: 1, onnotice: () => {} });
  t0 = Date.now();
  const [sub] = await sql<Array<{ id: string }>>`
    INSERT INTO webhook_subscriptions (tenant_id, url, events, secret)
    VALUES (${tenant}, 'https://hooks.example.com/csp', ARRAY['*'], 'whsec_bWVhc3VyZQ==') RETURNING id::text`;
  // A week of webhook traffic: two events per customer (created, updated), each delivered.
  await sql`
    INSERT INTO webhook_outbox (tenant_id, type, data, occurred_at, published_at)
    SELECT ${tenant}, t.type, jsonb_build_object('id', c.id, 'name', c.name), now() - interval '1 day',
           now() - interval '1 day'
    FROM customers c CROSS JOIN (VALUES ('customer.created'), ('customer.updated')) AS t (type)
    WHERE c.tenant_id = ${tenant}`;
  await sql`
    INSERT INTO webhook_deliveries (tenant_id, subscription_id, message_id, event_type, body, status, attempts)
    SELECT tenant_id, ${sub.id}, id, type,
           jsonb_build_object('type', type, 'timestamp', occurred_at, 'data', data)::text, 'succeeded', 1
    FROM webhook_outbox WHERE tenant_id = ${tenant}`;
  // The bulk imports that made the customers: finished jobs of 1000 rows each.
  await sql`
    INSERT INTO jobs (id, tenant_id, type, status, params, input, total, processed, finished_at)
    SELECT gen_random_uuid(), ${tenant}, 'bulk_import', 'succeeded', '{}',
           (SELECT jsonb_agg(jsonb_build_object('name', 'Customer ' || i, 'external_id', 'cust-' || i))
            FROM generate_series(1, 1000) AS i), 1000, 1000, now()
    FROM generate_series(1, ${Math.ceil(customers / 1000)})`;
  figures.fill_postgres_ms = Date.now() - t0;
  await sql.end();

  t0 = Date.now();
  // Events in ClickHouse, as the writers store them; every third has a surface-B key.
  await chExec(
    CH,
    `INSERT INTO csp.events (tenant_id, customer_id, event_name, ts, event_id, batch_id, received_at,
       surface, external_id, user_id, properties)
     SELECT toUUID('${tenant}'), generateUUIDv4(), concat('event_', toString(number % 40)),
       toDateTime(now() - number % (86400 * 365)), generateUUIDv4(), generateUUIDv4(), now(),
       if(number % 3 = 0, 'b', 'a'), if(number % 3 = 0, concat('evt-', toString(number)), ''),
       concat('user-', toString(number % 5000)), '{"plan":"pro"}'
     FROM system.numbers LIMIT ${events}`,
  );
  figures.fill_clickhouse_ms = Date.now() - t0;
  down(old);

  figures.upgrade_ms = timed(head);
  const [keys] = await chRows<{ n: string }>(
    CH,
    `SELECT toString(count()) AS n FROM csp.event_keys WHERE tenant_id = toUUID('${tenant}')`,
  );
  figures.event_keys = Number(keys.n);
  // The key table's fill from the events stored before, on its own (into a scratch copy).
  await chExec(CH, 'CREATE TABLE csp.event_keys_measure AS csp.event_keys');
  t0 = Date.now();
  await chExec(
    CH,
    `INSERT INTO csp.event_keys_measure SELECT tenant_id, customer_id, external_id, batch_id
     FROM csp.events WHERE external_id != ''`,
  );
  figures.event_keys_fill_ms = Date.now() - t0;
  await chExec(CH, 'DROP TABLE csp.event_keys_measure');
  down(head);
} finally {
  try {
    down(head);
  } catch {}
}
process.stdout.write(`${JSON.stringify(figures)}\n`);
