import fc from 'fast-check';
import t from '#tap';
import { closeDb } from '../helpers/stack.js';
import { dateAround, limitText, oddDate, oddUuid, queryValue, seeded, seededFrom, varied } from './arbitraries.js';
import { fuzzRoutes, type OpenApiDoc, type RouteSeed } from './route-surface.js';
import { apiTier, QUICK_RUNS_SEEDED, settings, tenantLedger } from './support.js';
import { bearer, CUSTOMER_ROWS, fixtures, idsOf, PLAYBOOK, SEGMENT } from './workspace.js';

// The core API's segments, playbooks, tasks, portfolio analytics and alerts, from seeds.
const o = settings(process.env, QUICK_RUNS_SEEDED);

t.teardown(closeDb);
const api = await apiTier(t);
const doc = (await (await fetch(`${api.url}/v1/openapi.json`)).json()) as OpenApiDoc;
const [own, other] = await Promise.all([fixtures(api.url), fixtures(api.url)]);
const id = (mine: string[], theirs: string[]) => ({ own: mine, foreign: theirs });
const cursor = fc.oneof(fc.base64String({ maxLength: 40 }), oddUuid);
const page = (max: number) => ({ limit: limitText(max), cursor });
const uuidQuery = (mine: string[], theirs: string[]) => queryValue(mine, fc.oneof(oddUuid, fc.constantFrom(...theirs)));
const due = dateAround(0, 60);
const month = (shift: number) => new Date(Date.UTC(2026, 0 + shift, 1)).toISOString().slice(0, 7);

const seeds: Record<string, RouteSeed> = {
  'GET /v1/segments': { query: page(200) },
  'POST /v1/segments': {
    body: varied(
      seededFrom(SEGMENT, {
        name: 'Renewing',
        rules: [
          { field: 'renewal_date', op: 'lte', value: '2027-01-31' },
          { field: 'status', op: 'in', value: ['active', 'trial'] },
          { field: 'email_domain', op: 'eq', value: 'acme.com' },
        ],
        match: 'any',
      }),
    ),
  },
  'GET /v1/segments/{id}': { params: { id: id([own.segment], [other.segment]) } },
  'PATCH /v1/segments/{id}': {
    params: { id: id([own.segment], [other.segment]) },
    body: seededFrom({ rules: [{ field: 'arr', op: 'gte', value: 250000 }] }, { description: null, match: 'any' }),
  },
  'DELETE /v1/segments/{id}': { params: { id: id([own.victimSegment], [other.victimSegment]) } },
  'GET /v1/playbooks': { query: page(200) },
  'POST /v1/playbooks': {
    body: seededFrom(
      PLAYBOOK,
      {
        name: 'Metric drop',
        trigger: { type: 'metric_threshold', metric_id: own.metric, operator: 'lt', value: 5 },
        actions: [{ type: 'create_task', title: 'Check usage', assignee: own.ws.admin_email }],
      },
      {
        name: 'Theirs',
        trigger: { type: 'metric_threshold', metric_id: other.metric, operator: 'lt', value: 5 },
        actions: [{ type: 'create_task', title: 'x', assignee: 'owner' }],
      },
      {
        name: 'Exports',
        trigger: { type: 'event', event_name: 'report_exported', count: 3, within_days: 7 },
        actions: [{ type: 'notify', channel: 'email', target: 'cs@yourco.com', message: 'Busy account' }],
        enabled: false,
      },
    ),
  },
  'GET /v1/playbooks/{id}': { params: { id: id([own.playbook], [other.playbook]) } },
  'PATCH /v1/playbooks/{id}': {
    params: { id: id([own.playbook], [other.playbook]) },
    body: seededFrom(
      { enabled: false },
      { trigger: { type: 'condition', expression: 'arr > 1000 and status == "active"' } },
    ),
  },
  'DELETE /v1/playbooks/{id}': { params: { id: id([own.victimPlaybook], [other.victimPlaybook]) } },
  'GET /v1/playbooks/{id}/runs': { params: { id: id([own.playbook], [other.playbook]) }, query: page(100) },
  'POST /v1/playbooks/{id}/run': {
    params: { id: id([own.playbook], [other.playbook]) },
    body: seeded({ dry_run: true }),
  },
  'GET /v1/tasks': {
    query: {
      owner_id: uuidQuery([], [other.customer]),
      assignee_id: uuidQuery([], [other.customer]),
      customer_id: uuidQuery([own.customer], [other.customer]),
      playbook_id: uuidQuery([own.playbook], [other.playbook]),
      status: queryValue(['pending', 'in_progress,completed', 'skipped'], fc.constantFrom('pending,', ',', 'PENDING')),
      due_before: queryValue([], fc.oneof(due, oddDate)),
      due_after: queryValue([], fc.oneof(dateAround(-30, 0), oddDate)),
      ...page(200),
    },
  },
  'POST /v1/tasks': {
    body: seededFrom(
      { customer_id: own.customer, title: 'Kick-off call', due_date: '2026-12-01' },
      { customer_id: own.customer, title: 'QBR', description: 'Prepare', assignee_id: null },
      { customer_id: other.customer, title: 'Theirs' },
    ),
  },
  'GET /v1/tasks/{id}': { params: { id: id([own.task, own.victimTask], [other.task]) } },
  'PATCH /v1/tasks/{id}': {
    params: { id: id([own.task], [other.task]) },
    body: seededFrom({ status: 'in_progress' }, { status: 'pending', title: 'Renamed', due_date: null }),
  },
  'POST /v1/tasks/{id}/complete': {
    params: { id: id([own.victimTask], [other.victimTask]) },
    body: seeded({ outcome: 'successful', notes: 'Renewal confirmed' }),
  },
  'GET /v1/analytics/portfolio': {},
  'GET /v1/analytics/renewals': {
    query: {
      from: queryValue([month(0), month(-3)], fc.constantFrom('2026-13', '2026-1', '9999-12', '0000-01', '2026-01-31')),
      to: queryValue([month(6), month(12)], fc.constantFrom('9999-12', '2026-00', '10000-01', '2025-12')),
      forecast_category: queryValue(['commit', 'best_case,pipeline', 'omitted'], fc.constantFrom('commit,', ',')),
    },
  },
  'GET /v1/analytics/cohorts': {
    query: {
      cohort_period: queryValue(['month', 'quarter']),
      months_out: queryValue(['1', '12', '36'], fc.constantFrom('0', '37', '-1', '1.5', '')),
    },
  },
  'GET /v1/alerts': {
    query: {
      type: queryValue(['usage_drop', 'api_key_usage_spike']),
      status: queryValue(['open', 'acknowledged,resolved'], fc.constantFrom('open,', 'OPEN')),
      customer_id: uuidQuery([own.customer], [other.customer]),
      ...page(200),
    },
  },
  'PATCH /v1/alerts/{id}': {
    params: { id: id(own.alerts, other.alerts) },
    body: seededFrom({ status: 'acknowledged' }, { status: 'resolved' }),
  },
};

// Alerts are left out: the stack's processors may raise one for this workspace at any time.
const ledger = tenantLedger(own.ws.tenant_id, ['segments', 'playbooks', 'tasks', CUSTOMER_ROWS]);
const ctx = { doc, port: api.port, auth: bearer(own.ws), tiers: [api], ledger, foreignIds: idsOf(other) };

fuzzRoutes(t, 'workflow', seeds, ctx, o);
