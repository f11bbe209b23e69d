import { probeRoutes, type Probes } from '../lib/http/probes.js';
import type { HttpRequest, HttpResponse, TemplatedApp } from '../lib/http/uws.js';
import { INGEST_ROUTES } from '../schemas/ingest-routes.js';
import { surfaceA, type SurfaceA } from './surface-a/routes.js';
import { unknownPathB } from './surface-b/not-found.js';
import { surfaceB, type SurfaceBDeps } from './surface-b/routes.js';

/**
 * The ingest tier's port: both ingestion surfaces (surface-a/, surface-b/), the probes, and one
 * catch-all that answers an unknown path in the shape of the surface whose paths it resembles.
 */
export function ingestApp(app: TemplatedApp, a: SurfaceA, b: SurfaceBDeps, probes: Probes): TemplatedApp {
  const A = surfaceA(a);
  const B = surfaceB(b);
  const R = INGEST_ROUTES;
  const unknownB = unknownPathB(b.baseUrl);
  const unmatched = (res: HttpResponse, req: HttpRequest) => {
    if (!unknownB(res, req)) A.unmatched(res, req);
  };
  app
    .post(R.events.path, B.events)
    .get(R.query.path, B.query)
    .head(R.query.path, B.query)
    .post(R.backfill.path, B.backfill)
    .any(R.events.path, B.eventsNotAllowed)
    .any(R.backfill.path, B.backfillNotAllowed)
    .post(R.usage.path, A.usage)
    .post(R.billing.path, A.billing);
  return probeRoutes(app, probes).any('/*', unmatched);
}
