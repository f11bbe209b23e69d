import { FORMATS } from './formats.js';

/**
 * A validator for the few JSON Schema keywords the service's event schemas use, compiled once per
 * schema into closures. It must agree with the service's Ajv on every input
 * (test/unit/sdk-validate.test.ts): on surface A one invalid event fails the whole request (422),
 * so the client refuses it before it can cost the other events of its batch. A keyword it does
 * not know makes compilation throw, so a schema change cannot be half-checked silently.
 */

export interface JsonSchema {
  type?: 'string' | 'object' | 'integer' | 'number' | 'boolean';
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  default?: unknown;
}

export interface SurfaceSchema {
  path: string;
  backfillPath?: string;
  maxBatchEvents: number;
  maxBodyBytes: number;
  event: JsonSchema;
}

export interface SurfaceSchemas {
  a: SurfaceSchema;
  b: SurfaceSchema;
}

/** Why an event was not taken: a per-event code in the service's vocabulary and a sentence. */
export interface Problem {
  code: string;
  message: string;
}

type Check = (value: unknown) => string | undefined;

const KNOWN = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'minLength',
  'maxLength',
  'pattern',
  'format',
  'enum',
  'minimum',
  'maximum',
  'default',
]);

/** Length in code points, as Ajv counts it (a surrogate pair is one character). */
function codePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What the service will read for `v`: JSON.stringify turns a Date into its ISO string. */
const asSent = (v: unknown): unknown => (v instanceof Date ? v.toJSON() : v);

function compileValue(s: JsonSchema, where: string): Check {
  for (const k of Object.keys(s)) if (!KNOWN.has(k)) throw new Error(`${where}: unsupported keyword ${k}`);
  const checks: Check[] = [];
  if (s.type === 'string') {
    const { minLength, maxLength, pattern, format } = s;
    const re = pattern === undefined ? undefined : new RegExp(pattern, 'u');
    const fmt = format === undefined ? undefined : FORMATS[format];
    if (format !== undefined && fmt === undefined) throw new Error(`${where}: unsupported format ${format}`);
    checks.push((raw) => {
      const v = asSent(raw);
      if (typeof v !== 'string') return 'must be a string';
      // The UTF-16 length bounds the code points from above and from below (at most two units each).
      if (maxLength !== undefined && v.length > maxLength && codePoints(v) > maxLength)
        return `must be at most ${maxLength} characters`;
      if (minLength !== undefined && v.length < 2 * minLength && codePoints(v) < minLength)
        return `must be at least ${minLength} characters`;
      if (re && !re.test(v)) return `must match ${pattern}`;
      if (fmt && !fmt(v)) return `must be a valid ${format}`;
      return undefined;
    });
  } else if (s.type === 'object') {
    if (s.additionalProperties === false) throw new Error(`${where}: additionalProperties false is not supported`);
    const props = Object.entries(s.properties ?? {}).map(([k, p]) => [k, compileValue(p, `${where}.${k}`)] as const);
    const required = s.required ?? [];
    checks.push((v) => {
      if (!isObject(v)) return 'must be a JSON object';
      for (const k of required) if (v[k] === undefined) return `${k} is required`;
      for (const [k, check] of props) {
        const x = v[k];
        if (x === undefined) continue;
        const m = check(x);
        if (m !== undefined) return `${k} ${m}`;
      }
      return undefined;
    });
  } else if (s.type === 'integer' || s.type === 'number') {
    const int = s.type === 'integer';
    const { minimum, maximum } = s;
    checks.push((v) => {
      if (typeof v !== 'number' || !Number.isFinite(v) || (int && !Number.isInteger(v))) return `must be ${s.type}`;
      if (minimum !== undefined && v < minimum) return `must be >= ${minimum}`;
      if (maximum !== undefined && v > maximum) return `must be <= ${maximum}`;
      return undefined;
    });
  } else if (s.type === 'boolean') {
    checks.push((v) => (typeof v === 'boolean' ? undefined : 'must be a boolean'));
  } else if (s.type !== undefined) {
    throw new Error(`${where}: unsupported type ${String(s.type)}`);
  }
  if (s.enum !== undefined) {
    const allowed = new Set(s.enum);
    checks.push((v) => (allowed.has(asSent(v)) ? undefined : `must be one of ${s.enum!.join(', ')}`));
  }
  if (checks.length === 1) return checks[0];
  return (v) => {
    for (const c of checks) {
      const m = c(v);
      if (m !== undefined) return m;
    }
    return undefined;
  };
}

/**
 * An event's check: undefined when the service's schema accepts it, else the first broken rule
 * as the service's per-event code for that field (`invalid_<field>`, `invalid_event` for
 * anything that is not an object), fields in the schema's order.
 */
export function compileEvent(schema: JsonSchema): (event: unknown) => Problem | undefined {
  if (schema.type !== 'object') throw new Error('an event schema describes an object');
  for (const k of Object.keys(schema)) if (!KNOWN.has(k)) throw new Error(`event: unsupported keyword ${k}`);
  const required = schema.required ?? [];
  const keys = Object.keys(schema.properties ?? {});
  const checks = keys.map((k) => compileValue(schema.properties![k], k));
  const notObject = (): Problem => ({ code: 'invalid_event', message: 'each event must be a JSON object' });
  const missing = (k: string): Problem => ({ code: `invalid_${k}`, message: `${k} is required` });
  const broken = (i: number, m: string): Problem => ({ code: `invalid_${keys[i]}`, message: `${keys[i]} ${m}` });
  // This runs for every event. Written out with the schema's property names, its loads are named
  // and stay monomorphic; a loop over the names makes each `event[k]` a megamorphic keyed load.
  // The names come from the service's schemas (schemas.generated.ts), quoted by JSON.stringify.
  const body = [
    'return (event) => {',
    '  if (!isObject(event)) return notObject();',
    ...required.map((k) => `  if (event[${JSON.stringify(k)}] === undefined) return missing(${JSON.stringify(k)});`),
    '  let v, m;',
    ...keys.map((k, i) =>
      [
        `  v = event[${JSON.stringify(k)}];`,
        `if (v !== undefined && (m = c${i}(v)) !== undefined) return broken(${i}, m);`,
      ].join(' '),
    ),
    '  return undefined;',
    '};',
  ].join('\n');
  const names = ['isObject', 'notObject', 'missing', 'broken', ...keys.map((_k, i) => `c${i}`)];
  try {
    return new Function(...names, body)(isObject, notObject, missing, broken, ...checks);
  } catch {
    // Code generation is off (node --disallow-code-generation-from-strings): the same rules in a loop.
    return (event) => {
      if (!isObject(event)) return notObject();
      for (let i = 0; i < required.length; i++) if (event[required[i]] === undefined) return missing(required[i]);
      for (let i = 0; i < keys.length; i++) {
        const v = event[keys[i]];
        const m = v === undefined ? undefined : checks[i](v);
        if (m !== undefined) return broken(i, m);
      }
      return undefined;
    };
  }
}

/** A string PostgreSQL cannot store (U+0000, an unpaired surrogate): the service refuses it. */
const unstorable = (s: string): boolean => s.includes('\u0000') || !s.isWellFormed();

/**
 * The path of the first unstorable string in `v` (keys included), or undefined. Called only when
 * the event's JSON holds a `\u` escape, which is how JSON.stringify writes either.
 */
export function unstorablePath(v: unknown, path = ''): string | undefined {
  if (typeof v === 'string') return unstorable(v) ? path || 'value' : undefined;
  if (typeof v !== 'object' || v === null) return undefined;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const p = unstorablePath(v[i], `${path}[${i}]`);
      if (p !== undefined) return p;
    }
    return undefined;
  }
  for (const k of Object.keys(v)) {
    const p = `${path ? `${path}.` : ''}${k}`;
    if (unstorable(k)) return p;
    const found = unstorablePath((v as Record<string, unknown>)[k], p);
    if (found !== undefined) return found;
  }
  return undefined;
}
