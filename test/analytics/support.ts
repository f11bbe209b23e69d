import { client } from '../core-api/_helpers.js';
import { db, type Workspace } from '../helpers/stack.js';

/** Hand-built data for the analytics tests: customers, health scores and status history. */

export interface NewCustomer {
  name: string;
  arr?: number;
  status?: string;
  renewal_date?: string;
  owner_email?: string;
  custom_fields?: Record<string, unknown>;
}

/** A customer created through the API, as a user would. */
export async function apiCustomer(apiUrl: string, ws: Workspace, c: NewCustomer): Promise<string> {
  const r = await client(apiUrl, ws.api_key).post('/v1/customers', c);
  if (r.status !== 201) throw new Error(`POST /v1/customers: ${r.status} ${r.text}`);
  return r.body.id;
}

/**
 * A customer written straight into PostgreSQL: the API takes neither a created_at in the past nor a
 * renewal_date before today, and month, quarter and year boundaries need both. The status-history
 * trigger still records its first row at created_at.
 */
export async function sqlCustomer(
  ws: Workspace,
  c: NewCustomer & { created_at?: Date; deleted_at?: Date },
): Promise<string> {
  const [r] = await db()<Array<{ id: string }>>`
    INSERT INTO customers
      (tenant_id, name, arr, status, renewal_date, owner_email, custom_fields, created_at, deleted_at)
    VALUES (${ws.tenant_id}, ${c.name}, ${c.arr ?? null}, ${c.status ?? 'active'}, ${c.renewal_date ?? null},
      ${c.owner_email ?? null}, ${JSON.stringify(c.custom_fields ?? {})}::text::jsonb, ${c.created_at ?? new Date()},
      ${c.deleted_at ?? null})
    RETURNING id`;
  return r.id;
}

/** What the health scorer writes for a customer (the scorer has its own tests). */
export async function scored(ws: Workspace, customerId: string, score: number, status: string): Promise<void> {
  await db()`
    INSERT INTO customer_health (customer_id, tenant_id, score, status, dimensions, calculated_at)
    VALUES (${customerId}, ${ws.tenant_id}, ${score}, ${status}, '[]', now())
    ON CONFLICT (customer_id) DO UPDATE SET score = EXCLUDED.score, status = EXCLUDED.status`;
}

/**
 * A past status change, written into the history directly: changes made through the API are
 * recorded at the time they happen, and retention needs changes months ago. The customer's own
 * status column is left as it is; the cohorts read only the history.
 */
export async function pastChange(ws: Workspace, customerId: string, status: string, at: Date): Promise<void> {
  await db()`
    INSERT INTO customer_status_history (tenant_id, customer_id, status, changed_at)
    VALUES (${ws.tenant_id}, ${customerId}, ${status}, ${at})`;
}

export async function history(
  customerId: string,
): Promise<Array<{ status: string; deleted: boolean; changed_at: Date }>> {
  return db()`
    SELECT status, deleted, changed_at FROM customer_status_history WHERE customer_id = ${customerId}
    ORDER BY changed_at, id`;
}

/** An API key of the workspace with `scopes` (made by its admin key). */
export async function key(apiUrl: string, ws: Workspace, role: string, scopes: string[]): Promise<string> {
  const r = await client(apiUrl, ws.api_key).post('/v1/api-keys', { name: `${role} key`, role, scopes });
  if (r.status !== 201) throw new Error(`POST /v1/api-keys: ${r.status} ${r.text}`);
  return r.body.key;
}

/** Month `n` months from the current one (UTC) at `day` and `time`, as a Date. */
export function monthsFromNow(n: number, day = 1, time = '00:00:00'): Date {
  const now = new Date();
  const first = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + n, 1));
  return new Date(`${first.toISOString().slice(0, 8)}${String(day).padStart(2, '0')}T${time}Z`);
}

export const monthOf = (d: Date): string => d.toISOString().slice(0, 7);
export const quarterOf = (d: Date): string => `${d.getUTCFullYear()}-Q${Math.floor(d.getUTCMonth() / 3) + 1}`;
