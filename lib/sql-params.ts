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
}
