import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { Static, TSchema } from 'typebox';

// ajv-formats is CommonJS; under NodeNext its default export arrives one level down.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ??
  addFormatsModule) as unknown as (ajv: Ajv, formats?: string[]) => Ajv;
const FORMATS = ['date-time', 'date', 'email', 'uuid', 'uri', 'hostname', 'ipv4', 'ipv6'];

function make(coerce: boolean): Ajv {
  const ajv = new Ajv({ strict: false, allErrors: true, useDefaults: true, coerceTypes: coerce });
  addFormats(ajv, FORMATS);
  return ajv;
}
const bodyAjv = make(false);
const queryAjv = make(true);

export type Validator<T> = ValidateFunction<T>;
export type { ErrorObject };

/** Bodies: JSON types as sent, every error reported. */
export const compileBody = <S extends TSchema>(s: S): Validator<Static<S>> => bodyAjv.compile<Static<S>>(s as object);
/** Query strings and path parameters: strings coerced to the declared type. */
export const compileQuery = <S extends TSchema>(s: S): Validator<Static<S>> => queryAjv.compile<Static<S>>(s as object);
