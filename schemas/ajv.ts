import { Ajv, type Options, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { TSchema, Static } from 'typebox';

// ajv-formats is CommonJS; under NodeNext its default export arrives one level down.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ??
  addFormatsModule) as unknown as (ajv: Ajv, formats?: string[]) => Ajv;

const FORMATS = ['date-time', 'date', 'time', 'email', 'uuid', 'uri', 'hostname', 'ipv4', 'ipv6'];

/** One Ajv per purpose: `fast` stops at the first error (hot path), `full` reports them all. */
export function createAjv(opts: Options = {}): Ajv {
  const ajv = new Ajv({ strict: false, allErrors: false, useDefaults: true, coerceTypes: false, ...opts });
  addFormats(ajv, FORMATS);
  return ajv;
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
