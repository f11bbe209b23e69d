import { Ajv, type Options, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { TSchema, Static } from 'typebox';
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

export interface Compiled<T> {
  /** Fast check; fills defaults. */
  check: ValidateFunction<T>;
  /** Same schema, every error reported: used only once `check` has failed. */
  explain: ValidateFunction<T>;
}

const fast = createAjv();
const full = createAjv({ allErrors: true });

export function compile<S extends TSchema>(schema: S): Compiled<Static<S>> {
  return { check: fast.compile<Static<S>>(schema as object), explain: full.compile<Static<S>>(schema as object) };
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
