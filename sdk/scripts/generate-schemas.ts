import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { MAX_B_BATCH, UsageEventB } from '../../schemas/events.js';
import { MAX_USAGE_BATCH, UsageEventA } from '../../schemas/ingest.js';
import { INGEST_LIMITS } from '../../schemas/ingest-limits.js';
import { INGEST_ROUTES } from '../../schemas/ingest-routes.js';

/**
 * The client validates events against the service's own schemas, but may not depend on TypeBox or
 * Ajv at run time: the schemas are written out as plain JSON Schema into sdk/src. A unit test
 * (test/unit/sdk-schemas.test.ts) fails when the written file no longer matches schemas/, so the
 * client cannot drift from the service unnoticed.
 */

/** JSON Schema without the documentation: only what validation reads. */
function plain(schema: unknown): unknown {
  return JSON.parse(JSON.stringify(schema, (k, v) => (k === 'description' ? undefined : v)));
}

export function schemasModule(): string {
  const surfaces = {
    a: {
      path: INGEST_ROUTES.usage.path,
      maxBatchEvents: MAX_USAGE_BATCH,
      maxBodyBytes: INGEST_LIMITS.surfaceABodyBytes,
      event: plain(UsageEventA),
    },
    b: {
      path: INGEST_ROUTES.events.path,
      backfillPath: INGEST_ROUTES.backfill.path,
      maxBatchEvents: MAX_B_BATCH,
      maxBodyBytes: INGEST_LIMITS.surfaceBBodyBytes,
      event: plain(UsageEventB),
    },
  };
  return `// Written by sdk/scripts/generate-schemas.ts from schemas/
// (npm run -s build && node dist/sdk/scripts/generate-schemas.js).
// Do not edit: test/unit/sdk-schemas.test.ts compares it with the service's schemas.
import type { SurfaceSchemas } from './validate.js';

export const SURFACES: SurfaceSchemas = ${JSON.stringify(surfaces, null, 2)};
`;
}

export const GENERATED = path.resolve(fileURLToPath(import.meta.url), '../../../../sdk/src/schemas.generated.ts');

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  fs.writeFileSync(GENERATED, schemasModule());
  process.stdout.write(`wrote ${GENERATED}\n`);
}
