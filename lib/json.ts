import { isUtf8 } from 'node:buffer';

/**
 * The JSON decoding every surface shares: UTF-8, JSON, then what the stores cannot hold, found
 * once here and reported with its path so each surface answers it in its own shape. PostgreSQL's
 * text and jsonb refuse U+0000 and unpaired surrogates; JSON.parse yields both from `\u` escapes
 * (raw control characters are a syntax error, raw lone surrogates are not valid UTF-8), so bodies
 * without a `\u` escape, nearly all of them, are never walked for text.
 */

/** Keys and indexes from the document root to a value. */
export type JsonPath = Array<string | number>;

export interface DecodeOptions {
  /** Objects and arrays may nest this deep (the document is level 1); deeper is `too_deep`. */
  maxDepth?: number;
  /** Keys refused anywhere in the document (prototype pollution). */
  forbiddenKeys?: ReadonlySet<string>;
  /**
   * List the numbers whose value a 64-bit float does not keep (`keepsValue`): `1e400`, which
   * JSON.parse turns into Infinity and JSON.stringify into null, `1e-400` (0), `123456789012345678901`
   * (123456789012345680000). The document still decodes; the caller refuses what they belong to.
   */
  exactNumbers?: boolean;
}

export interface Finding {
  kind: 'unstorable_text' | 'too_deep' | 'forbidden_key';
  path: JsonPath;
}

/** A number of a document whose value a 64-bit float does not keep. */
export interface InexactNumber {
  path: JsonPath;
  /** The number as written. */
  text: string;
}

/** A document that parsed but holds what no store takes. */
type Refused<K extends Finding['kind']> = {
  ok: false;
  reason: K;
  message: string;
  /** Where: the string (a key counts as the last step), or the container nested too deep. */
  path: JsonPath;
  /** The parsed document, for surfaces that reject part of it and keep the rest. */
  value: unknown;
  inexact?: InexactNumber[];
};

export type Decoded =
  | { ok: true; value: unknown; inexact?: InexactNumber[] }
  | { ok: false; reason: 'not_utf8'; message: string }
  | { ok: false; reason: 'syntax'; message: string; position?: number }
  | Refused<'unstorable_text'>
  | Refused<'too_deep'>
  | Refused<'forbidden_key'>;

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/** `application/json` or a `+json` type such as `application/merge-patch+json`, with or without parameters. */
export function isJsonContentType(contentType: string | undefined): contentType is string {
  return contentType !== undefined && JSON_TYPE.test(contentType);
}

/** Prefilter: a `\u0000` escape or a surrogate escape somewhere in the text. */
const SUSPECT_ESCAPE = /\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})/;
const FORBIDDEN_HINT = /"(?:__proto__|constructor|prototype)"/;

export const UNSTORABLE_MESSAGE =
  'contains a NUL character (\\u0000) or an unpaired UTF-16 surrogate, which cannot be stored';

export function decodeJson(body: Buffer, opts: DecodeOptions = {}): Decoded {
  if (!isUtf8(body)) return { ok: false, reason: 'not_utf8', message: 'not valid UTF-8' };
  const text = body.toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const message = String((err as Error).message);
    const pos = /position (\d+)/.exec(message)?.[1];
    return { ok: false, reason: 'syntax', message, position: pos === undefined ? undefined : Number(pos) };
  }
  const escapes = text.includes('\\u');
  const suspect = escapes && SUSPECT_ESCAPE.test(text);
  // A forbidden key may be spelled with escapes ("\u005f_proto__"): then the hint cannot rule it out.
  const keys = opts.forbiddenKeys && (escapes || FORBIDDEN_HINT.test(text)) ? opts.forbiddenKeys : undefined;
  const found =
    suspect || keys || opts.maxDepth !== undefined
      ? inspect(value, { text: suspect, forbiddenKeys: keys, maxDepth: opts.maxDepth })
      : undefined;
  if (found?.kind === 'too_deep' || found?.kind === 'forbidden_key') {
    const message =
      found.kind === 'too_deep'
        ? `is nested deeper than ${opts.maxDepth} levels of objects and arrays (the body is level 1)`
        : `uses the key "${found.path[found.path.length - 1]}", which is not allowed`;
    return { ok: false, reason: found.kind, message, path: found.path, value };
  }
  const inexact = opts.exactNumbers === true ? inexactNumbers(text) : [];
  const numbers = inexact.length > 0 ? { inexact } : undefined;
  if (!found) return { ok: true, value, ...numbers };
  return { ok: false, reason: found.kind, message: UNSTORABLE_MESSAGE, path: found.path, value, ...numbers };
}

/**
 * Whether a JSON number keeps its value through the 64-bit float JSON.parse makes of it, that is
 * whether JSON.stringify writes back the same decimal value: `1.50` (1.5), `1E2` (100), `-0` (0),
 * `5e-324` do; `1e400` (Infinity, written null), `1e-400` (0) and `123456789012345678901`
 * (123456789012345680000) do not. `0.1` keeps its value: every reader of the JSON reads it back
 * as the same float, and no one writes it otherwise.
 */
export function keepsValue(text: string): boolean {
  const n = Number(text);
  if (!Number.isFinite(n)) return false;
  const written = String(n);
  return written === text || decimal(written) === decimal(text);
}

const NUMBER_PARTS = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/** A JSON number's value in one spelling: sign, significant digits, exponent of the last one (`0` for zero). */
function decimal(text: string): string {
  const [, sign, int, fraction = '', exponent = '0'] = NUMBER_PARTS.exec(text) ?? [];
  const all = int + fraction;
  let first = 0;
  while (all.charCodeAt(first) === 0x30) first++;
  if (first === all.length) return '0';
  let end = all.length;
  while (all.charCodeAt(end - 1) === 0x30) end--;
  return `${sign}${all.slice(first, end)}e${Number(exponent) - fraction.length + all.length - end}`;
}

/** Prefilter: a number that may lose its value has an exponent, or 16 digits or more. */
const LONG_NUMBER_HINT = /\d[eE]|\d[\d.]{15}/;
const STRING_TOKEN = /"[^"\\]*(?:\\.[^"\\]*)*"/y;
const NUMBER_TOKEN = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/**
 * The numbers of a JSON text (one JSON.parse took) whose value a 64-bit float does not keep, with
 * their paths, in document order. JSON.parse keeps no trace of the text a number had, so the text
 * is walked again, but only when it holds something that looks like a long number.
 */
export function inexactNumbers(text: string): InexactNumber[] {
  const found: InexactNumber[] = [];
  if (!LONG_NUMBER_HINT.test(text)) return found;
  const path: JsonPath = [];
  /** Per open container: whether it is an object. */
  const objects: boolean[] = [];
  let keyNext = false;
  for (let i = 0; i < text.length; ) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      STRING_TOKEN.lastIndex = i;
      STRING_TOKEN.exec(text);
      const end = STRING_TOKEN.lastIndex;
      if (keyNext) {
        const raw = text.slice(i + 1, end - 1);
        path[path.length - 1] = raw.includes('\\') ? (JSON.parse(text.slice(i, end)) as string) : raw;
        keyNext = false;
      }
      i = end;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      NUMBER_TOKEN.lastIndex = i;
      NUMBER_TOKEN.exec(text);
      const end = NUMBER_TOKEN.lastIndex;
      const number = text.slice(i, end);
      if (!keepsValue(number)) found.push({ path: path.slice(0, MAX_PATH_STEPS), text: number });
      i = end;
    } else {
      if (c === 0x7b || c === 0x5b) {
        objects.push(c === 0x7b);
        path.push(c === 0x7b ? '' : 0);
        keyNext = c === 0x7b;
      } else if (c === 0x7d || c === 0x5d) {
        objects.pop();
        path.pop();
      } else if (c === 0x2c) {
        if (objects[objects.length - 1]) keyNext = true;
        else (path[path.length - 1] as number)++;
      }
      i++;
    }
  }
  return found;
}

/** What an inexact number would become, as an error message's text says it. */
export function inexactMessage(field: string, text: string): string {
  const shown = text.length > 40 ? `${text.slice(0, 24)}… (${text.length} characters)` : text;
  const n = Number(text);
  const why = Number.isFinite(n)
    ? `which a 64-bit float cannot hold exactly (it would become ${String(n)})`
    : 'beyond the range of a 64-bit float (about ±1.8e308)';
  return `${field} is ${shown}, ${why}; send it as a string to keep it as written`;
}

/** A string PostgreSQL cannot store: U+0000 or an unpaired surrogate. */
export const unstorable = (s: string): boolean => s.includes('\u0000') || !s.isWellFormed();

interface Node {
  value: unknown;
  depth: number;
  key: string | number;
  parent: Node | undefined;
}

/** Paths are cut to this many steps: a deeper finding is reported at its ancestor that deep. */
export const MAX_PATH_STEPS = 32;

const pathOf = (n: Node | undefined, last?: string | number): JsonPath => {
  const out: JsonPath = last === undefined ? [] : [last];
  for (let p = n; p?.parent !== undefined; p = p.parent) out.push(p.key);
  return out.reverse().slice(0, MAX_PATH_STEPS);
};

/**
 * The first finding, or undefined; an object's keys are checked before its values. Iterative on
 * purpose: a body within the size cap can nest far deeper than the call stack, and the depth
 * limit must hold before anything recursive (JSON.stringify, a hash of the body) sees it.
 */
export function inspect(
  root: unknown,
  o: { text?: boolean; maxDepth?: number; forbiddenKeys?: ReadonlySet<string> },
): Finding | undefined {
  /** Whether a child is walked: containers always, strings when they are checked. */
  const walked = (c: unknown) => c !== null && (typeof c === 'object' || (o.text === true && typeof c === 'string'));
  const pending: Node[] = [{ value: root, depth: 1, key: '', parent: undefined }];
  while (pending.length > 0) {
    const n = pending.pop()!;
    const v = n.value;
    if (typeof v === 'string') {
      if (o.text && unstorable(v)) return { kind: 'unstorable_text', path: pathOf(n) };
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (o.maxDepth !== undefined && n.depth > o.maxDepth) return { kind: 'too_deep', path: pathOf(n) };
    // Children go on the stack last-first so the walk meets them in document order.
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) {
        const c = v[i];
        if (walked(c)) pending.push({ value: c, depth: n.depth + 1, key: i, parent: n });
      }
      continue;
    }
    const keys = Object.keys(v);
    for (const k of keys) {
      if (o.forbiddenKeys?.has(k)) return { kind: 'forbidden_key', path: pathOf(n, k) };
      if (o.text && unstorable(k)) return { kind: 'unstorable_text', path: pathOf(n, k) };
    }
    for (let i = keys.length - 1; i >= 0; i--) {
      const c = (v as Record<string, unknown>)[keys[i]];
      if (walked(c)) pending.push({ value: c, depth: n.depth + 1, key: keys[i], parent: n });
    }
  }
  return undefined;
}

/** NUL and unpaired surrogates written as the JSON escape that produced them (`\ud800` as six characters). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is one of the characters it escapes
const UNSTORABLE_CHARS = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
const escapeUnstorable = (s: string): string =>
  unstorable(s) ? s.replace(UNSTORABLE_CHARS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : s;

/**
 * A path as the problem+json `errors[].field` names it: `custom_fields.tier`, `events[3].properties`.
 * A key that is itself unstorable text is written escaped, so an answer naming it can be stored
 * (an Idempotency-Key's recorded answer, the audit log) like any other.
 */
export function pathText(path: JsonPath): string {
  let out = '';
  for (const p of path) {
    const step = typeof p === 'number' ? p : escapeUnstorable(p);
    out += typeof step === 'number' ? `[${step}]` : out === '' ? step : `.${step}`;
  }
  return out;
}
