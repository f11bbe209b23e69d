import Type, { type TSchema, type Static } from '#typebox';
import { Value } from '#typebox/value';

/**
 * Reads a process's configuration from the environment against one schema: strings coerced to
 * numbers and booleans, defaults filled in, every error reported at once, the result frozen.
 * Property names of the schema are the environment variable names. Checked by TypeBox's value
 * functions, which read the schema as it is: a process starts without compiling a validator for
 * its hundred or so settings (about a quarter of a CPU-second with Ajv).
 */
export function loadConfig<T extends TSchema>(schema: T, env: NodeJS.ProcessEnv): Readonly<Static<T>> {
  const props = (schema as { properties?: Record<string, TSchema> }).properties ?? {};
  const input: Record<string, unknown> = {};
  for (const [key, s] of Object.entries(props)) {
    const value = env[key];
    if (value !== undefined && value !== '') input[key] = coerce(s, value);
  }
  const config = Value.Default(schema, input);
  const errors = Value.Errors(schema, config);
  if (errors.length) {
    const lines = errors.map((e) => {
      const missing = (e.params as { requiredProperties?: string[] }).requiredProperties;
      return `  ${e.instancePath.slice(1) || missing?.join(', ') || '(config)'}: ${e.message}`;
    });
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  return Object.freeze(config) as Readonly<Static<T>>;
}

/**
 * A variable's text as its setting's type: a number from a numeric string ("1.5" stays 1.5, so an
 * integer setting refuses it), a boolean from `true` or `false`; anything else is left as text,
 * for the check to refuse.
 */
function coerce(schema: TSchema, text: string): unknown {
  const type = (schema as { type?: string }).type;
  if ((type === 'integer' || type === 'number') && text.trim() !== '' && Number.isFinite(Number(text)))
    return Number(text);
  if (type === 'boolean' && (text === 'true' || text === 'false')) return text === 'true';
  return text;
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

/**
 * Where surface B's external_id deduplication happens, read by the ingest and processors tiers
 * alike (set it the same for both).
 */
export const SurfaceBDedup = Type.Union([Type.Literal('request'), Type.Literal('stream')], {
  default: 'stream',
  description:
    "Where surface B's external_id deduplication happens; set it the same for the ingest and processors tiers. " +
    'request (the earlier way): each request claims its keys in PostgreSQL before it publishes. stream: every ' +
    'valid event is published, and the keyed writers (each partition of the workspaces on one processors ' +
    'instance at a time) drop duplicates between the stream and ClickHouse (docs/ingestion.md).',
});
