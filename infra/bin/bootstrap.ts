import { parseArgs } from 'node:util';
import { connectPg } from '../../lib/pg.js';
import { stackProfile, stackUrls } from '../stack.js';
import { createWorkspace } from '../workspace.js';

/**
 * npm run bootstrap -- [--json] [--name NAME] [--plan starter|growth|scale|enterprise] [--email E]
 * Creates a new, independent workspace with its ingestion key, an admin user and an admin API key,
 * and prints the credentials once (they are stored only hashed).
 */
const { values } = parseArgs({
  options: {
    json: { type: 'boolean', default: false },
    name: { type: 'string', default: 'Demo workspace' },
    plan: { type: 'string', default: 'enterprise' },
    email: { type: 'string' },
  },
});

const profile = stackProfile(process.env.STACK_PROFILE);
const dbUrl = process.env.DATABASE_URL ?? stackUrls(profile).DATABASE_URL;
const ingestUrl = process.env.PUBLIC_INGEST_URL ?? `http://127.0.0.1:${profile.ingestPort}`;
const apiUrl = process.env.PUBLIC_API_URL ?? `http://127.0.0.1:${profile.apiPort}`;

const sql = connectPg(dbUrl, 1);
try {
  const out = await createWorkspace(sql, {
    name: values.name!,
    plan: values.plan!,
    email: values.email,
    ingestUrl,
    apiUrl,
  });
  if (values.json) process.stdout.write(JSON.stringify(out) + '\n');
  else {
    process.stdout.write(`Workspace ${out.tenant_id} created. These secrets are shown once:\n`);
    for (const [k, v] of Object.entries(out)) process.stdout.write(`  ${k.padEnd(14)} ${v}\n`);
  }
} catch (err) {
  process.stderr.write(`bootstrap failed: ${(err as Error).message}\n`);
  process.exitCode = 1;
} finally {
  await sql.end();
}
