import fs from 'node:fs';
import path from 'node:path';
import type { Sql } from '../../lib/pg.js';

/**
 * Applies core-api/db/migrations/NNNN_name.sql in order, each in its own transaction, recording
 * them in schema_migrations. An advisory lock lets several processes call it at once.
 */
export async function migrate(sql: Sql, dir: string): Promise<string[]> {
  const files = fs
    .readdirSync(dir)
    .filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f))
    .sort();
  const applied: string[] = [];
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(727274)`;
    await tx`CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`;
    const done = new Set((await tx<{ name: string }[]>`SELECT name FROM schema_migrations`).map((r) => r.name));
    for (const file of files) {
      if (done.has(file)) continue;
      await tx.unsafe(fs.readFileSync(path.join(dir, file), 'utf8'));
      await tx`INSERT INTO schema_migrations (name) VALUES (${file})`;
      applied.push(file);
    }
  });
  return applied;
}
