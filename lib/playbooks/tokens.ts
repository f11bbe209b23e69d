/**
 * The tokenizer of playbook conditions (expression.ts parses the tokens). Positions are 1-based
 * character offsets into the expression, the numbers an error message quotes. Nothing here is ever
 * evaluated: a token is data for the parser, and values reach SQL only as parameters.
 */

export type ExpressionErrorCode = 'invalid_expression' | 'unknown_variable';

/** A condition that cannot be used: a syntax or type error, or a name that resolves to nothing. */
export class ExpressionError extends Error {
  constructor(
    readonly code: ExpressionErrorCode,
    /** 1-based position of the offending token in the expression. */
    readonly position: number,
    message: string,
  ) {
    super(message);
  }
}

export type Token =
  | { kind: 'op'; text: '==' | '!=' | '<' | '<=' | '>' | '>=' | '(' | ')' | '[' | ']' | ','; pos: number }
  | { kind: 'word'; text: string; pos: number }
  | { kind: 'var'; text: string; root: string; key: string; pos: number }
  | { kind: 'number'; text: string; value: number; pos: number }
  | { kind: 'string'; text: string; value: string; pos: number }
  | { kind: 'end'; text: ''; pos: number };

const WORD = /[A-Za-z_][A-Za-z0-9_]*/y;
const KEY = /[A-Za-z0-9_-]+/y;
const NUMBER = /-?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][+-]?\d+)?/y;
const OPS = ['==', '!=', '<=', '>=', '<', '>', '(', ')', '[', ']', ','] as const;
const ESCAPES: Record<string, string> = { '"': '"', "'": "'", '\\': '\\', n: '\n', t: '\t' };

/** How a token is named in "found …" messages. */
export function describe(t: Token): string {
  if (t.kind === 'end') return 'the end of the expression';
  return JSON.stringify(t.text.length > 40 ? `${t.text.slice(0, 40)}…` : t.text);
}

const fail = (pos: number, message: string) =>
  new ExpressionError('invalid_expression', pos, `${message} at position ${pos}`);

/** A quoted string starting at `i` (either quote): its value and the index after it. */
function readString(src: string, i: number): { value: string; end: number } {
  const quote = src[i];
  let out = '';
  let j = i + 1;
  while (j < src.length) {
    const ch = src[j];
    if (ch === quote) return { value: out, end: j + 1 };
    if (ch === '\\') {
      const e = ESCAPES[src[j + 1] ?? ''];
      if (e === undefined) throw fail(j + 1, 'Unknown escape in a string (use \\", \\\', \\\\, \\n or \\t)');
      out += e;
      j += 2;
      continue;
    }
    out += ch;
    j++;
  }
  throw fail(i + 1, `Unterminated string: expected a closing ${quote}`);
}

export function tokenize(src: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const ch = src[i];
    if (ch === ' ' || ch === '\t' || ch === '\n' || ch === '\r') {
      i++;
      continue;
    }
    const pos = i + 1;
    const op = OPS.find((o) => src.startsWith(o, i));
    if (op) {
      out.push({ kind: 'op', text: op, pos });
      i += op.length;
      continue;
    }
    if (ch === '=') throw fail(pos, 'Expected == (a single = is not an operator)');
    if (ch === '"' || ch === "'") {
      const s = readString(src, i);
      out.push({ kind: 'string', text: src.slice(i, s.end), value: s.value, pos });
      i = s.end;
      continue;
    }
    NUMBER.lastIndex = i;
    const num = NUMBER.exec(src);
    if (num) {
      const value = Number(num[0]);
      if (!Number.isFinite(value)) throw fail(pos, `The number ${num[0]} is out of range`);
      out.push({ kind: 'number', text: num[0], value, pos });
      i += num[0].length;
      continue;
    }
    WORD.lastIndex = i;
    const word = WORD.exec(src);
    if (word) {
      i += word[0].length;
      if (src[i] !== '.') {
        out.push({ kind: 'word', text: word[0], pos });
        continue;
      }
      // root.key: the key is a run of letters, digits, _ and -, or a quoted string for any other key.
      let key: string;
      let end: number;
      if (src[i + 1] === '"' || src[i + 1] === "'") {
        const s = readString(src, i + 1);
        key = s.value;
        end = s.end;
      } else {
        KEY.lastIndex = i + 1;
        const k = KEY.exec(src);
        if (!k) throw fail(i + 2, `Expected a key after "${word[0]}."`);
        key = k[0];
        end = i + 1 + k[0].length;
      }
      if (key === '') throw fail(i + 2, `Expected a key after "${word[0]}." (keys are not empty)`);
      out.push({ kind: 'var', text: src.slice(pos - 1, end), root: word[0], key, pos });
      i = end;
      continue;
    }
    throw fail(pos, `Unexpected character ${JSON.stringify(ch)}`);
  }
  out.push({ kind: 'end', text: '', pos: src.length + 1 });
  return out;
}
