import { parseArgs } from 'node:util';
import { connectPg } from '../../lib/pg.js';
import { stackProfile, stackUrls } from '../stack.js';

/**
 * npm run seed -- --tenant ID --customers N [--source internal] [--prefix cust-] [--products N]
 * Adds customers with external ids PREFIX000001… (and products P0001…) to a workspace, for tests
 * and benchmarks. Prints {"tenant_id","customers","products","external_source","first_external_id"}.
 */
const { values } = parseArgs({
  options: {
    tenant: { type: 'string' },
    customers: { type: 'string', default: '0' },
    products: { type: 'string', default: '0' },
    source: { type: 'string', default: 'internal' },
    prefix: { type: 'string', default: 'cust-' },
  },
});
if (!values.tenant) {
  process.stderr.write('usage: seed --tenant ID --customers N [--source S] [--prefix P] [--products N]\n');
  process.exit(2);
}
const n = Number(values.customers);
const np = Number(values.products);
const sql = connectPg(process.env.DATABASE_URL ?? stackUrls(stackProfile(process.env.STACK_PROFILE)).DATABASE_URL, 1);
try {
  const [t] = await sql`SELECT id FROM tenants WHERE id = ${values.tenant}`;
  if (!t) throw new Error(`no workspace ${values.tenant}`);
  const [{ count }] = await sql<{ count: number }[]>`
    WITH ins AS (
      INSERT INTO customers (tenant_id, name, email_domain, status, external_id, external_source, arr)
      SELECT ${values.tenant}, 'Customer ' || i, 'customer' || i || '.example.com', 'active',
             ${values.prefix!} || lpad(i::text, 6, '0'), ${values.source!}, 1000 + (i % 100) * 250
      FROM generate_series(1, ${n}) AS i
      ON CONFLICT DO NOTHING RETURNING 1)
    SELECT count(*)::int AS count FROM ins`;
  if (np > 0) {
    await sql`INSERT INTO products (tenant_id, code, name) SELECT ${values.tenant}, 'P' || lpad(i::text, 4, '0'), 'Product ' || i FROM generate_series(1, ${np}) AS i ON CONFLICT DO NOTHING`;
  }
  process.stdout.write(
    JSON.stringify({
      tenant_id: values.tenant,
      customers: count,
      products: np,
      external_source: values.source,
      first_external_id: `${values.prefix}000001`,
    }) + '\n',
  );
} catch (err) {
  process.stderr.write(`seed failed: ${(err as Error).message}\n`);
  process.exitCode = 1;
} finally {
  await sql.end();
}
