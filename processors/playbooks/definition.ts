import type { Sql } from '../../lib/pg.js';

/**
 * A playbook as the runner reads it from PostgreSQL. The core API validated trigger and actions
 * when they were saved (and resolved segment_ids / metric_ids); the runner trusts the stored shape
 * but still refuses what it cannot evaluate instead of guessing.
 */

export interface ConditionTrigger {
  type: 'condition';
  expression: string;
}

export interface MetricThresholdTrigger {
  type: 'metric_threshold';
  metric_id: string;
  operator: 'gt' | 'gte' | 'lt' | 'lte';
  value: number;
}

export interface EventTrigger {
  type: 'event';
  event_name: string;
  count?: number;
  within_days?: number;
}

export type Trigger = ConditionTrigger | MetricThresholdTrigger | EventTrigger;

export interface CreateTaskAction {
  type: 'create_task';
  title: string;
  assignee: string;
  due_in_days?: number;
  description?: string;
}

export interface NotifyAction {
  type: 'notify';
  channel: string;
  target: string;
  message?: string;
}

export type Action = CreateTaskAction | NotifyAction;

export interface Playbook {
  id: string;
  tenant_id: string;
  name: string;
  trigger: Trigger;
  actions: Action[];
  enabled: boolean;
  segment_ids: string[];
  metric_ids: string[];
}

export type TriggerSource = 'schedule' | 'health' | 'metrics' | 'event' | 'manual';

/** One playbook of the workspace (enabled or not), or undefined. */
export async function loadPlaybook(sql: Sql, tenantId: string, id: string): Promise<Playbook | undefined> {
  const [row] = await sql<Playbook[]>`
    SELECT id::text, tenant_id::text, name, trigger, actions, enabled, segment_ids::text[], metric_ids::text[]
    FROM playbooks WHERE tenant_id = ${tenantId} AND id = ${id}`;
  return row;
}

/** The workspace's enabled playbooks, optionally only those of some trigger types, oldest first. */
export async function enabledPlaybooks(sql: Sql, tenantId: string, types?: Trigger['type'][]): Promise<Playbook[]> {
  return sql<Playbook[]>`
    SELECT id::text, tenant_id::text, name, trigger, actions, enabled, segment_ids::text[], metric_ids::text[]
    FROM playbooks
    WHERE tenant_id = ${tenantId} AND enabled ${types ? sql`AND trigger->>'type' = ANY(${types}::text[])` : sql``}
    ORDER BY created_at, id`;
}
