import { type App, authorize, client, exchange, registerApp } from '../core-api/_helpers.js';
import { authorizeInBrowser } from '../helpers/fake-provider.js';
import type { NewWorkspace } from '../../infra/workspace.js';
import { waitFor } from '../helpers/stack.js';

/**
 * What a workspace holds, written through the public APIs of the version under test (the previous
 * release, before the upgrade): the bodies are those that release accepts, and this file keeps
 * what was written (ids, credentials shown once, counts accepted) for the checks after the upgrade.
 */

export interface Site {
  api: string;
  ingest: string;
}

export interface Written {
  ws: NewWorkspace;
  /** Every customer by its external id (`up-001`…). */
  customers: Record<string, string>;
  /** The one a permanent delete removed before the upgrade, and the one the new version erases. */
  erasedBefore: string;
  eraseAfter: string;
  /** A scoped API key made through the API (its plain secret). */
  scopedKey: { id: string; key: string };
  oauth: { app: App; access: string; refresh: string };
  webhook: { id: string; secret: string; url: string };
  metricIds: string[];
  widgetIds: string[];
  segmentIds: string[];
  playbookIds: string[];
  /** Tasks the playbooks' first runs create: one per customer matching each condition. */
  firings: number;
  backfillJob: string;
  /** Surface B's keyed events as sent (sending them again must add nothing). */
  keyed: Array<Record<string, unknown>>;
  /** Events the service answered as accepted, per kind (the count a store must hold). */
  accepted: { a: number; b: number; backfill: number; billing: number };
  /** Every secret shown once: none may be stored in clear. */
  secrets: string[];
}

export interface Res {
  status: number;
  body: any;
  text: string;
}

const DAY = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();

/** A request that must succeed: anything else fails the write with the answer. */
export async function must(what: string, p: Promise<Res>, ...ok: number[]): Promise<any> {
  const r = await p;
  if (!(ok.length ? ok : [200, 201]).includes(r.status)) throw new Error(`${what}: ${r.status} ${r.text}`);
  return r.body;
}

export async function ingestA(site: Site, key: string, path: string, events: unknown[]): Promise<Res> {
  const res = await fetch(`${site.ingest}${path}`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ events }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
}

export async function ingestB(site: Site, token: string, path: string, events: unknown[]): Promise<Res> {
  const res = await fetch(`${site.ingest}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ events }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
}

/** Surface-A usage events over the customers: 4 requests of 100, a few names and users. */
export function usageEvents(externalIds: string[], n: number, tag: string): Array<Record<string, unknown>> {
  const names = ['login', 'report_exported', 'dashboard_created', 'invite_sent'];
  return Array.from({ length: n }, (_, i) => ({
    event_name: names[i % names.length],
    external_customer_id: externalIds[i % externalIds.length],
    user_id: `user-${i % 7}`,
    timestamp: iso(Date.now() - (i % 20) * 3600_000),
    properties: { tag, i, plan: i % 2 ? 'pro' : 'team' },
  }));
}

export interface Fakes {
  /** Where webhook deliveries go (a local receiver). */
  webhookUrl: string;
}

export async function writeWorkspace(site: Site, ws: NewWorkspace, fakes: Fakes): Promise<Written> {
  const admin = client(site.api, ws.api_key);
  const secrets = [ws.api_key, ws.ingestion_key, ws.admin_password];

  // Webhooks first: every later change is delivered, signed with this secret.
  const hook = await must(
    'webhook subscription',
    admin.post('/v1/webhook-subscriptions', { url: fakes.webhookUrl, events: ['*'], description: 'upgrade' }),
  );
  secrets.push(hook.secret);

  // Customers with external ids, contacts, a user invited.
  const customers: Record<string, string> = {};
  for (let i = 1; i <= 12; i++) {
    const ext = `up-${String(i).padStart(3, '0')}`;
    const c = await must(
      `customer ${ext}`,
      admin.post('/v1/customers', {
        name: `Upgrade ${i}`,
        external_id: ext,
        arr: i * 10_000,
        email_domain: `up${i}.example.com`,
        renewal_date: iso(Date.now() + i * 20 * DAY).slice(0, 10),
      }),
    );
    customers[ext] = c.id;
    await must(
      `contact of ${ext}`,
      admin.post(`/v1/customers/${c.id}/contacts`, { name: `Contact ${i}`, email: `c${i}@up${i}.example.com` }),
    );
  }
  const invited = await must('user invite', admin.post('/v1/users', { email: 'csm@upgrade.example.com', role: 'csm' }));
  secrets.push(invited.invite.token);

  // Credentials: a scoped API key, an OAuth app whose user holds an access and a refresh token.
  const key = await must(
    'api key',
    admin.post('/v1/api-keys', { name: 'upgrade reader', scopes: ['customers:read', 'events:read'], role: 'viewer' }),
  );
  secrets.push(key.key);
  const app = await registerApp(site.api, ws.api_key, ['customers:read', 'customers:write', 'users:read']);
  secrets.push(app.client_secret);
  const a = await authorize(site.api, app, { email: ws.admin_email, password: ws.admin_password }, 'customers:read');
  const tok = await exchange(site.api, app, a.code!, a.pkce.verifier);
  if (tok.status !== 200) throw new Error(`oauth token: ${tok.status} ${tok.text}`);
  secrets.push(tok.body.access_token, tok.body.refresh_token);

  // An integration connected through the local provider (its tokens are the provider's).
  const started = await must('teams connect', admin.post('/v1/integrations/teams/connect'));
  const page = await authorizeInBrowser(started.authorization_url);
  if (page.status !== 200) throw new Error(`teams callback: ${page.status} ${page.text}`);

  // Events: surface A (external customer ids), billing, surface B with external ids, a backfill.
  // Not up-012: its usage is the backfill's alone (a drop in the last 7 days).
  const externals = Object.keys(customers).filter((e) => e !== 'up-012');
  const accepted = { a: 0, b: 0, backfill: 0, billing: 0 };
  for (let r = 0; r < 4; r++) {
    const res = await must(
      'surface A',
      ingestA(site, ws.ingestion_key, '/v1/ingest/events', usageEvents(externals, 100, `before-${r}`)),
      202,
    );
    accepted.a += res.accepted;
  }
  const billing = externals
    .slice(0, 6)
    .flatMap((ext, i) => [
      { event_type: 'payment_succeeded', customer_id: customers[ext], amount: 100 + i, currency: 'EUR' },
      ...(i % 3 === 0
        ? [{ event_type: 'payment_failed', customer_id: customers[ext], amount: 50, currency: 'USD' }]
        : []),
    ]);
  accepted.billing += (
    await must('billing', ingestA(site, ws.ingestion_key, '/v1/ingest/billing-events', billing), 202)
  ).accepted;
  const keyed = Array.from({ length: 300 }, (_, i) => ({
    customer_id: customers[externals[i % externals.length]],
    event_name: i % 3 ? 'feature_used' : 'report_exported',
    external_id: `evt-${i}`,
    user_external_id: `u-${i % 5}`,
    timestamp: iso(Date.now() - i * 60_000),
    properties: { n: i },
  }));
  for (let i = 0; i < keyed.length; i += 100) {
    const res = await must('surface B', ingestB(site, ws.api_key, '/v1/events', keyed.slice(i, i + 100)), 200);
    accepted.b += res.accepted;
  }
  // A retry of the first 50 within the release: deduplicated already (counted accepted, stored once).
  await must('surface B again', ingestB(site, ws.api_key, '/v1/events', keyed.slice(0, 50)), 200);
  // Five weeks of steady usage for one customer, then almost none: a usage_drop alert.
  const dropping = customers['up-012'];
  const history = Array.from({ length: 35 }, (_, d) => d + 8).flatMap((d) =>
    Array.from({ length: 10 }, (_, k) => ({
      customer_id: dropping,
      event_name: 'login',
      external_id: `bf-${d}-${k}`,
      timestamp: iso(Date.now() - d * DAY - k * 60_000),
    })),
  );
  let backfillJob = '';
  for (let i = 0; i < history.length; i += 1000) {
    const res = await must(
      'backfill',
      ingestB(site, ws.api_key, '/v1/events/backfill', history.slice(i, i + 1000)),
      202,
    );
    accepted.backfill += res.accepted;
    backfillJob = res.job_id;
  }

  // The catalog names what the metrics and the health model may refer to.
  await waitFor(
    'the event catalog',
    async () => {
      const names = ((await admin.get('/v1/event-catalog?limit=200')).body?.data ?? []).map(
        (e: { event_name: string }) => e.event_name,
      );
      return ['report_exported', 'dashboard_created', 'invite_sent', 'login'].every((n) => names.includes(n));
    },
    60_000,
    250,
  );

  // The metrics library, the health model, segments, playbooks, a task by hand.
  const metricIds: string[] = [];
  for (const m of [
    { name: 'Reports exported', source_event: 'report_exported', calculation: 'count' },
    { name: 'Dashboards', source_event: 'dashboard_created', calculation: 'count' },
  ])
    metricIds.push(
      (
        await must(
          `metric ${m.name}`,
          admin.post('/v1/metrics', { ...m, window: { type: 'rolling', days: 30 }, grain: 'customer' }),
        )
      ).id,
    );
  const widgetIds: string[] = [];
  for (const w of [
    { name: 'Logins 30d', event_name: 'login', aggregation: 'count', period: '30d' },
    { name: 'Active users 7d', event_name: null, aggregation: 'unique_users', period: '7d' },
  ])
    widgetIds.push((await must(`widget ${w.name}`, admin.post('/v1/usage-widgets', w))).id);
  await must(
    'health model',
    admin.patch('/v1/health/model', {
      weights: { usage_frequency: 30, breadth: 10, payment_health: 25 },
      thresholds: { healthy: 65, at_risk: 35 },
      key_events: { positive: ['report_exported'], negative: ['invite_sent'] },
    }),
  );
  const segmentIds: string[] = [];
  for (const s of [
    { name: 'Large', rules: [{ field: 'arr', op: 'gte', value: 60_000 }] },
    { name: 'Small', rules: [{ field: 'arr', op: 'lt', value: 40_000 }], description: 'under 40k' },
  ])
    segmentIds.push((await must(`segment ${s.name}`, admin.post('/v1/segments', s))).id);
  const playbookIds: string[] = [];
  for (const p of [
    {
      name: 'Large accounts',
      trigger: { type: 'condition', expression: 'segment == "Large"' },
      actions: [{ type: 'create_task', title: 'Plan the QBR', assignee: 'owner', due_in_days: 7 }],
    },
    {
      name: 'Exports',
      trigger: { type: 'condition', expression: 'arr >= 100000' },
      actions: [{ type: 'create_task', title: 'Ask for a case study', assignee: 'owner', due_in_days: 14 }],
    },
  ])
    playbookIds.push((await must(`playbook ${p.name}`, admin.post('/v1/playbooks', p))).id);
  const first = customers['up-001'];
  const task = await must(
    'task',
    admin.post('/v1/tasks', {
      customer_id: first,
      title: 'Kick-off call',
      due_date: iso(Date.now() + 3 * DAY).slice(0, 10),
    }),
  );
  await must('task moved', admin.patch(`/v1/tasks/${task.id}`, { status: 'in_progress' }));
  const done = await must('task 2', admin.post('/v1/tasks', { customer_id: customers['up-002'], title: 'Onboarding' }));
  await must(
    'task completed',
    admin.post(`/v1/tasks/${done.id}/complete`, { outcome: 'successful', notes: 'done in one call' }),
  );

  // A customer removed for good before the upgrade, and one the new version will erase.
  const gone = await must(
    'customer to erase',
    admin.post('/v1/customers', { name: 'Erased before', external_id: 'up-x' }),
  );
  await must('hard delete', admin.del(`/v1/customers/${gone.id}?hard=true`), 204, 202);

  return {
    ws,
    customers,
    erasedBefore: gone.id,
    eraseAfter: customers['up-011'],
    scopedKey: { id: key.id, key: key.key },
    oauth: { app, access: tok.body.access_token, refresh: tok.body.refresh_token },
    webhook: { id: hook.id, secret: hook.secret, url: fakes.webhookUrl },
    // Customer i has an ARR of i × 10,000: 'Large' (segment: ≥ 60,000) and 'Exports' (≥ 100,000).
    firings:
      Object.keys(customers).filter((_, i) => (i + 1) * 10_000 >= 60_000).length +
      Object.keys(customers).filter((_, i) => (i + 1) * 10_000 >= 100_000).length,
    metricIds,
    widgetIds,
    segmentIds,
    playbookIds,
    backfillJob,
    keyed,
    accepted,
    secrets,
  };
}
