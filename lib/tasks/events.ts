import type { Sql } from '../pg.js';
import { uuidv7 } from '../ids.js';

/**
 * The generated events of a task (`task_created`, `task_completed`) as rows of the transactional
 * outbox, written in the transaction that changes the task; processors relay them into the event
 * stream like health_changed. Properties: task_id, playbook_id, run_id, and outcome on completion
 * (the playbook runner writes task_created for its tasks with the same properties, in SQL).
 */
export async function taskEvent(
  tx: Sql,
  name: 'task_created' | 'task_completed',
  t: {
    id: string;
    tenant_id: string;
    customer_id: string;
    playbook_id: string | null;
    run_id: string | null;
    outcome?: string | null;
  },
): Promise<void> {
  const properties: Record<string, unknown> = { task_id: t.id, playbook_id: t.playbook_id, run_id: t.run_id };
  if (name === 'task_completed') properties.outcome = t.outcome ?? null;
  await tx`
    INSERT INTO event_outbox (id, tenant_id, customer_id, event_name, properties)
    VALUES (${uuidv7()}, ${t.tenant_id}, ${t.customer_id}, ${name}, ${JSON.stringify(properties)}::text::jsonb)`;
}
