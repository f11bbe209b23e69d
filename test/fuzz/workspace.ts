import fc from 'fast-check';
import { client } from '../core-api/_helpers.js';
import { bootstrap, db, waitFor, type Workspace } from '../helpers/stack.js';
import { SHRINK } from './arbitraries.js';

/**
 * A workspace with one of everything the core API keeps, made through the API itself (alerts,
 * which only the processors raise, are inserted): the fuzz cases name these ids so that handlers
 * are reached past "not found". A second workspace made the same way gives ids that the first
 * one's credentials must never reach. Resources that a case may delete have victims of their own,
 * so the ids the other routes use stay alive for the whole run.
 */
export interface Fixtures {
  ws: Workspace;
  customer: string;
  victimCustomer: string;
  /** A customer deleted for good: its erasure record is what remains. */
  erasedCustomer: string;
  metric: string;
  victimMetric: string;
  proposal: string;
  victimProposal: string;
  widget: string;
  victimWidget: string;
  objective: string;
  victimObjective: string;
  segment: string;
  victimSegment: string;
  playbook: string;
  victimPlaybook: string;
  task: string;
  victimTask: string;
  subscription: string;
  victimSubscription: string;
  alerts: string[];
  job: string;
  victimKey: string;
}

type Client = ReturnType<typeof client>;

async function made(c: Client, path: string, body: unknown, key = 'id'): Promise<string> {
  const r = await c.post(path, body);
  if (r.status !== 201 && r.status !== 202) throw new Error(`fixture ${path}: ${r.status} ${r.text.slice(0, 500)}`);
  return r.body[key] as string;
}

export const METRIC = {
  name: 'Reports exported',
  source_event: 'report_exported',
  calculation: 'count',
  filter: [{ field: 'properties.format', op: 'in', value: ['pdf', 'csv'] }],
  window: { type: 'rolling', days: 30 },
  grain: 'customer',
  unit: 'reports',
};
export const SEGMENT = {
  name: 'Enterprise',
  description: 'Large accounts',
  rules: [
    { field: 'arr', op: 'gte', value: 100000 },
    { field: 'custom_fields.tier', op: 'in', value: ['gold', 'platinum'] },
  ],
  match: 'all',
};
export const PLAYBOOK = {
  name: 'At-risk enterprise accounts',
  trigger: { type: 'condition', expression: 'health_score < 40 and segment == "Enterprise"' },
  actions: [
    { type: 'create_task', title: 'Call the account', assignee: 'owner', due_in_days: 3 },
    { type: 'notify', channel: 'slack', target: '#cs-alerts', message: 'An enterprise account is at risk' },
  ],
};
export const WIDGET = { name: 'Exports', event_name: 'report_exported', aggregation: 'trend_pct', period: '30d' };

/** A new workspace and its fixtures. `hookUrl`: where its webhook subscriptions point. */
export async function fixtures(apiUrl: string, hookUrl = 'http://127.0.0.1:9/hooks'): Promise<Fixtures> {
  const ws = await bootstrap();
  const c = client(apiUrl, ws.api_key);
  // The processors write the catalog from the events they see: the metrics need their events in it.
  await db()`INSERT INTO event_catalog (tenant_id, event_name)
    SELECT ${ws.tenant_id}, unnest(ARRAY['report_exported', 'login', 'seat_removed', 'feature_used'])`;
  // Started first: the job runner writes its customer in the background while the rest is made.
  const job = await made(
    c,
    '/v1/customers/bulk-import',
    { customers: [{ name: 'Bulk', external_id: 'bulk-0', external_source: 'stripe' }] },
    'job_id',
  );
  const customer = await made(c, '/v1/customers', {
    name: 'Fixture',
    email_domain: 'acme.com',
    arr: 120000,
    status: 'active',
    renewal_date: new Date(Date.now() + 40 * 86_400_000).toISOString().slice(0, 10),
    custom_fields: { tier: 'gold', forecast_category: 'commit' },
    external_id: 'fixture',
  });
  const victimCustomer = await made(c, '/v1/customers', { name: 'Victim', external_id: 'victim' });
  const erasedCustomer = await made(c, '/v1/customers', { name: 'Erased', external_id: 'erased' });
  const erased = await c.del(`/v1/customers/${erasedCustomer}?hard=true`);
  if (erased.status !== 204) throw new Error(`DELETE ?hard=true: ${erased.status} ${erased.text}`);
  await made(c, `/v1/customers/${customer}/contacts`, { name: 'Jo', email: 'jo@acme.com', is_champion: true });
  const metric = await made(c, '/v1/metrics', METRIC);
  const victimMetric = await made(c, '/v1/metrics', { ...METRIC, name: 'Victim metric' });
  const description = 'Total order value per customer over the last 7 days where plan is pro';
  const proposal = await made(c, '/v1/metrics/proposals', { description });
  const victimProposal = await made(c, '/v1/metrics/proposals', { description: 'Logins per customer this month' });
  const widget = await made(c, '/v1/usage-widgets', WIDGET);
  const victimWidget = await made(c, '/v1/usage-widgets', { ...WIDGET, name: 'Victim widget' });
  const objective = await made(c, `/v1/customers/${customer}/objectives`, {
    name: 'Export 50 reports a month',
    metric_id: metric,
    target_value: 50,
  });
  const victimObjective = await made(c, `/v1/customers/${customer}/objectives`, {
    name: 'Victim objective',
    metric_id: metric,
    target_value: 5,
  });
  const segment = await made(c, '/v1/segments', SEGMENT);
  const victimSegment = await made(c, '/v1/segments', { ...SEGMENT, name: 'Victim segment' });
  const playbook = await made(c, '/v1/playbooks', PLAYBOOK);
  const victimPlaybook = await made(c, '/v1/playbooks', { ...PLAYBOOK, name: 'Victim playbook' });
  const due = new Date(Date.now() + 10 * 86_400_000).toISOString().slice(0, 10);
  const task = await made(c, '/v1/tasks', { customer_id: customer, title: 'Kick-off call', due_date: due });
  const victimTask = await made(c, '/v1/tasks', { customer_id: customer, title: 'Renewal call', due_date: due });
  const hook = { url: hookUrl, events: ['health.changed', 'task.created'] };
  const subscription = await made(c, '/v1/webhook-subscriptions', hook);
  const victimSubscription = await made(c, '/v1/webhook-subscriptions', hook);
  const victimKey = await made(c, '/v1/api-keys', { name: 'victim', scopes: ['customers:read'] });
  // Its customer is written in the background: done before the ledgers take their first look.
  await waitFor('the bulk import job', async () =>
    ['succeeded', 'failed'].includes((await c.get(`/v1/jobs/${job}`)).body?.status),
  );
  const alerts = (
    await db()<Array<{ id: string }>>`
      INSERT INTO alerts (tenant_id, type, status, severity, customer_id, summary, details)
      SELECT ${ws.tenant_id}, 'usage_drop', s, 'medium', c, 'Usage dropped', '{}'
      FROM unnest(ARRAY['open', 'acknowledged', 'resolved'], ARRAY[${customer}, ${victimCustomer}, ${customer}]::uuid[])
        AS a(s, c)
      RETURNING id::text`
  ).map((r) => r.id);
  return {
    ws,
    customer,
    victimCustomer,
    erasedCustomer,
    metric,
    victimMetric,
    proposal,
    victimProposal,
    widget,
    victimWidget,
    objective,
    victimObjective,
    segment,
    victimSegment,
    playbook,
    victimPlaybook,
    task,
    victimTask,
    subscription,
    victimSubscription,
    alerts,
    job,
    victimKey,
  };
}

/** The workspace's own credential mostly; now and then none, a wrong one or two. */
export function bearer(ws: Workspace): fc.Arbitrary<Array<[string, string]>> {
  return fc.oneof(
    SHRINK,
    { weight: 20, arbitrary: fc.constant<Array<[string, string]>>([['Authorization', `Bearer ${ws.api_key}`]]) },
    {
      weight: 2,
      arbitrary: fc.constantFrom<Array<[string, string]>>(
        [],
        [['Authorization', 'Bearer ']],
        [['Authorization', `Bearer ${ws.api_key}x`]],
        [['Authorization', `Basic ${ws.api_key}`]],
        [['Authorization', 'Bearer eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.AAAA']],
        [['Authorization', `Bearer ${'x'.repeat(10_000)}`]],
        [
          ['Authorization', `Bearer ${ws.api_key}`],
          ['Authorization', 'Bearer bogus'],
        ],
      ),
    },
  );
}

/** The fixtures' ids a request of the other workspace's credential must never reach. */
/** The customers table without what the health scorer writes. */
export const CUSTOMER_ROWS =
  'customers (id, name, email_domain, arr, owner_email, status, renewal_date, custom_fields, external_id, ' +
  'external_source, updated_at, deleted_at)';

export const idsOf = (f: Fixtures): string[] =>
  Object.values(f).flatMap((v) => (typeof v === 'string' ? [v] : Array.isArray(v) ? v : []));
