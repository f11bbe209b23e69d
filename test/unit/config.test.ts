import t from '#tap';
import { Type } from '#typebox';
import { type ConfigError, loadConfig } from '../../lib/config.js';
import { ProcessorsConfig } from '../../processors/config.js';

// A process's settings from its environment (lib/config.ts): what an operator sees for what they set.
const Schema = Type.Object({
  PORT: Type.Integer({ minimum: 1, maximum: 65535, default: 8080 }),
  RATIO: Type.Number({ default: 0.5 }),
  ENABLED: Type.Boolean({ default: false }),
  NAME: Type.String({ minLength: 1 }),
  IDS: Type.String({ pattern: '^\\d+(,\\d+)*$', default: '1' }),
});

t.test('text is read as each setting type; unset and empty variables take the default', async (t) => {
  const c = loadConfig(Schema, { PORT: ' 9000 ', RATIO: '1e-3', ENABLED: 'true', NAME: 'x', IDS: '', OTHER: 'y' });
  t.same(c, { PORT: 9000, RATIO: 0.001, ENABLED: true, NAME: 'x', IDS: '1' }, 'variables not in the schema left out');
  t.ok(Object.isFrozen(c));
  t.same(loadConfig(Schema, { NAME: 'x', ENABLED: 'false' }), {
    NAME: 'x',
    ENABLED: false,
    PORT: 8080,
    RATIO: 0.5,
    IDS: '1',
  });
});

t.test('every wrong variable is named at once, and nothing is rounded or guessed', async (t) => {
  const err = t.throws(() =>
    loadConfig(Schema, { PORT: '1.5', RATIO: 'half', ENABLED: 'yes', IDS: '1,,2' }),
  ) as ConfigError;
  t.equal(err.name, 'ConfigError');
  t.match(err.message, /^invalid configuration:\n/);
  for (const line of [
    /^ {2}NAME: .*required/m,
    /^ {2}PORT: must be integer$/m,
    /^ {2}RATIO: must be number$/m,
    /^ {2}ENABLED: must be boolean$/m,
    /^ {2}IDS: must match pattern/m,
  ])
    t.match(err.message, line);
  t.match(
    (t.throws(() => loadConfig(Schema, { NAME: 'x', PORT: '70000' })) as Error).message,
    /PORT: must be <= 65535/,
  );
});

t.test("the processors' schema with no variable set: its defaults", async (t) => {
  const c = loadConfig(ProcessorsConfig, {});
  const defaults = Object.entries(ProcessorsConfig.properties).filter(([, s]) => 'default' in s);
  t.ok(defaults.length > 50);
  for (const [k, s] of defaults)
    t.equal((c as Record<string, unknown>)[k], (s as unknown as { default: unknown }).default, k);
});
