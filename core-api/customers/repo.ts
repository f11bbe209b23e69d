import type { PendingQuery, Row } from 'postgres';
import { inTenant, type Sql } from '../../lib/pg.js';
import type { Position } from '../../lib/cursor.js';

export interface CustomerRow {
  id: string;
  tenant_id: string;
  name: string;
  email_domain: string | null;
  arr: number | null;
  owner_email: string | null;
  status: string;
  renewal_date: string | null;
  custom_fields: Record<string, unknown>;
  external_id: string | null;
  external_source: string;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
  cursor_ts: string;
  health_score: number | null;
  health_status: string | null;
  health_calculated_at: Date | null;
}

/**
 * Columns of `c` (customers, or a CTE of rows just written) with the stored health score of `h`
 * (customer_health_current, joined by WITH_HEALTH: calculated_at also moves with scheduled runs
 * that found the score unchanged; null until the scorer first writes the customer).
 */
export const COLUMNS = `c.id::text, c.tenant_id::text, c.name, c.email_domain, c.arr::float8 AS arr,
  c.owner_email, c.status, c.renewal_date::text AS renewal_date, c.custom_fields, c.external_id, c.external_source,
  c.created_at, c.updated_at, c.deleted_at, c.created_at::text AS cursor_ts,
  h.score AS health_score, h.status AS health_status, h.calculated_at AS health_calculated_at`;
const WITH_HEALTH = 'LEFT JOIN customer_health_current h ON h.customer_id = c.id';

export function toCustomer(r: CustomerRow, withDeleted = false): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: r.id,
    tenant_id: r.tenant_id,
    name: r.name,
    email_domain: r.email_domain,
    arr: r.arr,
    owner_email: r.owner_email,
    status: r.status,
    renewal_date: r.renewal_date,
    custom_fields: r.custom_fields,
    external_id: r.external_id,
    external_source: r.external_source,
    health_status: r.health_status,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
  if (withDeleted) out.deleted_at = r.deleted_at?.toISOString() ?? null;
  return out;
}

export interface ListFilter {
  statuses?: string[];
  ownerEmail?: string | null;
  /** Segment membership over `c` and `h` (core-api/segments/repo.ts `segmentPredicate`). */
  segment?: PendingQuery<Row[]>;
  healthStatuses?: string[];
  minArr?: number;
  maxArr?: number;
  renewalWithinDays?: number;
  tsquery?: string;
  after?: Position | null;
  limit: number;
  trash?: boolean;
}

/** Newest first, keyset on (created_at, id). */
export async function listCustomers(sql: Sql, tenantId: string, f: ListFilter): Promise<CustomerRow[]> {
  const none = sql``;
  return sql<CustomerRow[]>`
    SELECT ${sql.unsafe(COLUMNS)} FROM customers c ${sql.unsafe(WITH_HEALTH)}
    WHERE ${inTenant(tenantId, 'c')}
      AND ${
        f.trash
          ? sql`c.deleted_at IS NOT NULL AND c.deleted_at > now() - interval '30 days'`
          : sql`c.deleted_at IS NULL`
      }
      ${f.statuses ? sql`AND c.status = ANY(${f.statuses}::text[])` : none}
      ${f.ownerEmail !== undefined ? sql`AND lower(c.owner_email) = lower(${f.ownerEmail})` : none}
      ${f.segment ? sql`AND ${f.segment}` : none}
      ${f.healthStatuses ? sql`AND ${inTenant(tenantId, 'h')} AND h.status = ANY(${f.healthStatuses}::text[])` : none}
      ${f.minArr !== undefined ? sql`AND c.arr >= ${f.minArr}` : none}
      ${f.maxArr !== undefined ? sql`AND c.arr <= ${f.maxArr}` : none}
      ${
        f.renewalWithinDays !== undefined
          ? sql`AND c.renewal_date >= (now() AT TIME ZONE 'UTC')::date
              AND c.renewal_date <= (now() AT TIME ZONE 'UTC')::date + ${f.renewalWithinDays}::int`
          : none
      }
      ${f.tsquery ? sql`AND c.search @@ to_tsquery('simple', ${f.tsquery})` : none}
      ${f.after ? sql`AND (c.created_at, c.id) < (${f.after.t}::text::timestamptz, ${f.after.id}::uuid)` : none}
    ORDER BY c.created_at DESC, c.id DESC
    LIMIT ${f.limit + 1}`;
}

export async function getCustomer(sql: Sql, tenantId: string, id: string): Promise<CustomerRow | undefined> {
  const [row] = await sql<CustomerRow[]>`
    SELECT ${sql.unsafe(COLUMNS)} FROM customers c ${sql.unsafe(WITH_HEALTH)}
    WHERE ${inTenant(tenantId, 'c')} AND c.id = ${id} AND c.deleted_at IS NULL`;
  return row;
}

export interface CustomerInput {
  name: string;
  email_domain?: string;
  arr?: number;
  owner_email?: string;
  status?: string;
  renewal_date?: string;
  custom_fields?: Record<string, unknown>;
  external_id?: string;
  external_source?: string;
}

export async function insertCustomer(sql: Sql, tenantId: string, c: CustomerInput): Promise<CustomerRow> {
  const [row] = await sql<CustomerRow[]>`
    WITH c AS (
      INSERT INTO customers (
        tenant_id, name, email_domain, arr, owner_email, status, renewal_date, custom_fields, external_id,
        external_source
      )
      VALUES (
        ${tenantId}, ${c.name}, ${c.email_domain?.toLowerCase() ?? null}, ${c.arr ?? null}, ${c.owner_email ?? null},
        ${c.status ?? 'active'}, ${c.renewal_date ?? null}, ${JSON.stringify(c.custom_fields ?? {})}::text::jsonb,
        ${c.external_id ?? null}, ${c.external_source ?? 'internal'}
      )
      RETURNING *)
    SELECT ${sql.unsafe(COLUMNS)} FROM c ${sql.unsafe(WITH_HEALTH)}`;
  return row;
}

const PLAIN = [
  'name',
  'email_domain',
  'arr',
  'owner_email',
  'status',
  'renewal_date',
  'external_id',
  'external_source',
] as const;

/** Only the fields sent change; custom_fields merge, a key sent as null is removed. */
export async function updateCustomer(
  sql: Sql,
  tenantId: string,
  id: string,
  patch: Partial<Record<string, unknown>>,
): Promise<CustomerRow | undefined> {
  const sets = [];
  for (const k of PLAIN) {
    if (!(k in patch)) continue;
    let v = patch[k] as string | number | null;
    if (k === 'email_domain' && typeof v === 'string') v = v.toLowerCase();
    sets.push(sql`${sql(k)} = ${v}`);
  }
  if (patch.custom_fields !== undefined) {
    const cf = patch.custom_fields as Record<string, unknown>;
    const set: Record<string, unknown> = {};
    const drop: string[] = [];
    for (const [k, v] of Object.entries(cf)) v === null ? drop.push(k) : (set[k] = v);
    sets.push(sql`custom_fields = (custom_fields || ${JSON.stringify(set)}::text::jsonb) - ${drop}::text[]`);
  }
  sets.push(sql`updated_at = now()`);
  const assignments = sets.reduce((acc, s, i) => (i === 0 ? s : sql`${acc}, ${s}`));
  const [row] = await sql<CustomerRow[]>`
    WITH c AS (
      UPDATE customers SET ${assignments} WHERE ${inTenant(tenantId)} AND id = ${id} AND deleted_at IS NULL RETURNING *)
    SELECT ${sql.unsafe(COLUMNS)} FROM c ${sql.unsafe(WITH_HEALTH)}`;
  return row;
}

/** Prefix search over name and domain words: "acm glob" finds "Acme Global". */
export function toTsquery(q: string): string | undefined {
  const words = q
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter(Boolean)
    .slice(0, 10);
  return words.length ? words.map((w) => `${w}:*`).join(' & ') : undefined;
}
