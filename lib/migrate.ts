import fs from 'node:fs';
import path from 'node:path';
import type { Sql } from './pg.js';

/**
 * Applies the NNNN_name.sql files of `dir` (core-api/db/migrations) in order, each once, recording
 * them in schema_migrations. One transaction under an advisory lock, so several processes may call
 * it at once and a failed file leaves nothing half-applied.
 */
export async function migrate(sql: Sql, dir: string): Promise<string[]> {
  const files = fs
    .readdirSync(dir)
    .filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f))
    .sort();
  const applied: string[] = [];
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(727274)`;
    await tx`
      CREATE TABLE IF NOT EXISTS schema_migrations (
        name text PRIMARY KEY,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`;
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
