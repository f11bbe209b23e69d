import fs from 'node:fs';
import path from 'node:path';
import t from '#tap';
import { ROOT } from '../../infra/stack.js';
import { apiTier } from './support.js';
import { coverageGaps, documentRoutes, TARGETS } from './targets.js';

// Every route of the OpenAPI document (the core API's and the ingest tier's) has a fuzz target.
const api = await apiTier(t);
const doc = (await (await fetch(`${api.url}/v1/openapi.json`)).json()) as Parameters<typeof documentRoutes>[0];
const routes = documentRoutes(doc);

t.test('every route of the OpenAPI document has a fuzz target (test/fuzz/targets.ts)', async (t) => {
  const { missing, stale, twice } = coverageGaps(routes);
  t.ok(routes.length > 0, `${routes.length} routes in the document`);
  t.same(missing, [], `routes without a fuzz target: ${missing.join('; ') || 'none'}`);
  t.same(stale, [], `targets naming no route of the document: ${stale.join('; ') || 'none'}`);
  t.same(twice, [], 'no route in two surfaces');
  t.same(coverageGaps([...routes, 'PUT /v1/new']).missing, ['PUT /v1/new'], 'a new route is named as missing');
});

t.test('every target file exists', async (t) => {
  for (const file of new Set(TARGETS.map((x) => x.file)))
    t.ok(fs.existsSync(path.join(ROOT, 'test', 'fuzz', `${file}.test.ts`)), `test/fuzz/${file}.test.ts`);
});
