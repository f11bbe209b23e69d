import { randomUUID } from 'node:crypto';
import { connect, type NatsConnection } from 'nats';
import { subjects } from '../../lib/nats.js';
import { ch, db, startTier, urls, type Teardowns, type Tier } from '../helpers/stack.js';

/** Helpers of the playbook runner tests. */

/** A processors tier evaluating only `tenants` on its own (schedule, events). */
export async function processorsTier(t: Teardowns, tenants: string[], env: Record<string, string> = {}): Promise<Tier> {
  const tier = await startTier(t, 'processors', {
    PLAYBOOKS_TENANTS: tenants.length ? tenants.join(',') : '00000000-0000-0000-0000-000000000000',
    ...env,
  });
  t.teardown(() => tier.stop('SIGTERM'));
  return tier;
}

export async function natsClient(t: Teardowns, url = urls.NATS_URL): Promise<NatsConnection> {
  const nc = await connect({ servers: url, name: 'test-playbooks' });
  t.teardown(() => nc.close());
  return nc;
}

/**
 * A playbook stored as the playbook endpoints store it (trigger, actions, the metrics it reads in
 * metric_ids), written in SQL so the runner is tested on its own.
 */
export async function insertPlaybook(
  tenantId: string,
  p: { name?: string; trigger: object; actions: object[]; enabled?: boolean; metric_ids?: string[] },
): Promise<string> {
  const [r] = await db()<Array<{ id: string }>>`
    INSERT INTO playbooks (tenant_id, name, trigger, actions, enabled, metric_ids)
    VALUES (${tenantId}, ${p.name ?? 'playbook'}, ${db().json(p.trigger as never)}, ${db().json(p.actions as never)},
            ${p.enabled ?? true}, ${p.metric_ids ?? []}::uuid[])
    RETURNING id::text`;
  return r.id;
}

/** cmd.playbooks.run as the core API sends it; the runner's reply. */
export async function runNow(
  nc: NatsConnection,
  tenantId: string,
  playbookId: string,
  dryRun = false,
  timeoutMs = 60_000,
): Promise<{ ok: boolean; run_id?: string; error?: string }> {
  const m = await nc.request(
    subjects.playbookRun,
    JSON.stringify({ tenant_id: tenantId, playbook_id: playbookId, dry_run: dryRun }),
    { timeout: timeoutMs },
  );
  return JSON.parse(m.string());
}

export interface RunRow {
  id: string;
  trigger_source: string;
  dry_run: boolean;
  evaluated: number;
  matched_count: number;
  matched: string[];
  actions: Array<{ customer_id: string; type: string; status: string; task_id?: string; reason?: string }>;
  finished_at: Date | null;
}

export async function runRow(runId: string): Promise<RunRow> {
  const [r] = await db()<RunRow[]>`
    SELECT id::text, trigger_source, dry_run, evaluated, matched_count, matched::text[], actions, finished_at
    FROM playbook_runs WHERE id = ${runId}`;
  return r;
}

export async function runs(playbookId: string): Promise<RunRow[]> {
  return db()<RunRow[]>`
    SELECT id::text, trigger_source, dry_run, evaluated, matched_count, matched::text[], actions, finished_at
    FROM playbook_runs WHERE playbook_id = ${playbookId} ORDER BY started_at, id`;
}

export interface TaskRow {
  id: string;
  customer_id: string;
  title: string;
  description: string | null;
  status: string;
  assignee_id: string | null;
  owner_id: string | null;
  due_date: string | null;
  run_id: string;
}

export async function tasksOf(playbookId: string): Promise<TaskRow[]> {
  return db()<TaskRow[]>`
    SELECT id::text, customer_id::text, title, description, status, assignee_id::text, owner_id::text,
      to_char(due_date, 'YYYY-MM-DD') AS due_date, run_id::text
    FROM tasks WHERE playbook_id = ${playbookId} ORDER BY created_at, customer_id`;
}

/** Latest values of a metric, stored in csp.metric_values as the materializer stores them. */
export async function storeValues(
  tenantId: string,
  metricId: string,
  values: Record<string, number | null>,
  computedAt: Date,
): Promise<void> {
  const s = Math.floor(computedAt.getTime() / 1000);
  const rows = Object.entries(values)
    .map(([customer, v]) =>
      JSON.stringify({
        tenant_id: tenantId,
        metric_id: metricId,
        customer_id: customer,
        period_start: s - 86_400,
        period_end: s,
        computed_at: s,
        value: v,
      }),
    )
    .join('\n');
  const res = await fetch(
    `${urls.CLICKHOUSE_URL}/?database=csp&query=${encodeURIComponent('INSERT INTO metric_values FORMAT JSONEachRow')}`,
    {
      method: 'POST',
      body: rows,
    },
  );
  if (!res.ok) throw new Error(`ClickHouse: ${await res.text()}`);
}

export const newId = () => randomUUID();
export { ch };
