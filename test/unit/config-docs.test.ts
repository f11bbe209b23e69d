import fs from 'node:fs';
import path from 'node:path';
import t from '#tap';
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

/** Every variable a script of infra/ reads from its environment, with the files that read it. */
function scriptReads(): Map<string, string[]> {
  const reads = new Map<string, string[]>();
  const add = (name: string, file: string) => reads.set(name, [...(reads.get(name) ?? []), file]);
  const walk = (dir: string): string[] =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const p = path.join(dir, e.name);
      return e.isDirectory() ? walk(p) : e.name.endsWith('.ts') ? [p] : [];
    });
  for (const file of walk(path.join(ROOT, 'infra'))) {
    const src = fs.readFileSync(file, 'utf8');
    const rel = path.relative(ROOT, file);
    for (const m of src.matchAll(/process\.env(?:\.([A-Z_][A-Z0-9_]*)|\[['"]([A-Z_][A-Z0-9_]*)['"]\])/g))
      add(m[1] ?? m[2], rel);
    for (const m of src.matchAll(/(?:const|let)\s*\{([^}]*)\}\s*=\s*process\.env\b/g))
      for (const n of m[1].split(',')) if (n.trim()) add(n.split(':')[0].trim(), rel);
    // A tier's schema, picked: loadConfig(Type.Pick(Schema, ['A', 'B']), process.env).
    for (const m of src.matchAll(/loadConfig\(([\s\S]*?),\s*process\.env\s*\)/g)) {
      const pick = /^\s*Type\.Pick\(\s*\w+,\s*\[([^\]]*)\]\s*\)\s*$/.exec(m[1]);
      if (!pick) add(`(every variable of ${m[1].trim()})`, rel);
      else for (const n of pick[1].matchAll(/['"]([A-Z_][A-Z0-9_]*)['"]/g)) add(n[1], rel);
    }
  }
  return reads;
}

t.test('every variable a script of infra/ reads has its row in the Scripts table', async (t) => {
  const doc = configurationDoc();
  const scripts = doc.slice(doc.indexOf('\n## Scripts\n'));
  t.ok(scripts.length > 20, 'docs/configuration.md has a Scripts section');
  const listed = new Set([...scripts.matchAll(/`([A-Z_][A-Z0-9_]*)`/g)].map((m) => m[1]));
  const reads = scriptReads();
  t.ok(reads.has('STACK_PROFILE') && reads.has('CLICKHOUSE_URL'), `the scan finds the reads (${reads.size} names)`);
  const missing = [...reads]
    .filter(([name]) => !listed.has(name))
    .map(([name, files]) => `${name} (${files.join(', ')})`);
  t.same(missing, [], 'read by a script under infra/ but not in the Scripts table of infra/config-docs.ts');
});
