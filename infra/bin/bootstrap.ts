import { parseArgs } from 'node:util';
import { connectPg } from '../../lib/pg.js';
import { SCOPES } from '../../schemas/core/scopes.js';
import { stackProfile, stackUrls } from '../stack.js';
import { hashPassword, newApiKey, newIngestionKey, newPassword, sha256 } from '../../lib/credentials/secrets.js';

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
  const ingestionKey = newIngestionKey();
  const apiKey = newApiKey('test');
  const password = newPassword();
  const passwordHash = await hashPassword(password);
  const out = await sql.begin(async (tx) => {
    const [t] = await tx<
      { id: string }[]
    >`INSERT INTO tenants (name, plan) VALUES (${values.name!}, ${values.plan!}) RETURNING id::text`;
    const email = values.email ?? `admin+${t.id.slice(0, 8)}@example.com`;
    await tx`INSERT INTO ingestion_keys (tenant_id, key_hash, last4) VALUES (${t.id}, ${sha256(ingestionKey)}, ${ingestionKey.slice(-4)})`;
    const [u] = await tx<{ id: string }[]>`
      INSERT INTO users (tenant_id, email, password_hash, role) VALUES (${t.id}, ${email}, ${passwordHash}, 'admin') RETURNING id::text`;
    await tx`
      INSERT INTO api_keys (tenant_id, name, key_hash, prefix, last4, scopes, role, created_by)
      VALUES (${t.id}, 'bootstrap admin key', ${sha256(apiKey)}, 'svc_sk_test_', ${apiKey.slice(-4)}, ${[...SCOPES]}, 'admin', ${u.id})`;
    return {
      tenant_id: t.id,
      ingest_url: ingestUrl,
      api_url: apiUrl,
      ingestion_key: ingestionKey,
      api_key: apiKey,
      admin_email: email,
      admin_password: password,
    };
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
