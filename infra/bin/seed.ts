import { parseArgs } from 'node:util';
import { connectPg } from '../../lib/pg.js';
import { stackProfile, stackUrls } from '../stack.js';
import { seedWorkspace } from '../workspace.js';

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
const sql = connectPg(process.env.DATABASE_URL ?? stackUrls(stackProfile(process.env.STACK_PROFILE)).DATABASE_URL, 1);
try {
  const out = await seedWorkspace(sql, {
    tenant: values.tenant,
    customers: Number(values.customers),
    products: Number(values.products),
    source: values.source!,
    prefix: values.prefix!,
  });
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (err) {
  process.stderr.write(`seed failed: ${(err as Error).message}\n`);
  process.exitCode = 1;
} finally {
  await sql.end();
}
