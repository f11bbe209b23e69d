import type { Sql } from '../../lib/pg.js';
import type { Position } from '../http/cursor.js';

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
  health_status: string | null;
  health_score: number | null;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
  cursor_ts: string;
}

export const COLUMNS = `id::text, tenant_id::text, name, email_domain, arr::float8 AS arr, owner_email, status, renewal_date::text AS renewal_date,
  custom_fields, external_id, external_source, health_status, health_score::float8 AS health_score, created_at, updated_at, deleted_at, created_at::text AS cursor_ts`;

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
  segmentId?: string;
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
    SELECT ${sql.unsafe(COLUMNS)} FROM customers
    WHERE tenant_id = ${tenantId}
      AND ${f.trash ? sql`deleted_at IS NOT NULL AND deleted_at > now() - interval '30 days'` : sql`deleted_at IS NULL`}
      ${f.statuses ? sql`AND status = ANY(${f.statuses}::text[])` : none}
      ${f.ownerEmail !== undefined ? sql`AND lower(owner_email) = lower(${f.ownerEmail})` : none}
      ${f.segmentId !== undefined ? sql`AND custom_fields->>'segment_id' = ${f.segmentId}` : none}
      ${f.healthStatuses ? sql`AND health_status = ANY(${f.healthStatuses}::text[])` : none}
      ${f.minArr !== undefined ? sql`AND arr >= ${f.minArr}` : none}
      ${f.maxArr !== undefined ? sql`AND arr <= ${f.maxArr}` : none}
      ${f.renewalWithinDays !== undefined ? sql`AND renewal_date >= (now() AT TIME ZONE 'UTC')::date AND renewal_date <= (now() AT TIME ZONE 'UTC')::date + ${f.renewalWithinDays}::int` : none}
      ${f.tsquery ? sql`AND search @@ to_tsquery('simple', ${f.tsquery})` : none}
      ${f.after ? sql`AND (created_at, id) < (${f.after.t}::text::timestamptz, ${f.after.id}::uuid)` : none}
    ORDER BY created_at DESC, id DESC
    LIMIT ${f.limit + 1}`;
}

export async function getCustomer(sql: Sql, tenantId: string, id: string): Promise<CustomerRow | undefined> {
  const [row] = await sql<
    CustomerRow[]
  >`SELECT ${sql.unsafe(COLUMNS)} FROM customers WHERE tenant_id = ${tenantId} AND id = ${id} AND deleted_at IS NULL`;
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
    INSERT INTO customers (tenant_id, name, email_domain, arr, owner_email, status, renewal_date, custom_fields, external_id, external_source)
    VALUES (${tenantId}, ${c.name}, ${c.email_domain?.toLowerCase() ?? null}, ${c.arr ?? null}, ${c.owner_email ?? null}, ${c.status ?? 'active'},
      ${c.renewal_date ?? null}, ${JSON.stringify(c.custom_fields ?? {})}::text::jsonb, ${c.external_id ?? null}, ${c.external_source ?? 'internal'})
    RETURNING ${sql.unsafe(COLUMNS)}`;
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
    UPDATE customers SET ${assignments} WHERE tenant_id = ${tenantId} AND id = ${id} AND deleted_at IS NULL RETURNING ${sql.unsafe(COLUMNS)}`;
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
