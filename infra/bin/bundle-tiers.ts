import path from 'node:path';
import { build } from 'esbuild';
import { BUNDLED_TIERS, REQUIRE_BANNER, ROOT, tierEntry } from '../stack.js';

/**
 * A step of `npm run build`: the entry of the processors and core-api tiers (dist/<tier>/main.js)
 * bundled with the modules and packages it imports into dist/<tier>/bundle.js, the file every
 * launcher starts (infra/start.ts, the tests, the benchmark). A process then reads one file instead
 * of some 600 and starts on about a third less CPU (measured on this machine: core-api 0.78 → 0.52
 * CPU-s, processors 0.64 → 0.44), which the test suite pays about 150 times a run. The ingest tier
 * is left out (infra/stack.ts BUNDLED_TIERS says why).
 * - The bundle sits beside main.js, at the same depth, so paths a module builds from its own URL
 *   (infra/stack.ts's ROOT, the processors' worker files) still point where they did.
 * - Left out: uWebSockets.js (a native addon) and piscina (it starts its worker threads from its
 *   own files); the worker threads load their modules from dist/ as before.
 * - Source maps go to bundle.js.map, through the build's per-file maps to the TypeScript sources; a stack trace
 *   names them with `NODE_OPTIONS=--enable-source-maps` (about 0.17 CPU-s more per start, so not
 *   by default). Without it, frames name the bundle's lines, where esbuild keeps each module's
 *   path in a comment and every function's name.
 */
await Promise.all(
  BUNDLED_TIERS.map((tier) =>
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
        js: REQUIRE_BANNER,
      },
      sourcemap: true,
      logLevel: 'warning',
    }),
  ),
);
