import { type DataCipher, isCiphertext } from '../lib/credentials/data-cipher.js';
import type { Sql } from '../lib/pg.js';

/**
 * Every column that holds a secret at rest, by table and key: what `npm run rotate-data-key`
 * rewrites under the current key. A webhook secret may still be in clear (stored before secrets
 * were encrypted): it is encrypted then.
 */
const SECRET_COLUMNS = [
  { table: 'webhook_subscriptions', key: 'id', columns: ['secret', 'previous_secret'] },
  {
    table: 'integrations',
    key: 'connection_id',
    columns: ['access_token', 'refresh_token', 'code_verifier', 'webhook_secret'],
  },
] as const;

const uuidOnly = (id: string): string => {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id))
    throw new Error(`not a workspace id: ${id}`);
  return id;
};

/** Rows rewritten per transaction: short locks, so the tiers' own writes wait milliseconds. */
const BATCH = 200;

export interface RotationReport {
  /** Values rewritten under the current key, per `table.column`. */
  rewritten: Record<string, number>;
  /** Values no configured key opens, per `table.column`: left as they are. */
  unreadable: Record<string, number>;
}

/**
 * Rewrites every stored secret that is not under the cipher's current (first) key, in batches of
 * short transactions that lock only their rows (SKIP LOCKED: a row a tier is writing is taken on
 * the next pass). The tiers keep running: they read every configured key, and what they write
 * meanwhile is already under the current key once they were given it first. Idempotent: a second
 * run finds nothing to do.
 */
export async function rotateSecrets(
  sql: Sql,
  cipher: DataCipher,
  log: (line: string) => void,
  /** Only these workspaces' secrets (a staged rotation); empty: every workspace's. */
  tenants: readonly string[] = [],
): Promise<RotationReport> {
  const report: RotationReport = { rewritten: {}, unreadable: {} };
  const prefix = `v2.${cipher.currentKeyId}.%`;
  const scope = tenants.length ? `AND tenant_id = ANY('{${tenants.map(uuidOnly).join(',')}}'::uuid[])` : '';
  for (const { table, key, columns } of SECRET_COLUMNS) {
    const stale = `(${columns.map((c) => `(${c} IS NOT NULL AND ${c} NOT LIKE $1)`).join(' OR ')}) ${scope}`;
    const skipped = new Set<string>();
    for (;;) {
      const done = await sql.begin(async (tx) => {
        const rows = await tx.unsafe<Array<Record<string, string | null>>>(
          `SELECT ${key}::text AS row_key, ${columns.join(', ')} FROM ${table}
           WHERE (${stale}) AND NOT (${key}::text = ANY($2::text[]))
           ORDER BY ${key} LIMIT ${BATCH} FOR UPDATE SKIP LOCKED`,
          [prefix, [...skipped]],
        );
        for (const row of rows) {
          const next: Record<string, string> = {};
          for (const c of columns) {
            const v = row[c];
            if (v === null || cipher.isCurrent(v)) continue;
            try {
              next[c] = cipher.encrypt(isCiphertext(v) ? cipher.decrypt(v) : v);
            } catch {
              report.unreadable[`${table}.${c}`] = (report.unreadable[`${table}.${c}`] ?? 0) + 1;
              skipped.add(row.row_key!);
            }
          }
          const names = Object.keys(next);
          if (!names.length) continue;
          await tx.unsafe(
            `UPDATE ${table} SET ${names.map((c, i) => `${c} = $${i + 2}`).join(', ')} WHERE ${key}::text = $1`,
            [row.row_key, ...names.map((c) => next[c])],
          );
          for (const c of names) report.rewritten[`${table}.${c}`] = (report.rewritten[`${table}.${c}`] ?? 0) + 1;
        }
        return rows.length < BATCH;
      });
      if (!done) continue;
      // Rows a tier held locked were skipped: pass again until none is left.
      const [left] = await sql.unsafe<Array<{ n: number }>>(
        `SELECT count(*)::int AS n FROM ${table} WHERE (${stale}) AND NOT (${key}::text = ANY($2::text[]))`,
        [prefix, [...skipped]],
      );
      if (left.n === 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    log(`${table}: ${columns.map((c) => `${c} ${report.rewritten[`${table}.${c}`] ?? 0}`).join(', ')} rewritten`);
  }
  return report;
}
