import { Ajv } from 'ajv';
import type { TSchema, Static } from '#typebox';

/**
 * Reads a process's configuration from the environment against one schema: defaults filled in,
 * strings coerced to numbers and booleans, every error reported at once, the result frozen.
 * Property names of the schema are the environment variable names.
 */
export function loadConfig<T extends TSchema>(schema: T, env: NodeJS.ProcessEnv): Readonly<Static<T>> {
  const ajv = new Ajv({ coerceTypes: true, useDefaults: true, allErrors: true, removeAdditional: true, strict: false });
  const validate = ajv.compile(schema as object);
  const props = (schema as { properties?: Record<string, unknown> }).properties ?? {};
  const input: Record<string, unknown> = {};
  for (const key of Object.keys(props)) {
    const value = env[key];
    if (value !== undefined && value !== '') input[key] = value;
  }
  if (!validate(input)) {
    const lines = (validate.errors ?? []).map(
      (e) => `  ${e.instancePath.slice(1) || e.params.missingProperty || '(config)'}: ${e.message}`,
    );
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  return Object.freeze(input) as Readonly<Static<T>>;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * Runs a process's configuration step; a ConfigError (bad or missing variables) is logged as one
 * fatal line and the process exits, anything else propagates.
 */
export function configOrExit<T>(log: { fatal(msg: string): void }, build: () => T): T {
  try {
    return build();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    log.fatal(err.message);
    process.exit(1);
  }
}

/** A comma-separated setting as its items: trimmed, blanks dropped. */
export function commaList(value: string): string[] {
  return value
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
}
