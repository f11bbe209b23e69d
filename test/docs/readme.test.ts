import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../../infra/stack.js';

// The README's configuration tables are what operators read: every variable a tier accepts must be there.
const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const mains = [
  'ingest/main.ts',
  'ingest/config.ts',
  'processors/main.ts',
  'core-api/main.ts',
  'core-api/config.ts',
].filter((f) => fs.existsSync(path.join(ROOT, f)));

t.test('every configuration variable of every tier is documented in the README', async (t) => {
  const vars = new Set<string>();
  for (const f of mains) {
    for (const m of fs.readFileSync(path.join(ROOT, f), 'utf8').matchAll(/^\s+([A-Z][A-Z0-9_]+): Type\./gm))
      vars.add(m[1]);
  }
  t.ok(vars.size > 20, `found ${vars.size} variables`);
  const missing = [...vars].filter((v) => !readme.includes(`\`${v}\``));
  t.same(missing, [], 'variables missing from README.md');
});

t.test('the README gives the two commands a newcomer runs, and CI runs the same test command', async (t) => {
  t.match(readme, /npm install && npm start/);
  t.match(readme, /npm test/);
  const ci = fs.readFileSync(path.join(ROOT, '.ci/run'), 'utf8');
  t.match(ci, /^npm test$/m);
});
