import t from '#tap';
import { type AppDeps, buildRoutes } from '../../core-api/app.js';
import { compileRoute } from '../../core-api/http/server.js';
import { compileDeclared, createAjv, lazyCompile } from '../../schemas/ajv.js';
import '../../ingest/surface-a/routes.js';
import '../../ingest/surface-b/events.js';
import '../../ingest/surface-b/steps.js';

/**
 * Validators compile on their first call (schemas/ajv.ts lazyCompile), so a schema Ajv refuses
 * would only fail on the first request that reaches it. This compiles every one the tiers declare:
 * each route of the core API (its table built with inert dependencies: only the schemas are read)
 * and the ingest tier's.
 */

/** Dependencies that answer everything with themselves: route factories only keep them for their handlers. */
const inert: AppDeps = new Proxy(() => {}, {
  get: (_t, key) => (key === 'then' ? undefined : key === Symbol.toPrimitive ? () => '' : inert),
  apply: () => inert,
  construct: () => inert as object,
}) as unknown as AppDeps;

t.test('every schema of the core API and the ingest tier compiles', async (t) => {
  const routes = buildRoutes(inert);
  t.ok(routes.length > 80, `${routes.length} core API routes`);
  for (const r of routes) compileRoute(r);
  let declared = 0;
  t.doesNotThrow(() => {
    declared = compileDeclared();
  }, 'no schema refused');
  t.ok(declared > 100, `${declared} validators compiled`);
});

t.test(
  'a lazily compiled validator reports as a compiled one does, and a bad schema fails when compiled',
  async (t) => {
    const schema = { type: 'object', properties: { n: { type: 'integer', minimum: 1 } }, required: ['n'] };
    const lazy = lazyCompile<{ n: number }>(createAjv({ allErrors: true }), schema);
    t.equal(lazy({ n: 2 }), true);
    t.equal(lazy.errors, null, 'no errors after a valid value');
    t.equal(lazy({ n: 0 }), false);
    t.match(lazy.errors, [{ instancePath: '/n', keyword: 'minimum' }], 'the errors of the failed call');
    lazyCompile(createAjv(), { type: 'object', properties: { n: { type: 'no-such-type' } } });
    t.throws(() => compileDeclared(), 'compileDeclared throws for a schema Ajv refuses');
  },
);
