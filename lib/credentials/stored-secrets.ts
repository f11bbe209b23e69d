import type { Sql } from '../pg.js';
import { type DataCipher, isCiphertext } from './data-cipher.js';

/**
 * Every column that holds a secret at rest, by table and key: what `npm run rotate-data-key`
 * rewrites under the current key, and what the first start of a version encrypts where an older
 * version left it in clear (webhook secrets stored before secrets were encrypted) or in the first
 * format (`v1.`, integration tokens under INTEGRATION_TOKEN_KEY).
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

/**
 * Which values a pass rewrites under the current key: `stale`, every value that is not under it
 * (a rotation, `npm run rotate-data-key`); `legacy`, only those in clear or in the first format,
 * the upgrade every start of core-api finishes (a value under another configured key stays as it
 * is: the operator rotates when every tier holds the new key).
 */
export type SecretsPass = 'stale' | 'legacy';

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
  o: {
    /** Only these workspaces' secrets (a staged rotation); empty: every workspace's. */
    tenants?: readonly string[];
    pass?: SecretsPass;
    /** Checked between batches: a pass stopped there resumes where it was on the next run. */
    signal?: AbortSignal;
  } = {},
): Promise<RotationReport> {
  const { tenants = [], pass = 'stale', signal } = o;
  const report: RotationReport = { rewritten: {}, unreadable: {} };
  // Values that stay: under the current key, or (legacy) under any key of the second format.
  const prefix = pass === 'stale' ? `v2.${cipher.currentKeyId}.%` : 'v2.%';
  const scope = tenants.length ? `AND tenant_id = ANY('{${tenants.map(uuidOnly).join(',')}}'::uuid[])` : '';
  const settled = (v: string) => (pass === 'stale' ? cipher.isCurrent(v) : v.startsWith('v2.'));
  for (const { table, key, columns } of SECRET_COLUMNS) {
    const stale = `(${columns.map((c) => `(${c} IS NOT NULL AND ${c} NOT LIKE $1)`).join(' OR ')}) ${scope}`;
    const skipped = new Set<string>();
    for (;;) {
      signal?.throwIfAborted();
      const done = await sql.begin(async (tx) => {
        const rows = await tx.unsafe<Array<Record<string, string | null>>>(
          `SELECT ${key}::text AS row_key, ${columns.join(', ')} FROM ${table}
           WHERE (${stale}) AND NOT (${key}::text = ANY($2::text[]))
           ORDER BY ${key} LIMIT ${BATCH} FOR UPDATE SKIP LOCKED`,
          [prefix, [...skipped]],
        );
        // The batch's rows with every column as it is to be, written back in one statement.
        const keys: string[] = [];
        const values: Array<Array<string | null>> = columns.map(() => []);
        for (const row of rows) {
          let changed = false;
          const next = columns.map((c) => {
            const v = row[c];
            if (v === null || settled(v)) return v;
            try {
              const out = cipher.encrypt(isCiphertext(v) ? cipher.decrypt(v) : v);
              report.rewritten[`${table}.${c}`] = (report.rewritten[`${table}.${c}`] ?? 0) + 1;
              changed = true;
              return out;
            } catch {
              report.unreadable[`${table}.${c}`] = (report.unreadable[`${table}.${c}`] ?? 0) + 1;
              skipped.add(row.row_key!);
              return v;
            }
          });
          if (!changed) continue;
          keys.push(row.row_key!);
          for (let i = 0; i < columns.length; i++) values[i].push(next[i]);
        }
        if (keys.length > 0)
          await tx.unsafe(
            `UPDATE ${table} t SET ${columns.map((c) => `${c} = v.${c}`).join(', ')}
             FROM unnest($1::text[], ${columns.map((_, i) => `$${i + 2}::text[]`).join(', ')})
               AS v(row_key, ${columns.join(', ')})
             WHERE t.${key}::text = v.row_key`,
            [keys, ...values],
          );
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
