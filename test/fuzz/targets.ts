/**
 * Which fuzz surface sends requests to each route of the OpenAPI document (GET /v1/openapi.json,
 * which holds the ingest tier's routes too). coverage.test.ts fails on a route of the document
 * that is missing here, so a new route cannot be left out; the files built from route seeds
 * (route-surface.ts) fuzz exactly the routes this table gives their surfaces and refuse to start
 * when one has no seed. Routes are `METHOD /path` as the document writes them.
 */
export interface Target {
  /** The test file under test/fuzz/, without its extension. */
  file: string;
  /** The surface's name: its figures in docs/fuzz-figures/ and its row in docs/reliability.md. */
  surface: string;
  routes: readonly string[];
}

export const TARGETS: readonly Target[] = [
  // Written by hand, one route (or two) per surface.
  { file: 'ingest-a', surface: 'surface A POST /v1/ingest/events', routes: ['POST /v1/ingest/events'] },
  {
    file: 'ingest-a',
    surface: 'surface A POST /v1/ingest/billing-events',
    routes: ['POST /v1/ingest/billing-events'],
  },
  { file: 'events-b', surface: 'surface B POST /v1/events', routes: ['POST /v1/events'] },
  { file: 'events-b', surface: 'surface B POST /v1/events/backfill', routes: ['POST /v1/events/backfill'] },
  { file: 'events-b', surface: 'surface B GET /v1/events', routes: ['GET /v1/events'] },
  { file: 'customers', surface: 'core POST /v1/customers', routes: ['POST /v1/customers'] },
  { file: 'customers', surface: 'core PATCH /v1/customers/{id}', routes: ['PATCH /v1/customers/{id}'] },
  {
    file: 'customers',
    surface: 'core POST /v1/customers/{id}/contacts',
    routes: ['POST /v1/customers/{id}/contacts'],
  },
  { file: 'customers', surface: 'core GET /v1/customers', routes: ['GET /v1/customers'] },
  { file: 'customers', surface: 'core POST /v1/customers/bulk-import', routes: ['POST /v1/customers/bulk-import'] },
  {
    file: 'accounts',
    surface: 'core POST /v1/users, PATCH /v1/users/{id}/role',
    routes: ['POST /v1/users', 'PATCH /v1/users/{id}/role'],
  },
  { file: 'accounts', surface: 'core POST /v1/api-keys', routes: ['POST /v1/api-keys'] },
  { file: 'oauth', surface: 'core POST /v1/oauth/token', routes: ['POST /v1/oauth/token'] },
  { file: 'oauth', surface: 'core GET /v1/oauth/authorize', routes: ['GET /v1/oauth/authorize'] },

  // Built from route seeds: one surface per resource, its routes' cases mixed.
  {
    file: 'library',
    surface: 'core health',
    routes: [
      'GET /v1/customers/{id}/health',
      'GET /v1/customers/{id}/health/history',
      'POST /v1/customers/{id}/health/recalculate',
      'GET /v1/health/model',
      'PATCH /v1/health/model',
    ],
  },
  {
    file: 'library',
    surface: 'core metrics',
    routes: [
      'GET /v1/event-catalog',
      'GET /v1/metrics',
      'POST /v1/metrics',
      'GET /v1/metrics/{id}',
      'PATCH /v1/metrics/{id}',
      'DELETE /v1/metrics/{id}',
      'POST /v1/metrics/test',
      'GET /v1/metrics/{id}/values',
      'POST /v1/metrics/{id}/materialize',
    ],
  },
  {
    file: 'library',
    surface: 'core metric proposals',
    routes: [
      'POST /v1/metrics/proposals',
      'GET /v1/metrics/proposals/{id}',
      'POST /v1/metrics/proposals/{id}/accept',
      'POST /v1/metrics/proposals/{id}/reject',
    ],
  },
  {
    file: 'library',
    surface: 'core usage widgets and objectives',
    routes: [
      'GET /v1/usage-widgets',
      'POST /v1/usage-widgets',
      'DELETE /v1/usage-widgets/{id}',
      'GET /v1/usage-widgets/{id}/value',
      'POST /v1/customers/{id}/objectives',
      'GET /v1/customers/{id}/objectives',
      'DELETE /v1/objectives/{id}',
    ],
  },
  {
    file: 'workflow',
    surface: 'core segments',
    routes: [
      'GET /v1/segments',
      'POST /v1/segments',
      'GET /v1/segments/{id}',
      'PATCH /v1/segments/{id}',
      'DELETE /v1/segments/{id}',
    ],
  },
  {
    file: 'workflow',
    surface: 'core playbooks',
    routes: [
      'GET /v1/playbooks',
      'POST /v1/playbooks',
      'GET /v1/playbooks/{id}',
      'PATCH /v1/playbooks/{id}',
      'DELETE /v1/playbooks/{id}',
      'GET /v1/playbooks/{id}/runs',
      'POST /v1/playbooks/{id}/run',
    ],
  },
  {
    file: 'workflow',
    surface: 'core tasks',
    routes: [
      'GET /v1/tasks',
      'POST /v1/tasks',
      'GET /v1/tasks/{id}',
      'PATCH /v1/tasks/{id}',
      'POST /v1/tasks/{id}/complete',
    ],
  },
  {
    file: 'workflow',
    surface: 'core analytics and alerts',
    routes: [
      'GET /v1/analytics/portfolio',
      'GET /v1/analytics/renewals',
      'GET /v1/analytics/cohorts',
      'GET /v1/alerts',
      'PATCH /v1/alerts/{id}',
    ],
  },
  {
    file: 'connections',
    surface: 'core webhook subscriptions',
    routes: [
      'GET /v1/webhook-subscriptions',
      'POST /v1/webhook-subscriptions',
      'GET /v1/webhook-subscriptions/{id}',
      'PATCH /v1/webhook-subscriptions/{id}',
      'DELETE /v1/webhook-subscriptions/{id}',
      'POST /v1/webhook-subscriptions/{id}/rotate-secret',
      'GET /v1/webhook-subscriptions/{id}/deliveries',
      'POST /v1/webhook-subscriptions/{id}/test',
    ],
  },
  {
    file: 'connections',
    surface: 'core integrations',
    routes: [
      'GET /v1/integrations',
      'POST /v1/integrations/{name}/connect',
      'DELETE /v1/integrations/{name}',
      'POST /v1/integrations/{name}/events/{connection_id}',
      'POST /v1/integrations/{name}/sync',
    ],
  },
  {
    file: 'ticketing',
    surface: 'core ticketing webhooks',
    routes: [
      'POST /v1/integrations/zendesk/webhooks/{connection_id}',
      'POST /v1/integrations/intercom/webhooks/{connection_id}',
      'POST /v1/integrations/intercom/webhooks',
      'GET /v1/integrations/intercom/webhooks',
    ],
  },
  {
    file: 'connections',
    surface: 'core browser pages',
    routes: ['GET /v1/integrations/{name}/callback', 'POST /v1/oauth/authorize'],
  },
  {
    file: 'records',
    surface: 'core customer records',
    routes: [
      'GET /v1/customers/trash',
      'GET /v1/customers/{id}',
      'DELETE /v1/customers/{id}',
      'POST /v1/customers/{id}/restore',
      'GET /v1/customers/{id}/contacts',
      'GET /v1/jobs/{id}',
      'GET /v1/erasures',
      'GET /v1/erasures/{customer_id}',
    ],
  },
  {
    file: 'records',
    surface: 'core workspace administration',
    routes: [
      'GET /v1/users',
      'GET /v1/users/me',
      'POST /v1/invites/accept',
      'GET /v1/api-keys',
      'DELETE /v1/api-keys/{id}',
      'GET /v1/settings/ingestion-key',
      'POST /v1/settings/ingestion-key',
      'POST /v1/oauth/apps',
      'GET /v1/oauth/apps',
      'GET /v1/openapi.json',
    ],
  },
];

/** The routes of a document's `paths`, as `METHOD /path`. */
export function documentRoutes(doc: { paths: Record<string, Record<string, unknown>> }): string[] {
  const methods = ['get', 'post', 'put', 'patch', 'delete'];
  return Object.entries(doc.paths).flatMap(([p, ops]) =>
    Object.keys(ops)
      .filter((m) => methods.includes(m))
      .map((m) => `${m.toUpperCase()} ${p}`),
  );
}

/** What is wrong with the table against a document's routes: routes without a target, targets without a route, twins. */
export function coverageGaps(routes: string[]): { missing: string[]; stale: string[]; twice: string[] } {
  const listed = TARGETS.flatMap((t) => t.routes);
  const inDoc = new Set(routes);
  return {
    missing: routes.filter((r) => !listed.includes(r)).sort(),
    stale: listed.filter((r) => !inDoc.has(r)).sort(),
    twice: listed.filter((r, i) => listed.indexOf(r) !== i),
  };
}
