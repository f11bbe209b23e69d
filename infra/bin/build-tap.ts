import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REQUIRE_BANNER, ROOT } from '../stack.js';

/**
 * npm run build:tap: tap rebuilt with the plugins package.json `"tap"` names (`tap build`), then
 * bundled into one module, dist/vendor/tap.mjs, that the tests import as `#tap`. Both depend only on
 * the installed packages, the plugin list and Node.js, so they are made again only when one of
 * those changed: about 10 CPU-seconds that every `npm test`, `test:newcomer` and `test:cluster`
 * paid before.
 */
const bin = (name: string) => join(ROOT, 'node_modules', '.bin', name);
const vendor = join(ROOT, 'dist', 'vendor');
const bundle = join(vendor, 'node_modules', '@tapjs', 'tap.mjs');
const stampFile = join(vendor, 'tap.stamp');
const built = join(ROOT, 'node_modules', '@tapjs', 'test', 'test-built');

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { tap?: unknown };
const stamp = createHash('sha256')
  .update(readFileSync(join(ROOT, 'package-lock.json')))
  .update(JSON.stringify(pkg.tap ?? null))
  .update(process.version)
  .digest('hex');

const current =
  existsSync(bundle) && existsSync(built) && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp;
if (!current) {
  execFileSync(bin('tap'), ['build'], { cwd: ROOT, stdio: 'inherit' });
  execFileSync(
    bin('esbuild'),
    [
      'tap',
      '--bundle',
      '--format=esm',
      '--platform=node',
      '--log-level=warning',
      `--banner:js=${REQUIRE_BANNER}`,
      `--outfile=${bundle}`,
    ],
    { cwd: ROOT, stdio: 'inherit' },
  );
  execFileSync('ln', ['-sfn', 'node_modules/@tapjs/tap.mjs', join(vendor, 'tap.mjs')]);
  writeFileSync(stampFile, stamp);
}
