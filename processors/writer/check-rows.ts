import { isUuid } from '../../lib/ids.js';
import { columnsOf, type RowFormat, RowBinaryError, rowSpans } from '../../lib/row-binary.js';
import type { SinkTable } from '../../schemas/rows.js';

/**
 * piscina worker: finds which messages of a batch ClickHouse cannot take, and why, by parsing
 * every row against the table's columns. Runs only after an insert failed with a data error, so
 * the writer's normal path stays free of per-row work. Pure CPU: plain data in, plain data out.
 * A RowBinary payload can only be refused for its framing (a row cut short, a malformed length):
 * any bytes are a value of its column types.
 */
export interface CheckInput {
  table: SinkTable;
  columns: Record<string, ColumnKind>;
  payloads: Uint8Array[];
  formats: RowFormat[];
}

export type ColumnKind = 'uuid' | 'string' | 'uint' | 'int' | 'float' | 'nullable_float' | 'strings';

function checkValue(kind: ColumnKind, v: unknown): string | undefined {
  switch (kind) {
    case 'uuid':
      return typeof v === 'string' && isUuid(v) ? undefined : 'not a UUID';
    case 'string':
      return typeof v === 'string' && v.isWellFormed() ? undefined : 'not a well-formed string';
    case 'uint':
      return Number.isInteger(v) && (v as number) >= 0 ? undefined : 'not an unsigned integer';
    case 'int':
      return Number.isInteger(v) ? undefined : 'not an integer';
    case 'float':
      return typeof v === 'number' && Number.isFinite(v) ? undefined : 'not a number';
    case 'nullable_float':
      return v === null || (typeof v === 'number' && Number.isFinite(v)) ? undefined : 'not a number or null';
    case 'strings':
      return Array.isArray(v) && v.every((s) => typeof s === 'string' && s.isWellFormed())
        ? undefined
        : 'not an array of strings';
  }
}

function checkRowBinary(payload: Uint8Array, format: Exclude<RowFormat, 'JSONEachRow'>, table: SinkTable) {
  try {
    rowSpans(payload, columnsOf(format, table));
    return null;
  } catch (err) {
    if (err instanceof RowBinaryError) return `payload is not ${format} rows: ${err.message}`;
    throw err;
  }
}

export default function checkRows({ table, columns, payloads, formats }: CheckInput): Array<string | null> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  return payloads.map((payload, k) => {
    const format = formats[k];
    if (format !== 'JSONEachRow') return checkRowBinary(payload, format, table);
    let rows: unknown;
    try {
      rows = JSON.parse(`[${decoder.decode(payload)}]`);
    } catch (err) {
      return `payload is not a list of JSON rows: ${(err as Error).message}`;
    }
    if (!Array.isArray(rows)) return 'payload is not a list of JSON rows';
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i] as Record<string, unknown>;
      if (row === null || typeof row !== 'object' || Array.isArray(row)) return `row ${i}: not an object`;
      for (const k of Object.keys(row)) if (!(k in columns)) return `row ${i}: unknown column "${k}"`;
      for (const [col, kind] of Object.entries(columns)) {
        if (!(col in row)) continue;
        const why = checkValue(kind, row[col]);
        if (why) return `row ${i}: column ${col} ${why}`;
      }
    }
    return null;
  });
}
