import path from 'node:path';
import { build } from 'esbuild';
import { ROOT, TIERS, tierEntry } from '../stack.js';

/**
 * `npm run build`'s last step: each tier's entry as tsc wrote it (dist/<tier>/main.js) bundled with
 * the modules and packages it imports into dist/<tier>/bundle.js, the file every launcher starts
 * (infra/start.ts, the tests, the benchmark). A process then reads one file instead of some 600
 * and starts on about 40 % less CPU (core-api 0.88 → 0.53 CPU-s measured on this machine), which
 * the test suite pays about 200 times a run.
 * - The bundle sits beside main.js, at the same depth, so paths a module builds from its own URL
 *   (infra/stack.ts's ROOT, the processors' worker files) still point where they did.
 * - Left out: uWebSockets.js (a native addon) and piscina (it starts its worker threads from its
 *   own files); the worker threads load their modules from dist/ as before.
 * - Source maps go to bundle.js.map, through tsc's maps to the TypeScript sources; a stack trace
 *   names them with `NODE_OPTIONS=--enable-source-maps` (about 0.17 CPU-s more per start, so not
 *   by default). Without it, frames name the bundle's lines, where esbuild keeps each module's
 *   path in a comment and every function's name.
 */
await Promise.all(
  TIERS.map((tier) =>
    build({
      entryPoints: [path.join(ROOT, 'dist', tier, 'main.js')],
      outfile: path.join(ROOT, tierEntry(tier)),
      bundle: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      external: ['uWebSockets.js', 'piscina'],
      // Packages written as CommonJS call require(), which an ES module does not have.
      banner: {
        js: "import { createRequire as __bundleRequire } from 'node:module'; const require = __bundleRequire(import.meta.url);",
      },
      sourcemap: true,
      logLevel: 'warning',
    }),
  ),
);
