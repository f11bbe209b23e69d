import fc from 'fast-check';
import t from '#tap';
import { closeDb } from '../helpers/stack.js';
import {
  dateAround,
  dateTimeAround,
  limitText,
  oddDate,
  oddDateTime,
  oddUuid,
  queryValue,
  seeded,
  seededFrom,
  varied,
} from './arbitraries.js';
import { fuzzRoutes, type OpenApiDoc, type RouteSeed } from './route-surface.js';
import { apiTier, QUICK_RUNS_SEEDED, settings, tenantLedger } from './support.js';
import { bearer, CUSTOMER_ROWS, fixtures, idsOf, METRIC, WIDGET } from './workspace.js';

// The core API's health, metrics library, proposals, usage widgets and objectives, from seeds.
const o = settings(process.env, QUICK_RUNS_SEEDED);

t.teardown(closeDb);
const api = await apiTier(t);
const doc = (await (await fetch(`${api.url}/v1/openapi.json`)).json()) as OpenApiDoc;
const [own, other] = await Promise.all([fixtures(api.url), fixtures(api.url)]);
const id = (mine: string[], theirs: string[]) => ({ own: mine, foreign: theirs });
const customer = { id: id([own.customer], [other.customer]) };
const day = (from: number, to: number) => queryValue([], fc.oneof(dateAround(from, to), oddDate));
const instant = (from: number, to: number) => queryValue([], fc.oneof(dateTimeAround(from, to), oddDateTime));
const cursor = fc.oneof(fc.base64String({ maxLength: 40 }), oddUuid);
const customerQuery = queryValue([own.customer], fc.oneof(oddUuid, fc.constant(other.customer)));

const definition = {
  source_event: 'report_exported',
  calculation: 'sum',
  target_property: 'pages',
  window: { type: 'calendar', unit: 'month' },
  grain: 'customer',
};
const seeds: Record<string, RouteSeed> = {
  'GET /v1/customers/{id}/health': { params: customer },
  'GET /v1/customers/{id}/health/history': {
    params: customer,
    query: { from: day(-400, 0), to: day(-30, 2), granularity: queryValue(['daily', 'weekly']) },
  },
  'POST /v1/customers/{id}/health/recalculate': { params: customer },
  'GET /v1/health/model': {},
  'PATCH /v1/health/model': {
    body: seeded({
      weights: { usage_frequency: 0.2, breadth: 0.2, active_users: 0.2, key_events: 0.2, payment_health: 0.2 },
      thresholds: { at_risk: 45, healthy: 70 },
      key_events: { positive: ['report_exported'], negative: ['seat_removed'] },
    }),
  },
  'GET /v1/event-catalog': { query: { limit: limitText(200), cursor } },
  'GET /v1/metrics': {
    query: { limit: limitText(200), cursor, include_deleted: queryValue(['true', 'false'], fc.constant('1')) },
  },
  'POST /v1/metrics': {
    body: varied(
      seededFrom(
        METRIC,
        { ...definition, name: 'Pages', unit: 'pages' },
        {
          name: 'Active days',
          source_event: 'login',
          calculation: 'count_distinct',
          target_property: 'user',
          filter: [
            { field: 'properties.plan', op: 'eq', value: 'pro' },
            { field: 'properties.seats', op: 'gt', value: 5 },
          ],
          window: { type: 'rolling', days: 7 },
          grain: 'customer',
        },
      ),
    ),
  },
  'GET /v1/metrics/{id}': { params: { id: id([own.metric], [other.metric]) } },
  'PATCH /v1/metrics/{id}': {
    params: { id: id([own.metric], [other.metric]) },
    body: seededFrom(
      { name: 'Reports exported (30 days)', unit: 'reports' },
      { window: { type: 'rolling', days: 90 } },
    ),
  },
  'DELETE /v1/metrics/{id}': { params: { id: id([own.victimMetric], [other.victimMetric]) } },
  'POST /v1/metrics/test': {
    body: seededFrom(
      { definition, sample_size: 5 },
      { definition: { ...METRIC, name: 'Test', unit: null }, sample_size: 1 },
      { definition: { ...definition, filter: [{ field: 'properties.amount', op: 'gte', value: 1e-7 }] } },
    ),
  },
  'GET /v1/metrics/{id}/values': {
    params: { id: id([own.metric], [other.metric]) },
    query: { customer_id: customerQuery, from: instant(-60, 0), to: instant(-1, 1), limit: limitText(10_000) },
  },
  'POST /v1/metrics/{id}/materialize': { params: { id: id([own.metric], [other.metric]) } },
  'POST /v1/metrics/proposals': {
    body: seededFrom(
      { description: 'Total order value per customer over the last 7 days where plan is pro' },
      { description: 'Average pages of exported reports per customer this quarter' },
      { description: 'logins' },
    ),
  },
  'GET /v1/metrics/proposals/{id}': { params: { id: id([own.proposal, own.victimProposal], [other.proposal]) } },
  'POST /v1/metrics/proposals/{id}/accept': {
    params: { id: id([own.proposal], [other.proposal]) },
    body: varied(seeded({ name: 'Order value (7 days)', unit: 'USD' })),
  },
  'POST /v1/metrics/proposals/{id}/reject': { params: { id: id([own.victimProposal], [other.victimProposal]) } },
  'GET /v1/usage-widgets': {},
  'POST /v1/usage-widgets': {
    body: varied(seededFrom(WIDGET, { name: 'Logins', event_name: 'login', aggregation: 'count', period: '7d' })),
  },
  'DELETE /v1/usage-widgets/{id}': { params: { id: id([own.victimWidget], [other.victimWidget]) } },
  'GET /v1/usage-widgets/{id}/value': {
    params: { id: id([own.widget], [other.widget]) },
    query: { customer_id: customerQuery },
  },
  'POST /v1/customers/{id}/objectives': {
    params: customer,
    body: seededFrom(
      { name: 'Export 50 reports a month', metric_id: own.metric, target_value: 50 },
      { name: 'Theirs', metric_id: other.metric, target_value: 1 },
    ),
  },
  'GET /v1/customers/{id}/objectives': { params: customer },
  'DELETE /v1/objectives/{id}': { params: { id: id([own.victimObjective], [other.victimObjective]) } },
};

const ledger = tenantLedger(own.ws.tenant_id, [
  CUSTOMER_ROWS,
  'health_models',
  'metrics',
  'metric_proposals',
  'usage_widgets',
  'objectives',
]);
const ctx = { doc, port: api.port, auth: bearer(own.ws), tiers: [api], ledger, foreignIds: idsOf(other) };

fuzzRoutes(t, 'library', seeds, ctx, o);
