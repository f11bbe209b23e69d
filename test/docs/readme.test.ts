import fs from 'node:fs';
import path from 'node:path';
import t from '#tap';
import { CoreApiConfig } from '../../core-api/config.js';
import { ROOT } from '../../infra/stack.js';
import { IngestConfig } from '../../ingest/config.js';
import { ProcessorsConfig } from '../../processors/config.js';

// The README is read first and must stay short; every variable it names must be one a tier accepts
// (docs/configuration.md, generated from the schemas, has them all: test/unit/config-docs.test.ts).
const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const configuration = fs.readFileSync(path.join(ROOT, 'docs', 'configuration.md'), 'utf8');

t.test('the README links the full configuration table, and names only variables that exist', async (t) => {
  t.match(readme, /\(docs\/configuration\.md\)/, 'README links docs/configuration.md');
  const known = new Set(
    [IngestConfig, ProcessorsConfig, CoreApiConfig].flatMap((s) =>
      Object.keys((s as { properties: object }).properties),
    ),
  );
  const section = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('## Tests'));
  const named = [...section.matchAll(/`([A-Z][A-Z0-9_]{3,})`/g)].map((m) => m[1]);
  t.ok(named.length > 10, `the Configuration section names ${named.length} variables`);
  const unknown = named.filter((v) => !known.has(v) && !configuration.includes(`\`${v}\``));
  t.same(unknown, [], 'variables the README names that no tier or script reads');
});

t.test('the README stays short enough to read', async (t) => {
  const lines = readme.split('\n').length;
  t.ok(lines <= 350, `README.md has ${lines} lines (at most 350; long sections go to docs/)`);
});

t.test('every relative link of the README and docs/ leads to a file that exists', async (t) => {
  const files = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md'))];
  for (const f of files) {
    const file = f === 'README.md' ? path.join(ROOT, f) : path.join(ROOT, 'docs', f);
    const text = fs.readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
    const broken = [...text.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)]
      .map((m) => m[1])
      .filter((target) => !/^[a-z]+:/.test(target))
      .filter((target) => !fs.existsSync(path.resolve(path.dirname(file), target)));
    t.same(broken, [], `${f}: links to missing files`);
  }
});

t.test('the README gives the two commands a newcomer runs, and CI runs the same test command', async (t) => {
  t.match(readme, /npm install && npm start/);
  t.match(readme, /npm test/);
  const ci = fs.readFileSync(path.join(ROOT, '.ci/run'), 'utf8');
  t.match(ci, /^npm test$/m);
});
