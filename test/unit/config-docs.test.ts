import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { CoreApiConfig } from '../../core-api/config.js';
import { IngestConfig } from '../../ingest/config.js';
import { configurationDoc, undescribed } from '../../infra/config-docs.js';
import { ROOT } from '../../infra/stack.js';
import { ProcessorsConfig } from '../../processors/config.js';

// docs/configuration.md is written from the tiers' config schemas: an operator reads there every
// variable a tier accepts, with the default and meaning the tier itself uses.
const file = path.join(ROOT, 'docs', 'configuration.md');
const FIX = 'run `npm run docs:config` and commit docs/configuration.md';

t.test('every configuration variable has a description in its schema', async (t) => {
  t.same(undescribed(), [], 'variables without a `description` (add one in the tier’s config.ts)');
});

t.test('docs/configuration.md is what the generator writes from the schemas', async (t) => {
  const current = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  const expected = configurationDoc();
  if (current === expected) return t.pass('docs/configuration.md is up to date');
  const a = current.split('\n');
  const b = expected.split('\n');
  const line = a.findIndex((l, i) => l !== b[i]);
  t.fail(`docs/configuration.md is out of date: ${FIX}`, {
    line: line + 1,
    found: a[line] ?? '(end of file)',
    wanted: b[line] ?? '(end of file)',
  });
});

t.test('every variable of every tier has its row, with its default', async (t) => {
  const doc = configurationDoc();
  for (const [tier, schema] of [
    ['ingest', IngestConfig],
    ['processors', ProcessorsConfig],
    ['core-api', CoreApiConfig],
  ] as const) {
    const props = (schema as { properties: Record<string, { default?: unknown }> }).properties;
    const names = Object.keys(props);
    t.ok(names.length > 10, `${tier}: ${names.length} variables`);
    const missing = names.filter((n) => !doc.includes(`| \`${n}\` |`));
    t.same(missing, [], `${tier}: variables without a row`);
  }
  t.match(doc, /\| `INGEST_PROCESSES` \| integer, ≥ 1 \| one per core \|/, 'a machine-dependent default is described');
  t.match(doc, /\| `WEBHOOK_DISABLE_AFTER_MS` \| integer, ≥ 1000 \| `432000000` \(5 days\) \|/, 'long durations read');
});
