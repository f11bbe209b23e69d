import type { PendingQuery, Row } from 'postgres';
import type { Position } from '../../lib/cursor.js';
import { inTenant, type Sql } from '../../lib/pg.js';
import { compileSegment, type SegmentRule } from '../../lib/segments/compile.js';
import { SqlParams } from '../../lib/sql-params.js';

/** SQL of the segment endpoints and of segment membership (PostgreSQL). Every query is scoped by tenant_id. */

export interface SegmentInput {
  name: string;
  description: string | null;
  rules: SegmentRule[];
  match: 'all' | 'any';
}

export interface SegmentRow extends SegmentInput {
  id: string;
  created_at: Date;
  updated_at: Date;
  cursor_ts: string;
}

const COLUMNS = 'id::text, name, description, rules, match, created_at, updated_at, created_at::text AS cursor_ts';
const jsonb = (v: unknown) => JSON.stringify(v);

export async function insertSegment(sql: Sql, tenantId: string, s: SegmentInput): Promise<SegmentRow> {
  const [row] = await sql<SegmentRow[]>`
    INSERT INTO segments (tenant_id, name, description, rules, match)
    VALUES (${tenantId}, ${s.name}, ${s.description}, ${jsonb(s.rules)}::text::jsonb, ${s.match})
    RETURNING ${sql.unsafe(COLUMNS)}`;
  return row;
}

export async function getSegment(
  sql: Sql,
  tenantId: string,
  id: string,
  lock = false,
): Promise<SegmentRow | undefined> {
  const [row] = await sql<SegmentRow[]>`
    SELECT ${sql.unsafe(COLUMNS)} FROM segments WHERE ${inTenant(tenantId)} AND id = ${id}
    ${lock ? sql`FOR UPDATE` : sql``}`;
  return row;
}

/** Oldest first, keyset on (created_at, id). */
export async function listSegments(
  sql: Sql,
  tenantId: string,
  f: { after: Position | null; limit: number },
): Promise<SegmentRow[]> {
  return sql<SegmentRow[]>`
    SELECT ${sql.unsafe(COLUMNS)} FROM segments
    WHERE ${inTenant(tenantId)}
      ${f.after ? sql`AND (created_at, id) > (${f.after.t}::text::timestamptz, ${f.after.id}::uuid)` : sql``}
    ORDER BY created_at, id LIMIT ${f.limit + 1}`;
}

export async function updateSegment(sql: Sql, tenantId: string, id: string, s: SegmentInput): Promise<SegmentRow> {
  const [row] = await sql<SegmentRow[]>`
    UPDATE segments SET name = ${s.name}, description = ${s.description}, rules = ${jsonb(s.rules)}::text::jsonb,
      match = ${s.match}, updated_at = now()
    WHERE ${inTenant(tenantId)} AND id = ${id}
    RETURNING ${sql.unsafe(COLUMNS)}`;
  return row;
}

export async function deleteSegment(sql: Sql, tenantId: string, id: string): Promise<void> {
  await sql`DELETE FROM segments WHERE ${inTenant(tenantId)} AND id = ${id}`;
}

export async function countSegments(sql: Sql, tenantId: string): Promise<number> {
  const [r] = await sql<Array<{ n: number }>>`SELECT count(*)::int AS n FROM segments WHERE ${inTenant(tenantId)}`;
  return r.n;
}

/** Playbooks whose condition names the segment (their saved `segment_ids`). */
export async function playbooksUsing(
  sql: Sql,
  tenantId: string,
  segmentId: string,
): Promise<Array<{ id: string; name: string }>> {
  return sql`
    SELECT id::text, name FROM playbooks
    WHERE ${inTenant(tenantId)} AND ${segmentId}::uuid = ANY(segment_ids)
    ORDER BY created_at, id`;
}

/**
 * The segment's membership as a fragment for a customers query over `c` and `h` (customer_health
 * LEFT JOINed); undefined when the workspace has no such segment. Wrapped in an object: a fragment
 * is thenable, and an async function returning it bare would run it as a query.
 */
export async function segmentPredicate(
  sql: Sql,
  tenantId: string,
  segmentId: string,
): Promise<{ where: PendingQuery<Row[]> } | undefined> {
  const seg = await getSegment(sql, tenantId, segmentId);
  if (!seg) return undefined;
  const p = new SqlParams();
  return { where: p.fragment(sql, compileSegment(seg, p)) };
}

/**
 * The segments a customer is in, by name: one statement evaluating every segment of the workspace
 * for this customer (each segment's compiled rules as one CASE of an array).
 */
export async function segmentsOfCustomer(
  sql: Sql,
  tenantId: string,
  customerId: string,
): Promise<Array<{ id: string; name: string }>> {
  const segs = await sql<SegmentRow[]>`
    SELECT ${sql.unsafe(COLUMNS)} FROM segments WHERE ${inTenant(tenantId)} ORDER BY lower(name), id`;
  if (!segs.length) return [];
  const p = new SqlParams();
  const cases = segs.map((s) => `CASE WHEN ${compileSegment(s, p)} THEN ${p.add(s.id, 'text')} END`);
  const text = `SELECT array_remove(ARRAY[${cases.join(', ')}]::text[], NULL) AS ids
    FROM customers c LEFT JOIN customer_health h ON h.customer_id = c.id
    WHERE ${p.inTenant(tenantId, 'c')} AND c.id = ${p.add(customerId, 'uuid')}`;
  const [r] = await sql.unsafe<Array<{ ids: string[] }>>(text, p.values as never[]);
  const inside = new Set(r?.ids ?? []);
  return segs.filter((s) => inside.has(s.id)).map((s) => ({ id: s.id, name: s.name }));
}

export interface SegmentRef {
  id: string;
  name: string;
}
