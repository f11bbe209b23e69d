import t from '#tap';
import { client, sharedApi } from '../core-api/_helpers.js';
import { bootstrap, closeDb, seed, waitFor } from '../helpers/stack.js';
import { customerIds } from '../ingest/support.js';
import { known, storeEvents } from '../metrics/support.js';
import { insertPlaybook, processorsTier, runs, tasksOf } from './support.js';

// After each scheduled materialization of a workspace its playbooks are evaluated (trigger_source
// 'metrics'), and a metric read by an enabled playbook is materialized for every customer even
// with no other consumer.
t.teardown(closeDb);

t.test('a materialization is followed by an evaluation of the playbooks that read it', async (t) => {
  const api = await sharedApi(t);
  const ws = await bootstrap();
  await seed(ws.tenant_id, 3);
  const ids = await customerIds(ws.tenant_id);
  const [a, b, c] = ['cust-000001', 'cust-000002', 'cust-000003'].map((x) => ids.get(x)!);
  await known(ws, 'report_exported');
  await storeEvents(ws.tenant_id, [
    { customer: a, name: 'report_exported', ago: 3600_000 },
    { customer: a, name: 'report_exported', ago: 7200_000 },
    { customer: b, name: 'report_exported', ago: 3600_000 },
  ]);
  const m = await client(api.url, ws.api_key).post('/v1/metrics', {
    name: 'Exports 30d',
    source_event: 'report_exported',
    calculation: 'count',
    window: { type: 'rolling', days: 30 },
    grain: 'customer',
  });
  t.equal(m.status, 201, m.text);
  const pb = await insertPlaybook(ws.tenant_id, {
    trigger: { type: 'metric_threshold', metric_id: m.body.id, operator: 'gte', value: 2 },
    actions: [{ type: 'create_task', title: 'Power user', assignee: 'owner' }],
    metric_ids: [m.body.id],
  });
  // Only the materialization runs on schedule here; the playbook schedule stays quiet.
  await processorsTier(t, [], { METRICS_TENANTS: ws.tenant_id, METRICS_MATERIALIZE_INTERVAL_MS: '600000' });
  const [run] = await waitFor(
    'an evaluation after the materialization',
    async () => {
      const r = await runs(pb);
      return r.length ? r : undefined;
    },
    30_000,
  );
  t.match(run, { trigger_source: 'metrics', evaluated: 3, matched: [a] });
  t.match(await tasksOf(pb), [{ customer_id: a, title: 'Power user' }]);
  const v = await client(api.url, ws.api_key).get(`/v1/metrics/${m.body.id}/values`);
  t.same(
    Object.fromEntries(
      (v.body.data as Array<{ customer_id: string; value: number }>).map((x) => [x.customer_id, x.value]),
    ),
    { [a]: 2, [b]: 1, [c]: 0 },
    'materialized for every customer: a playbook trigger reads it',
  );
});
