import { describe, ExpressionError, type Token, tokenize } from './tokens.js';

/**
 * The condition language of playbook triggers (docs/playbooks.md "Condition language"): a
 * recursive-descent parser from text to a typed AST, checked as it is read so that a condition
 * that parses also compiles (condition-sql.ts). It never evaluates anything. Recursion happens
 * only at parentheses and `not`, which MAX_DEPTH bounds; `and` / `or` chains are loops building
 * n-ary nodes, so no accepted input can exhaust the stack here or in the compiler.
 */

export { ExpressionError } from './tokens.js';

export const MAX_EXPRESSION_LENGTH = 4000;
export const MAX_DEPTH = 32;
export const MAX_COMPARISONS = 100;
export const MAX_LIST_ITEMS = 100;

export type Literal =
  | { type: 'number'; value: number }
  | { type: 'string'; value: string }
  | { type: 'boolean'; value: boolean }
  | { type: 'null'; value: null };

export type Variable =
  | {
      name:
        | 'health_score'
        | 'arr'
        | 'days_to_renewal'
        | 'health_status'
        | 'status'
        | 'owner_email'
        | 'segment'
        | 'open_alerts';
    }
  | { name: 'custom_fields'; key: string }
  | { name: 'metric'; slug: string };

export type CompareOp = '==' | '!=' | '<' | '<=' | '>' | '>=';

export type Expr =
  | { kind: 'and'; items: Expr[] }
  | { kind: 'or'; items: Expr[] }
  | { kind: 'not'; item: Expr }
  | { kind: 'const'; value: boolean }
  | { kind: 'compare'; variable: Variable; op: CompareOp; value: Literal; pos: number }
  | { kind: 'in'; variable: Variable; negated: boolean; values: Literal[]; pos: number };

type Kind = 'number' | 'enum' | 'text' | 'segment' | 'any';

/** What each plain variable is and which values it accepts. */
const PLAIN: Record<string, { kind: Kind; values?: readonly string[] }> = {
  health_score: { kind: 'number' },
  arr: { kind: 'number' },
  days_to_renewal: { kind: 'number' },
  health_status: { kind: 'enum', values: ['healthy', 'neutral', 'at_risk'] },
  status: { kind: 'enum', values: ['active', 'trial', 'churned', 'paused'] },
  owner_email: { kind: 'text' },
  segment: { kind: 'segment' },
  open_alerts: { kind: 'number' },
};

export const VARIABLES = [...Object.keys(PLAIN), 'custom_fields.<key>', 'metric.<slug>'];

const kindOf = (v: Variable): Kind =>
  v.name === 'custom_fields' ? 'any' : v.name === 'metric' ? 'number' : PLAIN[v.name].kind;

export const variableText = (v: Variable): string =>
  v.name === 'custom_fields' ? `custom_fields.${v.key}` : v.name === 'metric' ? `metric.${v.slug}` : v.name;

const COMPARE = new Set<string>(['==', '!=', '<', '<=', '>', '>=']);
const FLIP: Record<CompareOp, CompareOp> = { '==': '==', '!=': '!=', '<': '>', '<=': '>=', '>': '<', '>=': '<=' };

const invalid = (pos: number, message: string) =>
  new ExpressionError('invalid_expression', pos, `${message} at position ${pos}`);
const expected = (what: string, t: Token) => invalid(t.pos, `Expected ${what}, found ${describe(t)},`);

/** The AST of a condition, or an ExpressionError (code invalid_expression or unknown_variable). */
export function parseExpression(src: string): Expr {
  if (src.length > MAX_EXPRESSION_LENGTH)
    throw new ExpressionError(
      'invalid_expression',
      MAX_EXPRESSION_LENGTH + 1,
      `The expression is longer than ${MAX_EXPRESSION_LENGTH} characters`,
    );
  return new Parser(tokenize(src)).parse();
}

class Parser {
  private i = 0;
  private depth = 0;
  private comparisons = 0;

  constructor(private readonly tokens: Token[]) {}

  parse(): Expr {
    if (this.peek().kind === 'end') throw expected('a condition', this.peek());
    const e = this.or();
    const t = this.peek();
    if (t.kind !== 'end')
      throw expected(t.text === ')' ? 'the end of the expression (unbalanced ")")' : '"and", "or" or the end', t);
    return e;
  }

  private peek(): Token {
    return this.tokens[this.i];
  }

  private next(): Token {
    const t = this.tokens[this.i];
    if (t.kind !== 'end') this.i++;
    return t;
  }

  private isWord(w: string): boolean {
    const t = this.peek();
    return t.kind === 'word' && t.text === w;
  }

  private chain(kind: 'and' | 'or', operand: () => Expr): Expr {
    const items = [operand()];
    while (this.isWord(kind)) {
      this.next();
      items.push(operand());
    }
    return items.length === 1 ? items[0] : ({ kind, items } as Expr);
  }

  private or(): Expr {
    return this.chain('or', () => this.and());
  }

  private and(): Expr {
    return this.chain('and', () => this.unary());
  }

  private nested<T>(t: Token, f: () => T): T {
    if (++this.depth > MAX_DEPTH) throw invalid(t.pos, `Nesting deeper than ${MAX_DEPTH} levels`);
    const out = f();
    this.depth--;
    return out;
  }

  private unary(): Expr {
    const t = this.peek();
    if (t.kind === 'word' && t.text === 'not') {
      this.next();
      return this.nested(t, () => ({ kind: 'not', item: this.unary() }) as Expr);
    }
    if (t.kind === 'op' && t.text === '(') {
      this.next();
      const e = this.nested(t, () => this.or());
      const close = this.next();
      if (close.kind !== 'op' || close.text !== ')') throw expected('")" or "and", "or"', close);
      return e;
    }
    return this.comparison();
  }

  /**
   * `operand op operand` (a variable on one side, a value on the other), `variable [not] in [...]`,
   * or `true` / `false` standing alone as a condition of its own (`x or false`, `not true`).
   */
  private comparison(): Expr {
    const first = this.next();
    if (++this.comparisons > MAX_COMPARISONS)
      throw invalid(first.pos, `More than ${MAX_COMPARISONS} comparisons in one condition`);
    const left = this.operand(first);
    if ('type' in left && left.type === 'boolean' && !this.comparing()) return { kind: 'const', value: left.value };
    const t = this.next();
    const negated = t.kind === 'word' && t.text === 'not';
    const inTok = negated ? this.next() : t;
    if (inTok.kind === 'word' && inTok.text === 'in') {
      if (!('name' in left)) throw invalid(first.pos, 'The left side of "in" must be a variable');
      return this.inList(left, negated, first.pos);
    }
    if (negated) throw expected('"in" after "not"', inTok);
    if (t.kind !== 'op' || !COMPARE.has(t.text)) throw expected('a comparison operator (==, !=, <, <=, >, >=, in)', t);
    const op = t.text as CompareOp;
    const rightTok = this.next();
    const right = this.operand(rightTok);
    if ('name' in left && 'type' in right) return this.check(left, op, right, first.pos, rightTok.pos);
    if ('type' in left && 'name' in right) return this.check(right, FLIP[op], left, first.pos, first.pos);
    throw invalid(first.pos, 'A comparison needs a variable on one side and a value on the other');
  }

  /** Whether the next token continues a comparison (an operator, `in`, `not in`). */
  private comparing(): boolean {
    const t = this.peek();
    return (t.kind === 'op' && COMPARE.has(t.text)) || (t.kind === 'word' && (t.text === 'in' || t.text === 'not'));
  }

  private operand(t: Token): Variable | Literal {
    if (t.kind === 'number') return { type: 'number', value: t.value };
    if (t.kind === 'string') return { type: 'string', value: t.value };
    if (t.kind === 'var') {
      if (t.root === 'custom_fields') return { name: 'custom_fields', key: t.key };
      if (t.root === 'metric') return { name: 'metric', slug: t.key };
      throw unknown(t.pos, t.text);
    }
    if (t.kind === 'word') {
      if (t.text === 'true' || t.text === 'false') return { type: 'boolean', value: t.text === 'true' };
      if (t.text === 'null') return { type: 'null', value: null };
      if (PLAIN[t.text]) return { name: t.text } as Variable;
      if (t.text === 'custom_fields' || t.text === 'metric')
        throw invalid(t.pos, `Expected ${t.text}.<${t.text === 'metric' ? 'slug' : 'key'}>`);
      if (['and', 'or', 'not', 'in'].includes(t.text)) throw expected('a variable or a value', t);
      throw unknown(t.pos, t.text);
    }
    throw expected('a variable or a value', t);
  }

  private inList(variable: Variable, negated: boolean, pos: number): Expr {
    const open = this.next();
    if (open.kind !== 'op' || open.text !== '[') throw expected('"[" to start the list', open);
    const values: Literal[] = [];
    for (;;) {
      const t = this.next();
      const v = t.kind === 'op' || t.kind === 'end' ? undefined : this.operand(t);
      if (!v || !('type' in v)) throw expected('a value (a list holds values, not variables)', t);
      if (v.type === 'null') throw invalid(t.pos, 'A list cannot hold null (compare with == null instead)');
      this.checkValue(variable, '==', v, t.pos);
      if (values.length && values[0].type !== v.type)
        throw invalid(t.pos, `A list holds values of one type: ${values[0].type} expected`);
      if (values.length >= MAX_LIST_ITEMS) throw invalid(t.pos, `A list holds at most ${MAX_LIST_ITEMS} values`);
      values.push(v);
      const sep = this.next();
      if (sep.kind === 'op' && sep.text === ']') break;
      if (sep.kind !== 'op' || sep.text !== ',') throw expected('"," or "]"', sep);
    }
    return { kind: 'in', variable, negated, values, pos };
  }

  private check(variable: Variable, op: CompareOp, value: Literal, pos: number, valuePos: number): Expr {
    this.checkValue(variable, op, value, valuePos);
    return { kind: 'compare', variable, op, value, pos };
  }

  /** Which values a variable can be compared with, and how. */
  private checkValue(variable: Variable, op: CompareOp, value: Literal, pos: number): void {
    const name = variableText(variable);
    const kind = kindOf(variable);
    const ordering = op !== '==' && op !== '!=';
    if (value.type === 'null') {
      if (ordering) throw invalid(pos, `${op} cannot compare with null (use == null or != null)`);
      if (kind === 'segment') throw invalid(pos, 'segment compares with a segment name, not null');
      return;
    }
    if (kind === 'any') {
      if (ordering && value.type === 'boolean') throw invalid(pos, `${op} compares numbers or strings, not booleans`);
      return;
    }
    if (kind === 'number') {
      if (value.type !== 'number') throw invalid(pos, `${name} is a number; compare it with a number`);
      return;
    }
    if (value.type !== 'string') throw invalid(pos, `${name} compares with a string`);
    if (ordering) throw invalid(pos, `${name} is compared with ==, != or in, not ${op}`);
    const allowed =
      'name' in variable && variable.name !== 'custom_fields' && variable.name !== 'metric'
        ? PLAIN[variable.name].values
        : undefined;
    if (allowed && !allowed.includes(value.value))
      throw invalid(pos, `${name} is one of ${allowed.join(', ')}; ${JSON.stringify(value.value)} is not`);
  }
}

function unknown(pos: number, name: string): ExpressionError {
  return new ExpressionError(
    'unknown_variable',
    pos,
    `Unknown variable ${JSON.stringify(name)} at position ${pos}; known: ${VARIABLES.join(', ')}`,
  );
}

/** Segment names (as written) and metric slugs a condition names, each once, with its first position. */
export function namesIn(e: Expr): { segments: Map<string, number>; metrics: Map<string, number> } {
  const segments = new Map<string, number>();
  const metrics = new Map<string, number>();
  const walk = (x: Expr): void => {
    if (x.kind === 'and' || x.kind === 'or') {
      x.items.forEach(walk);
      return;
    }
    if (x.kind === 'not') {
      walk(x.item);
      return;
    }
    if (x.kind === 'const') return;
    const v = x.variable;
    if (v.name === 'metric' && !metrics.has(v.slug)) metrics.set(v.slug, x.pos);
    if (v.name !== 'segment') return;
    for (const l of x.kind === 'in' ? x.values : [x.value]) {
      const key = String(l.value).toLowerCase();
      if (!segments.has(key)) segments.set(key, x.pos);
    }
  };
  walk(e);
  return { segments, metrics };
}
