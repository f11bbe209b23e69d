/**
 * Statement shapes: what is left of a SQL statement once its values are taken out, so that the
 * thousands of statements a suite run sends (one per workspace, customer list, batch) fold into
 * the few hundred the code can build. Pure; test/unit/clickhouse-shapes.test.ts holds it to that.
 *
 * - string literals become `?` (backslash escapes and doubled quotes inside them understood);
 * - numbers that are not part of a name become `?` (`cityHash64`, `toYYYYMM` keep theirs);
 * - a list of values, `?, ?, ?` or `(?, ?), (?, ?)`, becomes one with an ellipsis;
 * - whitespace collapses to one space.
 */

/** The statement with every string literal replaced by `?`, and the literals in order. */
export function takeStrings(sql: string): { text: string; strings: string[] } {
  let text = '';
  const strings: string[] = [];
  let i = 0;
  while (i < sql.length) {
    const c = sql[i];
    if (c !== "'") {
      text += c;
      i++;
      continue;
    }
    let j = i + 1;
    let value = '';
    for (; j < sql.length; j++) {
      if (sql[j] === '\\') {
        value += sql.slice(j, j + 2);
        j++;
      } else if (sql[j] === "'") {
        if (sql[j + 1] !== "'") break;
        value += "''";
        j++;
      } else value += sql[j];
    }
    strings.push(value);
    text += '?';
    i = j + 1;
  }
  return { text, strings };
}

const NUMBER = /(?<![\w.$])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w])/g;
const VALUE_LIST = /\?(?:\s*,\s*\?)+/g;
const TUPLE_LIST = /\((?:\?|\?,…)\)(?:\s*,\s*\((?:\?|\?,…)\))+/g;

export function shapeOf(sql: string): string {
  return takeStrings(sql)
    .text.replace(NUMBER, '?')
    .replace(/\s+/g, ' ')
    .replace(/\s*([(,[])\s*/g, '$1')
    .replace(/\s+([)\]])/g, '$1')
    .replace(VALUE_LIST, '?,…')
    .replace(TUPLE_LIST, '(?,…),…')
    .trim();
}

/** What a statement does, for how it is checked on the other engine. */
export type StatementKind = 'insert-data' | 'read' | 'write' | 'schema' | 'system';

/** An INSERT whose rows travel after the statement (FORMAT …, no SELECT): the log holds its head only. */
const INSERT_DATA = /^INSERT\s+INTO\s+([\w.]+)\s*(\([^)]*\))?\s*(?:SETTINGS\s+[^;]*?\s+)?FORMAT\s+(\w+)\s*$/i;

export function kindOf(sql: string): StatementKind {
  const s = sql.trim();
  if (INSERT_DATA.test(s)) return 'insert-data';
  if (/^(SELECT|WITH|DESCRIBE|DESC|SHOW|EXISTS|EXPLAIN)\b/i.test(s)) return 'read';
  if (/^(INSERT|ALTER\s+TABLE\s+\S+\s+(?:ON\s+CLUSTER\s+\S+\s+)?(DELETE|UPDATE|DROP\s+PARTITION))\b/i.test(s))
    return 'write';
  if (/^(SYSTEM|KILL|OPTIMIZE)\b/i.test(s)) return 'system';
  return 'schema';
}

/** An INSERT … FORMAT's table, column list and format. */
export function insertHead(sql: string): { table: string; columns?: string[]; format: string } | undefined {
  const m = INSERT_DATA.exec(sql.trim());
  if (!m) return undefined;
  const columns = m[2]
    ?.slice(1, -1)
    .split(',')
    .map((c) => c.trim())
    .filter(Boolean);
  return { table: m[1], columns, format: m[3] };
}
