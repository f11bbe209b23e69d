import type { Position } from '../../lib/cursor.js';
import { inTenant, type Sql } from '../../lib/pg.js';
import type { Action, StoredPlaybook, Trigger } from '../../schemas/core/playbooks.js';

/** SQL of the playbook endpoints (PostgreSQL). Every query is scoped by tenant_id. */

export interface PlaybookRow extends StoredPlaybook {
  created_at: Date;
  updated_at: Date;
  cursor_ts: string;
}

export interface Refs {
  segment_ids: string[];
  metric_ids: string[];
}

const COLUMNS = `id::text, name, trigger, actions, enabled, segment_ids::text[], metric_ids::text[], created_at,
  updated_at, created_at::text AS cursor_ts`;

const jsonb = (v: unknown) => JSON.stringify(v);

export async function insertPlaybook(
  sql: Sql,
  tenantId: string,
  p: { name: string; trigger: Trigger; actions: Action[]; enabled: boolean } & Refs,
): Promise<PlaybookRow> {
  const [row] = await sql<PlaybookRow[]>`
    INSERT INTO playbooks (tenant_id, name, trigger, actions, enabled, segment_ids, metric_ids)
    VALUES (${tenantId}, ${p.name}, ${jsonb(p.trigger)}::text::jsonb, ${jsonb(p.actions)}::text::jsonb, ${p.enabled},
      ${p.segment_ids}::uuid[], ${p.metric_ids}::uuid[])
    RETURNING ${sql.unsafe(COLUMNS)}`;
  return row;
}

export async function getPlaybook(
  sql: Sql,
  tenantId: string,
  id: string,
  lock = false,
): Promise<PlaybookRow | undefined> {
  const [row] = await sql<PlaybookRow[]>`
    SELECT ${sql.unsafe(COLUMNS)} FROM playbooks WHERE ${inTenant(tenantId)} AND id = ${id}
    ${lock ? sql`FOR UPDATE` : sql``}`;
  return row;
}

/** Oldest first, keyset on (created_at, id). */
export async function listPlaybooks(
  sql: Sql,
  tenantId: string,
  f: { after: Position | null; limit: number },
): Promise<PlaybookRow[]> {
  return sql<PlaybookRow[]>`
    SELECT ${sql.unsafe(COLUMNS)} FROM playbooks
    WHERE ${inTenant(tenantId)}
      ${f.after ? sql`AND (created_at, id) > (${f.after.t}::text::timestamptz, ${f.after.id}::uuid)` : sql``}
    ORDER BY created_at, id LIMIT ${f.limit + 1}`;
}

export async function updatePlaybook(
  sql: Sql,
  tenantId: string,
  id: string,
  p: { name: string; trigger: Trigger; actions: Action[]; enabled: boolean } & Refs,
): Promise<PlaybookRow | undefined> {
  const [row] = await sql<PlaybookRow[]>`
    UPDATE playbooks SET name = ${p.name}, trigger = ${jsonb(p.trigger)}::text::jsonb,
      actions = ${jsonb(p.actions)}::text::jsonb, enabled = ${p.enabled}, segment_ids = ${p.segment_ids}::uuid[],
      metric_ids = ${p.metric_ids}::uuid[], updated_at = now()
    WHERE ${inTenant(tenantId)} AND id = ${id}
    RETURNING ${sql.unsafe(COLUMNS)}`;
  return row;
}

export async function deletePlaybook(sql: Sql, tenantId: string, id: string): Promise<boolean> {
  const rows = await sql`DELETE FROM playbooks WHERE ${inTenant(tenantId)} AND id = ${id} RETURNING 1`;
  return rows.length > 0;
}

/** Segments named by a condition (lower-cased names), share-locked until the transaction ends. */
export async function segmentsByName(
  sql: Sql,
  tenantId: string,
  names: string[],
): Promise<Array<{ id: string; lname: string; rules: unknown; match: 'all' | 'any' }>> {
  if (!names.length) return [];
  return sql`
    SELECT id::text, lower(name) AS lname, rules, match FROM segments
    WHERE ${inTenant(tenantId)} AND lower(name) = ANY(${names}::text[])
    FOR SHARE`;
}

/**
 * Live metrics by slug or id, share-locked until the transaction ends: a metric deletion locks its
 * row and then counts its consumers, so it either sees this playbook or this save sees it deleted.
 */
export async function liveMetrics(
  sql: Sql,
  tenantId: string,
  by: { slugs?: string[]; ids?: string[] },
): Promise<Array<{ id: string; slug: string }>> {
  return sql`
    SELECT id::text, slug FROM metrics
    WHERE ${inTenant(tenantId)} AND status = 'active'
      AND (slug = ANY(${by.slugs ?? []}::text[]) OR id = ANY(${by.ids ?? []}::uuid[]))
    FOR SHARE`;
}

/** Users of the workspace among `ids` and lower-cased `emails`. */
export async function knownUsers(
  sql: Sql,
  tenantId: string,
  ids: string[],
  emails: string[],
): Promise<Array<{ id: string; email: string }>> {
  if (!ids.length && !emails.length) return [];
  return sql`
    SELECT id::text, lower(email) AS email FROM users
    WHERE ${inTenant(tenantId)} AND (id = ANY(${ids}::uuid[]) OR lower(email) = ANY(${emails}::text[]))`;
}

export interface RunRow {
  id: string;
  playbook_id: string;
  trigger_source: string;
  dry_run: boolean;
  started_at: Date;
  finished_at: Date | null;
  evaluated: number;
  matched: string[];
  matched_count: number;
  actions: unknown[];
  actions_count: number;
  cursor_ts: string;
}

// Stored capped at RUN_LIST_CAP entries (processors/playbooks/statement.ts), with the totals.
const RUN_COLUMNS = `id::text, playbook_id::text, trigger_source, dry_run, started_at, finished_at, evaluated,
  matched::text[], matched_count, actions, actions_count, started_at::text AS cursor_ts`;

export async function getRun(sql: Sql, tenantId: string, id: string): Promise<RunRow | undefined> {
  const [row] = await sql<RunRow[]>`
    SELECT ${sql.unsafe(RUN_COLUMNS)} FROM playbook_runs WHERE ${inTenant(tenantId)} AND id = ${id}`;
  return row;
}

/** Newest first, keyset on (started_at, id) descending. */
export async function listRuns(
  sql: Sql,
  tenantId: string,
  playbookId: string,
  f: { after: Position | null; limit: number },
): Promise<RunRow[]> {
  return sql<RunRow[]>`
    SELECT ${sql.unsafe(RUN_COLUMNS)} FROM playbook_runs
    WHERE ${inTenant(tenantId)} AND playbook_id = ${playbookId}
      ${f.after ? sql`AND (started_at, id) < (${f.after.t}::text::timestamptz, ${f.after.id}::uuid)` : sql``}
    ORDER BY started_at DESC, id DESC LIMIT ${f.limit + 1}`;
}
