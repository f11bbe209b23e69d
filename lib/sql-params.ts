import type { PendingQuery, Row } from 'postgres';
import type { Sql } from './pg.js';

/**
 * Positional parameters for SQL text built from user definitions (segment rules, playbook
 * conditions): every user value goes through `add` and becomes `$n`, so no value is ever spliced
 * into the text. One instance is shared by every fragment of one statement, which keeps the
 * numbering consistent however the fragments are composed.
 */
export class SqlParams {
  readonly values: unknown[] = [];

  /** `first` is the number of the first placeholder (when the statement already has some). */
  constructor(private readonly first = 1) {}

  /** The placeholder for `value`, with an explicit cast when PostgreSQL cannot infer the type. */
  add(value: unknown, cast?: string): string {
    this.values.push(value);
    const p = `$${this.first + this.values.length - 1}`;
    return cast ? `${p}::${cast}` : p;
  }

  /** `[alias.]tenant_id = $n::uuid`: the workspace filter (lib/pg.ts inTenant) in text built with these. */
  inTenant(tenantId: string, alias?: string): string {
    return `${alias ? `${alias}.` : ''}tenant_id = ${this.add(tenantId, 'uuid')}`;
  }

  /**
   * `text` (built with this instance) as a postgres.js fragment to embed in a tagged query: each
   * `$n` becomes an argument of the fragment, which postgres.js numbers within the whole query.
   */
  fragment(sql: Sql, text: string): PendingQuery<Row[]> {
    const strings: string[] = [];
    const args: unknown[] = [];
    let last = 0;
    for (const m of text.matchAll(/\$(\d+)/g)) {
      strings.push(text.slice(last, m.index));
      args.push(this.values[Number(m[1]) - this.first]);
      last = (m.index ?? 0) + m[0].length;
    }
    strings.push(text.slice(last));
    return sql(Object.assign(strings, { raw: strings }) as unknown as TemplateStringsArray, ...(args as never[]));
  }
}
