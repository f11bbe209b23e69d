import type { Static } from '#typebox';
import { inTenant, type Sql } from '../../lib/pg.js';
import type {
  ConditionTrigger as ConditionTriggerSchema,
  EventTrigger as EventTriggerSchema,
  MetricThresholdTrigger as MetricThresholdTriggerSchema,
  StoredPlaybook,
  TRIGGER_SOURCES,
  Trigger,
} from '../../schemas/core/playbooks.js';

/**
 * A playbook as the runner reads it from PostgreSQL. The core API validated trigger and actions
 * when they were saved (and resolved segment_ids / metric_ids); the runner trusts the stored shape
 * but still refuses what it cannot evaluate instead of guessing.
 */

// The trigger and action shapes are the ones the core API validates (schemas/core/playbooks.ts).
export type { Action, Trigger } from '../../schemas/core/playbooks.js';
export type ConditionTrigger = Static<typeof ConditionTriggerSchema>;
export type MetricThresholdTrigger = Static<typeof MetricThresholdTriggerSchema>;
export type EventTrigger = Static<typeof EventTriggerSchema>;

export interface Playbook extends StoredPlaybook {
  tenant_id: string;
}

export type TriggerSource = (typeof TRIGGER_SOURCES)[number];

/** The workspace's enabled playbooks, optionally only those of some trigger types, oldest first. */
export async function enabledPlaybooks(sql: Sql, tenantId: string, types?: Trigger['type'][]): Promise<Playbook[]> {
  return sql<Playbook[]>`
    SELECT id::text, tenant_id::text, name, trigger, actions, enabled, segment_ids::text[], metric_ids::text[]
    FROM playbooks
    WHERE ${inTenant(tenantId)} AND enabled ${types ? sql`AND trigger->>'type' = ANY(${types}::text[])` : sql``}
    ORDER BY created_at, id`;
}
