import fs from 'node:fs';
import path from 'node:path';
import { configurationDoc } from '../config-docs.js';
import { ROOT } from '../stack.js';

/**
 * npm run docs:config [-- --check]
 * Writes docs/configuration.md from the tiers' config schemas (infra/config-docs.ts). With
 * `--check` it writes nothing and exits 1 when the file differs from what it would write.
 */
const file = path.join(ROOT, 'docs', 'configuration.md');
const doc = configurationDoc();
if (process.argv.includes('--check')) {
  const current = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  if (current !== doc) {
    process.stderr.write('docs/configuration.md is out of date: run npm run docs:config\n');
    process.exit(1);
  }
} else {
  fs.writeFileSync(file, doc);
  process.stderr.write(`wrote ${path.relative(ROOT, file)}\n`);
}
