// npm run build's first step. The source folders are listed once, in tsconfig.json's "include": every
// .ts file under them is translated to dist/ (each file on its own, types not checked: that is npm
// run typecheck), then TypeBox is bundled into one module (#typebox in package.json "imports").
// Plain JavaScript: it runs before anything of ours is built.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const { include } = JSON.parse(readFileSync(new URL('../tsconfig.json', import.meta.url), 'utf8'));
const common = { absWorkingDir: root, platform: 'node', format: 'esm', logLevel: 'warning' };

await build({
  ...common,
  entryPoints: include.map((dir) => `${dir}/**/*.ts`),
  outdir: 'dist',
  outbase: '.',
  target: 'es2022',
  sourcemap: true,
});
await build({
  ...common,
  entryPoints: { typebox: 'typebox', 'typebox-value': 'typebox/value' },
  bundle: true,
  splitting: true,
  outdir: 'dist/vendor',
  outExtension: { '.js': '.mjs' },
  chunkNames: 'typebox-[hash]',
});
