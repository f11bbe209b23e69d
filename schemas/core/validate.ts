import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { Static, TSchema } from '#typebox';
import { addFormats, lazyCompile } from '../ajv.js';

const make = (coerce: boolean): Ajv =>
  addFormats(new Ajv({ strict: false, allErrors: true, useDefaults: true, coerceTypes: coerce }));
const bodyAjv = make(false);
const queryAjv = make(true);

export type Validator<T> = ValidateFunction<T>;
export type { ErrorObject };

/** Bodies: JSON types as sent, every error reported. */
export const compileBody = <S extends TSchema>(s: S): Validator<Static<S>> => lazyCompile(bodyAjv, s as object);
/** Query strings and path parameters: strings coerced to the declared type. */
export const compileQuery = <S extends TSchema>(s: S): Validator<Static<S>> => lazyCompile(queryAjv, s as object);
