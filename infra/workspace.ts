import type { Sql } from '../lib/pg.js';
import { hashPassword, newApiKey, newIngestionKey, newPassword, sha256 } from '../lib/credentials/secrets.js';
import { SCOPES } from '../schemas/core/scopes.js';

/**
 * What `npm run bootstrap` and `npm run seed` do, as functions: the CLIs (infra/bin/) and the test
 * helpers call them, the helpers in process, so a workspace costs a transaction, not a Node start.
 */

export interface NewWorkspace {
  tenant_id: string;
  ingest_url: string;
  api_url: string;
  ingestion_key: string;
  api_key: string;
  admin_email: string;
  admin_password: string;
}

export interface WorkspaceOptions {
  name: string;
  plan: string;
  /** The admin's e-mail; admin+<first 8 of the tenant id>@example.com when not given. */
  email?: string;
  /** Where the printed credentials say the tiers are. */
  ingestUrl: string;
  apiUrl: string;
  /**
   * The admin's password with its hash; a new random one when not given (tests reuse one: scrypt is
   * slow on purpose).
   */
  password?: { plain: string; hash: string };
}

/** A new, independent workspace with its ingestion key, an admin user and an admin API key (stored hashed). */
export async function createWorkspace(sql: Sql, o: WorkspaceOptions): Promise<NewWorkspace> {
  const ingestionKey = newIngestionKey();
  const apiKey = newApiKey('test');
  const password = o.password?.plain ?? newPassword();
  const passwordHash = o.password?.hash ?? (await hashPassword(password));
  return sql.begin(async (tx) => {
    const [t] = await tx<
      { id: string }[]
    >`INSERT INTO tenants (name, plan) VALUES (${o.name}, ${o.plan}) RETURNING id::text`;
    const email = o.email ?? `admin+${t.id.slice(0, 8)}@example.com`;
    await tx`
      INSERT INTO ingestion_keys (tenant_id, key_hash, last4)
      VALUES (${t.id}, ${sha256(ingestionKey)}, ${ingestionKey.slice(-4)})`;
    const [u] = await tx<{ id: string }[]>`
      INSERT INTO users (tenant_id, email, password_hash, role)
      VALUES (${t.id}, ${email}, ${passwordHash}, 'admin') RETURNING id::text`;
    await tx`
      INSERT INTO api_keys (tenant_id, name, key_hash, prefix, last4, scopes, role, created_by)
      VALUES (${t.id}, 'bootstrap admin key', ${sha256(apiKey)}, 'svc_sk_test_', ${apiKey.slice(-4)},
        ${[...SCOPES]}, 'admin', ${u.id})`;
    return {
      tenant_id: t.id,
      ingest_url: o.ingestUrl,
      api_url: o.apiUrl,
      ingestion_key: ingestionKey,
      api_key: apiKey,
      admin_email: email,
      admin_password: password,
    };
  });
}

export interface SeedOptions {
  tenant: string;
  customers: number;
  products: number;
  source: string;
  prefix: string;
}

export interface Seeded {
  tenant_id: string;
  customers: number;
  products: number;
  external_source: string;
  first_external_id: string;
}

/** Customers with external ids PREFIX000001… (and products P0001…) in a workspace, for tests and benchmarks. */
export async function seedWorkspace(sql: Sql, o: SeedOptions): Promise<Seeded> {
  const [t] = await sql`SELECT id FROM tenants WHERE id = ${o.tenant}`;
  if (!t) throw new Error(`no workspace ${o.tenant}`);
  const [{ count }] = await sql<{ count: number }[]>`
    WITH ins AS (
      INSERT INTO customers (tenant_id, name, email_domain, status, external_id, external_source, arr)
      SELECT ${o.tenant}, 'Customer ' || i, 'customer' || i || '.example.com', 'active',
             ${o.prefix} || lpad(i::text, 6, '0'), ${o.source}, 1000 + (i % 100) * 250
      FROM generate_series(1, ${o.customers}) AS i
      ON CONFLICT DO NOTHING RETURNING 1)
    SELECT count(*)::int AS count FROM ins`;
  if (o.products > 0) {
    await sql`
      INSERT INTO products (tenant_id, code, name)
      SELECT ${o.tenant}, 'P' || lpad(i::text, 4, '0'), 'Product ' || i FROM generate_series(1, ${o.products}) AS i
      ON CONFLICT DO NOTHING`;
  }
  return {
    tenant_id: o.tenant,
    customers: count,
    products: o.products,
    external_source: o.source,
    first_external_id: `${o.prefix}000001`,
  };
}
