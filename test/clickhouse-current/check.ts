import { type Chdb, errorCode } from '../helpers/chdb.js';
import type { Recorded } from './recorded.js';
import { insertHead, type StatementKind } from './shapes.js';

/**
 * Runs one recorded statement shape on ClickHouse 26 (chDB, schema.sql applied, csp the current
 * database), as it was sent: its first example with its literals, with the settings it carried
 * (readonly=2, max_execution_time, …) as a SETTINGS clause.
 * - An INSERT whose rows followed the statement (… FORMAT RowBinary) was logged without them: the
 *   format must be an input format of 26, and the table and column list must take rows, which an
 *   INSERT … SELECT of no rows proves. formats.test.ts sends real RowBinary rows.
 * - The exceptions 26 raises as 18.16 does, and the product handles, are named in EXPECTED.
 */

export type Outcome = { ok: true; expected?: string } | { ok: false; error: string };

/**
 * Errors of a statement that the product meets on both engines and takes as done. Each is named in
 * docs/clickhouse.md.
 */
export const EXPECTED: ReadonlyArray<{ statement: RegExp; code: number; why: string }> = [
  {
    statement: /^ALTER TABLE \S+ ADD COLUMN /i,
    code: 15, // DUPLICATE_COLUMN
    why:
      'schema.sql adds columns without IF NOT EXISTS (18.16 has none); the column exists, ' +
      'and infra/apply.ts takes "already exists" as done on both engines',
  },
];

/** The kinds, in the order the summary lists them. */
export const KIND_ORDER: readonly StatementKind[] = ['read', 'insert-data', 'write', 'system', 'schema'];

const TRAILING_FORMAT = /\s+FORMAT\s+\w+\s*$/i;
const TRAILING_SETTINGS = /\bSETTINGS\s+\w+\s*=\s*[\w'.]+(?:\s*,\s*\w+\s*=\s*[\w'.]+)*\s*$/i;

/** `sql` with `settings` added as a SETTINGS clause (after one it already has), before its FORMAT. */
export function withSettings(sql: string, settings: Record<string, string>): string {
  const pairs = Object.entries(settings).map(([k, v]) => `${k} = ${/^-?\d+(\.\d+)?$/.test(v) ? v : `'${v}'`}`);
  if (pairs.length === 0) return sql;
  const format = TRAILING_FORMAT.exec(sql)?.[0] ?? '';
  const body = sql.slice(0, sql.length - format.length).trimEnd();
  return `${body}${TRAILING_SETTINGS.test(body) ? ', ' : ' SETTINGS '}${pairs.join(', ')}${format}`;
}

export function runShape(chdb: Chdb, r: Recorded): Outcome {
  try {
    if (r.kind === 'insert-data') {
      const head = insertHead(r.example)!;
      const isInput = chdb.run(`SELECT is_input FROM system.formats WHERE name = '${head.format}'`).trim();
      if (isInput !== '1') return { ok: false, error: `${head.format} is not an input format of this ClickHouse` };
      const cols = head.columns?.join(', ');
      chdb.run(`INSERT INTO ${head.table} ${cols ? `(${cols}) ` : ''}SELECT ${cols ?? '*'} FROM ${head.table} LIMIT 0`);
    } else chdb.run(r.kind === 'read' ? withSettings(r.example, r.settings) : r.example);
    return { ok: true };
  } catch (err) {
    const code = errorCode(err);
    const known = EXPECTED.find((e) => e.statement.test(r.example.trim()) && e.code === code);
    if (known) return { ok: true, expected: known.why };
    return { ok: false, error: String((err as Error).message ?? err).slice(0, 600) };
  }
}
