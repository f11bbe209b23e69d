import fc from 'fast-check';
import t from '#tap';
import { closeDb } from '../helpers/stack.js';
import { limitText, oddUuid, queryValue, seeded, seededFrom } from './arbitraries.js';
import { fuzzRoutes, type OpenApiDoc, type RouteSeed } from './route-surface.js';
import { apiTier, QUICK_RUNS_SEEDED, settings, tenantLedger } from './support.js';
import { bearer, CUSTOMER_ROWS, fixtures, idsOf } from './workspace.js';

// The core API's customer reads, deletion and restore, jobs, and the workspace's administration
// (users, invites, API keys, the ingestion key, OAuth apps, the OpenAPI document), from seeds.
const o = settings(process.env, QUICK_RUNS_SEEDED);

t.teardown(closeDb);
const api = await apiTier(t);
const doc = (await (await fetch(`${api.url}/v1/openapi.json`)).json()) as OpenApiDoc;
const [own, other] = await Promise.all([fixtures(api.url), fixtures(api.url)]);
const id = (mine: string[], theirs: string[]) => ({ id: { own: mine, foreign: theirs } });
const page = { limit: limitText(200), cursor: fc.oneof(fc.base64String({ maxLength: 40 }), oddUuid) };

const seeds: Record<string, RouteSeed> = {
  'GET /v1/customers/trash': { query: page },
  'GET /v1/customers/{id}': { params: id([own.customer, own.victimCustomer], [other.customer]) },
  // Soft deletion only: a permanent one would leave the restore nothing to work on for the rest of the run.
  'DELETE /v1/customers/{id}': {
    params: id([own.victimCustomer], [other.victimCustomer]),
    query: { hard: queryValue(['false'], fc.constantFrom('1', 'yes', 'TRUE', '')) },
  },
  'POST /v1/customers/{id}/restore': { params: id([own.victimCustomer], [other.victimCustomer]) },
  'GET /v1/customers/{id}/contacts': { params: id([own.customer], [other.customer]), query: page },
  'GET /v1/jobs/{id}': { params: id([own.job], [other.job]) },
  'GET /v1/erasures': { query: { ...page, status: queryValue(['queued', 'running', 'completed']) } },
  'GET /v1/erasures/{customer_id}': {
    params: { customer_id: { own: [own.erasedCustomer], foreign: [other.erasedCustomer] } },
  },
  'GET /v1/users': { query: { ...page, role: queryValue(['admin', 'csm', 'viewer']) } },
  'GET /v1/users/me': {},
  'POST /v1/invites/accept': {
    body: seededFrom(
      { token: 'inv_0123456789abcdef', password: 'correct horse battery staple' },
      { token: `inv_${'a'.repeat(43)}`, password: 'short' },
    ),
  },
  'GET /v1/api-keys': {},
  'DELETE /v1/api-keys/{id}': { params: id([own.victimKey], [other.victimKey]) },
  'GET /v1/settings/ingestion-key': {},
  'POST /v1/settings/ingestion-key': {},
  'POST /v1/oauth/apps': {
    body: seeded({
      name: 'Slack bot',
      redirect_uris: ['https://bot.example.com/oauth/callback', 'http://127.0.0.1:8080/cb'],
      scopes: ['customers:read', 'tasks:write'],
    }),
  },
  'GET /v1/oauth/apps': {},
  'GET /v1/openapi.json': {},
};

const ledger = tenantLedger(own.ws.tenant_id, [
  CUSTOMER_ROWS,
  'contacts',
  'jobs',
  'users',
  'user_invites',
  'ingestion_keys',
  'oauth_apps',
]);
const ctx = { doc, port: api.port, auth: bearer(own.ws), tiers: [api], ledger, foreignIds: idsOf(other) };

fuzzRoutes(t, 'records', seeds, ctx, o);
