import { Ajv, type Options, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { TSchema, Static } from '#typebox';
import { STORE_FORMATS } from './formats.js';

// ajv-formats is CommonJS; under NodeNext its default export arrives one level down.
const addAjvFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ??
  addFormatsModule) as unknown as (ajv: Ajv, formats?: string[]) => Ajv;

const FORMATS = ['time', 'email', 'uri', 'hostname', 'ipv4', 'ipv6'];

/** The formats of every Ajv of the service: ajv-formats', with uuid, dates and amounts as the store takes them. */
export function addFormats(ajv: Ajv): Ajv {
  addAjvFormats(ajv, FORMATS);
  for (const [name, def] of Object.entries(STORE_FORMATS)) ajv.addFormat(name, def);
  return ajv;
}

/** One Ajv per purpose: `fast` stops at the first error (hot path), `full` reports them all. */
export function createAjv(opts: Options = {}): Ajv {
  return addFormats(new Ajv({ strict: false, allErrors: false, useDefaults: true, coerceTypes: false, ...opts }));
}

const declared: Array<() => void> = [];

/**
 * Compiles every validator declared so far (lazyCompile) that no call has compiled yet; returns how many were
 * declared.
 */
export function compileDeclared(): number {
  for (const c of declared) c();
  return declared.length;
}

/**
 * A validator compiled on its first call, for every later call the compiled one. A tier declares
 * far more schemas than a process ends up using: compiling them all at start-up took about a third
 * of a core-api start's CPU and a quarter of ingest's (V8 profiles). A schema's first request
 * pays its compilation instead (milliseconds), and `test/unit/schemas-compile.test.ts` compiles
 * every one of them, so a schema Ajv refuses still fails before it ships.
 */
export function lazyCompile<T>(ajv: Ajv, schema: object): ValidateFunction<T> {
  let compiled: ValidateFunction<T> | undefined;
  declared.push(() => {
    compiled ??= ajv.compile<T>(schema);
  });
  const validate = ((data: unknown, ctx?: unknown) => {
    compiled ??= ajv.compile<T>(schema);
    const ok = (compiled as (d: unknown, c?: unknown) => boolean)(data, ctx);
    validate.errors = compiled.errors;
    return ok;
  }) as ValidateFunction<T>;
  validate.errors = null;
  validate.schema = schema;
  return validate;
}

export interface Compiled<T> {
  /** Fast check; fills defaults. */
  check: ValidateFunction<T>;
  /** Same schema, every error reported: used only once `check` has failed. */
  explain: ValidateFunction<T>;
}

const fast = createAjv();
const full = createAjv({ allErrors: true });

export function compile<S extends TSchema>(schema: S): Compiled<Static<S>> {
  return { check: lazyCompile(fast, schema as object), explain: lazyCompile(full, schema as object) };
}

/** A string format as every Ajv of the service checks it (`email`, `uuid`…), for code that checks without a schema. */
export function formatCheck(name: string): (value: string) => boolean {
  const f = fast.formats[name];
  if (f instanceof RegExp) return (v) => f.test(v);
  if (typeof f === 'function') return (v) => f(v) === true;
  if (typeof f === 'object' && typeof f.validate === 'function') {
    const validate = f.validate as (v: string) => boolean;
    return (v) => validate(v) === true;
  }
  if (typeof f === 'object' && f.validate instanceof RegExp) {
    const re = f.validate;
    return (v) => re.test(v);
  }
  throw new Error(`no string format ${name}`);
}
