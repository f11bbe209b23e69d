import { Problem } from '../schemas/core/common.js';
import { SCOPE_DESCRIPTIONS } from '../schemas/core/scopes.js';
import { buildOpenApi, OpenApiDocument } from '../schemas/openapi.js';
import { analyticsRoutes } from './analytics/routes.js';
import { apiKeyRoutes } from './api-keys/routes.js';
import type { AccessTokens } from './auth/tokens.js';
import { customerRoutes } from './customers/routes.js';
import { erasureRoutes } from './erasures/routes.js';
import type { Deps } from './deps.js';
import type { HealthHistory } from './health/history.js';
import type { Recalculator } from './health/recalculate.js';
import { healthRoutes } from './health/routes.js';
import { json } from './http/context.js';
import { ERRORS } from '../lib/problem.js';
import type { Route } from './http/router.js';
import type { PlanLimits } from './http/limits.js';
import { jobRoutes } from './jobs/routes.js';
import type { ClickHouseReader } from './clickhouse.js';
import type { MaterializeClient } from './metrics/materialize.js';
import { metricsRoutes } from './metrics/routes.js';
import type { JobRunner } from './jobs/runner.js';
import { oauthRoutes } from './oauth/routes.js';
import type { PlaybookRunClient } from './playbooks/run-client.js';
import { playbookRoutes } from './playbooks/routes.js';
import { segmentRoutes } from './segments/routes.js';
import type { Providers } from '../lib/integrations/providers.js';
import type { DataCipher } from '../lib/credentials/data-cipher.js';
import type { UrlPolicy } from '../lib/webhooks/address.js';
import { integrationRoutes } from './integrations/routes.js';
import { alertRoutes } from './alerts/routes.js';
import { taskRoutes } from './tasks/routes.js';
import { webhookRoutes } from './webhooks/routes.js';
import { INGEST_ROUTES } from '../schemas/ingest-routes.js';
import type { SharedRateLimiter } from '../lib/rate-limit.js';
import { userRoutes } from './users/routes.js';

export interface AppDeps extends Deps {
  tokens: AccessTokens;
  runner: JobRunner;
  limits: PlanLimits;
  limiter: SharedRateLimiter;
  history: HealthHistory;
  recalculator: Recalculator;
  clickhouse: ClickHouseReader;
  metricsQueryTimeoutMs: number;
  materializeClient: MaterializeClient;
  analyticsCacheTtlMs: number;
  playbookRunClient: PlaybookRunClient;
  webhookPolicy: UrlPolicy;
  providers: Providers;
  dataCipher?: DataCipher;
}

const TAGS = [
  {
    name: 'Customers',
    description: 'Customers, contacts, bulk import and jobs; erasure records of customers removed for good.',
  },
  {
    name: 'Health',
    description:
      'Health scores: the current score with its breakdown, the history (two years, ClickHouse), on-demand ' +
      'recalculation and the workspace health model. Dimensions (each 0–100 from a raw value): usage_frequency, ' +
      'breadth, active_users, key_events, payment_health; see the operations for the curves.',
  },
  {
    name: 'Metrics',
    description:
      'The metrics library: the workspace event catalog, metric definitions (admin writes, everyone with ' +
      'metrics:read reads), the test query, proposals from a plain-English description, and the usage widgets. ' +
      'Window semantics, the compiler and the parser vocabulary: docs/metrics.md.',
  },
  {
    name: 'Segments',
    description:
      'Named sets of customers defined by rules over customer fields, evaluated in SQL whenever they are read: ' +
      'the customers list filters by them, the customer detail names them, playbook conditions test them.',
  },
  {
    name: 'Playbooks',
    description:
      'Playbooks: a trigger (a condition over health, segments, account fields and metrics; a metric crossing a ' +
      'threshold; events) plus actions (create a task, notify a channel), evaluated by the processors after ' +
      'health runs, materializations and events, and on request. Each fires once per customer when it starts ' +
      'matching and re-arms when it stops; every evaluation is recorded as a run. docs/playbooks.md.',
  },
  {
    name: 'Tasks',
    description:
      'Tasks of customers, created by playbooks or by hand: pending ↔ in_progress, then skipped or completed ' +
      '(with an outcome), both final; task_created and task_completed events. docs/playbooks.md.',
  },
  {
    name: 'Analytics',
    description:
      'Portfolio analytics over the whole workspace: ARR and health, the renewal pipeline, retention cohorts. ' +
      'SQL aggregates, cached per workspace and query for at most 30 s. Definitions: docs/analytics.md.',
  },
  {
    name: 'Webhooks',
    description:
      'Outbound webhooks (Standard Webhooks): subscriptions to event kinds, signed deliveries retried with ' +
      'backoff, the log of every attempt. Payloads, signature check and retry schedule: docs/webhooks.md.',
  },
  {
    name: 'Integrations',
    description:
      'Email, calendar, chat and ticketing providers connected through OAuth 2.0 (code + PKCE): their activity ' +
      'becomes events, and playbooks notify through them. Connectors and configuration: docs/integrations.md.',
  },
  { name: 'Users', description: 'Users, roles and invites.' },
  { name: 'API keys', description: 'Server-to-server credentials (admin).' },
  { name: 'OAuth', description: 'OAuth 2.0 Authorization Code + PKCE: apps, the sign-in page and the token endpoint.' },
  { name: 'Settings', description: 'Workspace settings (admin): the ingestion key.' },
  {
    name: 'Ingestion',
    description:
      'Usage and billing events (served by the ingest tier): surface A with X-API-Key, surface B with a bearer ' +
      'credential.',
  },
  { name: 'Meta', description: 'The interface description.' },
];

/** Every route of the core API, in one table the server and the OpenAPI document both read. */
export function buildRoutes(d: AppDeps): Route[] {
  const routes: Route[] = [
    ...customerRoutes(d),
    ...erasureRoutes(d),
    ...healthRoutes(d),
    ...metricsRoutes(d),
    ...segmentRoutes(d),
    ...playbookRoutes(d),
    ...taskRoutes(d),
    ...webhookRoutes(d),
    ...integrationRoutes(d),
    ...alertRoutes(d),
    ...analyticsRoutes(d),
    ...jobRoutes(d),
    ...userRoutes(d),
    ...apiKeyRoutes(d),
    ...oauthRoutes(d),
  ];
  let doc: string | undefined;
  const openapi: Route = {
    tag: 'Meta',
    auth: 'none',
    method: 'GET',
    path: '/v1/openapi.json',
    summary: 'This OpenAPI 3.1 document',
    responses: { 200: { description: 'The OpenAPI document.', schema: OpenApiDocument } },
    handler: async () => {
      doc ??= JSON.stringify(openApiDocument(routes, d));
      return {
        status: 200,
        text: doc,
        contentType: 'application/json',
        headers: [['Cache-Control', 'public, max-age=300']],
      };
    },
  };
  routes.push(openapi);
  return routes;
}

export function openApiDocument(routes: Route[], d: Pick<AppDeps, 'baseUrl' | 'limits'>): Record<string, unknown> {
  const description = [
    'Core API of the customer-success platform. Every path starts with `/v1/`; every error is ' +
      '`application/problem+json` (RFC 7807) with `type`, `title`, `status`, `detail`, `instance`, `trace_id` and, ' +
      'for validation errors, `errors[]` (`field`, `code`, `message`).',
    `Rate limits per workspace (default plan figures): reads ${d.limits.reads_per_min}/min, ` +
      `writes ${d.limits.writes_per_min}/min, bulk imports ${d.limits.bulk_imports_per_hour}/hour; ` +
      'every authenticated response carries X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset ' +
      '(unix seconds); 429 carries Retry-After.',
    'Lists use cursor pagination: pass `next_cursor` as `cursor` while `has_more` is true. A resource of another ' +
      'workspace answers 404. A malformed id in a path answers 404.',
  ].join('\n\n');
  return buildOpenApi([...routes, ...Object.values(INGEST_ROUTES)], {
    title: 'Customer Success Platform — Core API',
    version: '1.0.0',
    description,
    baseUrl: d.baseUrl,
    scopes: SCOPE_DESCRIPTIONS,
    errorCodes: ERRORS,
    problem: Problem,
    tags: TAGS,
  });
}

export { json };
