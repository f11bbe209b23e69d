import { type SegmentRef, segmentPredicate, segmentsOfCustomer } from '../segments/repo.js';
import { openTasks, type TaskRow, toTask } from '../tasks/repo.js';
import { IdParams, PageQuery } from '../../schemas/core/common.js';
import {
  Contact,
  ContactCreate,
  ContactList,
  Customer,
  CustomerCreate,
  CustomerDetail,
  CustomerList,
  CustomerListQuery,
  CustomerPatch,
  DeleteQuery,
} from '../../schemas/core/customers.js';
import { json, noContent, type Ctx, type Reply } from '../http/context.js';
import { decodeCursor, page } from '../../lib/cursor.js';
import { ApiError, notFound } from '../../lib/problem.js';
import type { Route } from '../http/router.js';
import { isUniqueViolation, todayUtc, type Deps } from '../deps.js';
import {
  getCustomer,
  insertCustomer,
  listCustomers,
  toCustomer,
  toTsquery,
  updateCustomer,
  type CustomerInput,
  type CustomerRow,
  type ListFilter,
} from './repo.js';
import { checkIdempotencyKey, onceWithKey, requestHash } from '../../lib/idempotency.js';

/** How long a create waits for another request holding the same Idempotency-Key (then 409). */
const IDEMPOTENCY_WAIT_MS = 10_000;

const EXAMPLE = {
  name: 'Acme Corp',
  email_domain: 'acme.com',
  arr: 120000,
  owner_email: 'jane@yourco.com',
  status: 'active',
  renewal_date: '2027-03-31',
  custom_fields: { tier: 'gold' },
  external_id: 'cus_4711',
  external_source: 'stripe',
};

interface ContactRow {
  id: string;
  customer_id: string;
  name: string;
  email: string | null;
  title: string | null;
  is_champion: boolean;
  whatsapp_number: string | null;
  created_at: Date;
}

const toContact = ({ created_at, ...r }: ContactRow) => ({ ...r, created_at: created_at.toISOString() });

export function renewalInPast(date: string | null | undefined): ApiError | null {
  if (!date || date >= todayUtc()) return null;
  return new ApiError('renewal_date_in_past', `renewal_date ${date} is before today (${todayUtc()}, UTC).`, [
    { field: 'renewal_date', code: 'renewal_date_in_past', message: 'renewal_date must be today or later' },
  ]);
}

export function externalConflict(err: unknown): ApiError | null {
  if (isUniqueViolation(err, 'customers_external'))
    return new ApiError(
      'conflict',
      'A customer with this external_source and external_id already exists in this workspace ' +
        '(a customer in the trash keeps its external_id until purged).',
      [{ field: 'external_id', code: 'duplicate', message: 'external_id is already used for this external_source' }],
    );
  return null;
}

function canonical(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  return `{${Object.keys(v)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
    .join(',')}}`;
}

function detail(r: CustomerRow, open: TaskRow[], segments: SegmentRef[]): Record<string, unknown> {
  const days = r.renewal_date
    ? Math.round((Date.parse(`${r.renewal_date}T00:00:00Z`) - Date.parse(`${todayUtc()}T00:00:00Z`)) / 86_400_000)
    : null;
  return {
    ...toCustomer(r),
    health:
      r.health_calculated_at === null
        ? null
        : { score: r.health_score, status: r.health_status, calculated_at: r.health_calculated_at.toISOString() },
    renewal: { renewal_date: r.renewal_date, days_until_renewal: days, arr: r.arr },
    segments,
    pending_tasks: open.map(toTask),
  };
}

export function customerRoutes(d: Deps): Route[] {
  const { sql } = d;

  async function list(c: Ctx): Promise<Reply> {
    const q = c.query;
    let ownerEmail: string | null | undefined;
    if (q.owner_id) {
      const [u] = await sql<{ email: string }[]>`SELECT email FROM users WHERE ${c.tenant} AND id = ${q.owner_id}`;
      ownerEmail = u?.email ?? null;
      if (ownerEmail === null) return json(200, { data: [], next_cursor: null, has_more: false });
    }
    if (q.min_arr !== undefined && q.max_arr !== undefined && q.min_arr > q.max_arr) {
      throw new ApiError('validation_failed', 'min_arr must not exceed max_arr.', [
        { field: 'min_arr', code: 'invalid_range', message: 'min_arr must not exceed max_arr' },
      ]);
    }
    let segment: ListFilter['segment'];
    if (q.segment_id) {
      segment = (await segmentPredicate(sql, c.principal.tenantId, q.segment_id))?.where;
      if (!segment)
        throw new ApiError('validation_failed', 'No such segment in this workspace.', [
          { field: 'segment_id', code: 'unknown_segment', message: 'no segment with this id in the workspace' },
        ]);
    }
    const limit = q.limit ?? 50;
    const rows = await listCustomers(sql, c.principal.tenantId, {
      statuses: q.status?.split(','),
      ownerEmail,
      segment,
      healthStatuses: q.health_status?.split(','),
      minArr: q.min_arr,
      maxArr: q.max_arr,
      renewalWithinDays: q.renewal_within_days,
      tsquery: q.q ? (toTsquery(q.q) ?? '') : undefined,
      after: decodeCursor(q.cursor),
      limit,
    });
    return json(
      200,
      page(rows, limit, (r) => toCustomer(r)),
    );
  }

  async function create(c: Ctx): Promise<Reply> {
    const body = c.body as CustomerInput;
    const past = renewalInPast(body.renewal_date);
    if (past) throw past;
    const key = c.headers['idempotency-key'];
    const tenantId = c.principal.tenantId;
    const createOnce = async (tx: typeof sql) => {
      try {
        return await insertCustomer(tx, tenantId, body);
      } catch (err) {
        throw externalConflict(err) ?? err;
      }
    };
    if (key === undefined) {
      const row = await createOnce(sql);
      d.notify.customersChanged(tenantId, [row.id], 'created');
      return json(201, toCustomer(row), [['Location', `/v1/customers/${row.id}`]]);
    }
    const invalidKey = checkIdempotencyKey(key);
    if (invalidKey) throw invalidKey;
    const claim = { scope: 'customers.create', key, hash: requestHash(canonical(c.body)) };
    const out = await sql.begin((tx) =>
      onceWithKey(tx as unknown as typeof sql, tenantId, claim, IDEMPOTENCY_WAIT_MS, async () => {
        const row = await createOnce(tx as unknown as typeof sql);
        const headers: Array<[string, string]> = [['Location', `/v1/customers/${row.id}`]];
        return { status: 201, body: Buffer.from(JSON.stringify(toCustomer(row))), headers, id: row.id };
      }),
    );
    if (!out.replayed) d.notify.customersChanged(tenantId, [out.answer.id], 'created');
    const { status, headers } = out.answer;
    return {
      status,
      text: out.answer.body.toString('utf8'),
      contentType: 'application/json',
      headers: out.replayed ? [...headers, ['Idempotent-Replayed', 'true']] : headers,
    };
  }

  async function get(c: Ctx): Promise<Reply> {
    const row = await getCustomer(sql, c.principal.tenantId, c.params.id);
    if (!row) throw notFound('Customer');
    const [open, segments] = await Promise.all([
      openTasks(sql, c.principal.tenantId, row.id),
      segmentsOfCustomer(sql, c.principal.tenantId, row.id),
    ]);
    return json(200, detail(row, open, segments));
  }

  async function patch(c: Ctx): Promise<Reply> {
    const past = renewalInPast(c.body.renewal_date);
    if (past) throw past;
    let row: CustomerRow | undefined;
    try {
      row = await updateCustomer(sql, c.principal.tenantId, c.params.id, c.body);
    } catch (err) {
      throw externalConflict(err) ?? err;
    }
    if (!row) throw notFound('Customer');
    d.notify.customersChanged(c.principal.tenantId, [row.id], 'updated');
    return json(200, toCustomer(row));
  }

  async function remove(c: Ctx): Promise<Reply> {
    if (c.query.hard) {
      // The erasure of its data elsewhere is queued in the same statement: no customer is removed
      // without one, and the processors do the slow part (docs/erasure.md).
      const [gone] = await sql<[{ n: number }]>`
        SELECT remove_customers(array_agg(id), 'hard_delete') AS n
        FROM customers WHERE ${c.tenant} AND id = ${c.params.id}`;
      if (gone.n === 0) throw notFound('Customer');
    } else {
      const gone = await sql`
        UPDATE customers SET deleted_at = now(), updated_at = now()
        WHERE ${c.tenant} AND id = ${c.params.id} AND deleted_at IS NULL RETURNING 1`;
      if (gone.length === 0) throw notFound('Customer');
    }
    d.notify.customersChanged(c.principal.tenantId, [c.params.id], 'deleted');
    return noContent();
  }

  async function trash(c: Ctx): Promise<Reply> {
    const limit = c.query.limit ?? 50;
    const rows = await listCustomers(sql, c.principal.tenantId, {
      trash: true,
      after: decodeCursor(c.query.cursor),
      limit,
    });
    return json(
      200,
      page(rows, limit, (r) => ({
        ...toCustomer(r, true),
        purge_at: new Date(r.deleted_at!.getTime() + 30 * 86_400_000).toISOString(),
      })),
    );
  }

  async function restore(c: Ctx): Promise<Reply> {
    const [row] = await sql<CustomerRow[]>`
      UPDATE customers SET deleted_at = NULL, updated_at = now()
      WHERE ${c.tenant} AND id = ${c.params.id} AND deleted_at IS NOT NULL AND deleted_at > now() - interval '30 days'
      RETURNING id::text`;
    if (!row) throw notFound('Customer in the trash');
    const full = await getCustomer(sql, c.principal.tenantId, c.params.id);
    d.notify.customersChanged(c.principal.tenantId, [c.params.id], 'restored');
    return json(200, toCustomer(full!));
  }

  async function listContacts(c: Ctx): Promise<Reply> {
    if (!(await getCustomer(sql, c.principal.tenantId, c.params.id))) throw notFound('Customer');
    const limit = c.query.limit ?? 50;
    const after = decodeCursor(c.query.cursor);
    const rows = await sql<Array<ContactRow & { cursor_ts: string }>>`
      SELECT id::text, customer_id::text, name, email, title, is_champion, whatsapp_number, created_at,
        created_at::text AS cursor_ts
      FROM contacts WHERE ${c.tenant} AND customer_id = ${c.params.id}
        ${after ? sql`AND (created_at, id) > (${after.t}::text::timestamptz, ${after.id}::uuid)` : sql``}
      ORDER BY created_at, id LIMIT ${limit + 1}`;
    return json(
      200,
      page(rows, limit, ({ cursor_ts: _, ...r }) => toContact(r)),
    );
  }

  async function createContact(c: Ctx): Promise<Reply> {
    if (!(await getCustomer(sql, c.principal.tenantId, c.params.id))) throw notFound('Customer');
    const b = c.body as {
      name: string;
      email?: string;
      title?: string;
      is_champion?: boolean;
      whatsapp_number?: string;
    };
    try {
      const [row] = await sql<ContactRow[]>`
        INSERT INTO contacts (tenant_id, customer_id, name, email, title, is_champion, whatsapp_number)
        VALUES (
          ${c.principal.tenantId}, ${c.params.id}, ${b.name}, ${b.email ?? null}, ${b.title ?? null},
          ${b.is_champion ?? false}, ${b.whatsapp_number ?? null}
        )
        RETURNING id::text, customer_id::text, name, email, title, is_champion, whatsapp_number, created_at`;
      return json(201, toContact(row), [['Location', `/v1/customers/${c.params.id}/contacts/${row.id}`]]);
    } catch (err) {
      if (isUniqueViolation(err, 'contacts_email'))
        throw new ApiError('conflict', 'This customer already has a contact with this e-mail.', [
          { field: 'email', code: 'duplicate', message: 'email is already used by a contact of this customer' },
        ]);
      throw err;
    }
  }

  const common = { tag: 'Customers', auth: 'bearer' as const };
  return [
    {
      ...common,
      method: 'GET',
      path: '/v1/customers',
      summary: 'List customers',
      scope: 'customers:read',
      query: CustomerListQuery,
      handler: list,
      responses: { 200: { description: 'A page of customers, newest first.', schema: CustomerList } },
    },
    {
      ...common,
      method: 'POST',
      path: '/v1/customers',
      summary: 'Create a customer',
      scope: 'customers:write',
      body: CustomerCreate,
      bodyExample: EXAMPLE,
      handler: create,
      description:
        'With an `Idempotency-Key` header the first response is stored for 24 hours and replayed (header ' +
        '`Idempotent-Replayed: true`) for the same key and body; the same key with a different body answers 422 ' +
        '`idempotency_key_reused`.',
      headers: [{ name: 'Idempotency-Key', description: '1 to 255 visible ASCII characters; recommended.' }],
      errors: [409, 413, 415, 422],
      responses: { 201: { description: 'Created.', schema: Customer } },
    },
    {
      ...common,
      method: 'GET',
      path: '/v1/customers/trash',
      summary: 'List soft-deleted customers (recoverable for 30 days)',
      scope: 'admin:*',
      query: PageQuery,
      handler: trash,
      responses: {
        200: { description: 'A page of customers in the trash with deleted_at and purge_at.', schema: CustomerList },
      },
    },
    {
      ...common,
      method: 'GET',
      path: '/v1/customers/{id}',
      summary: 'Customer detail with health, renewal and pending tasks',
      scope: 'customers:read',
      params: IdParams,
      handler: get,
      errors: [404],
      responses: { 200: { description: 'The customer.', schema: CustomerDetail } },
    },
    {
      ...common,
      method: 'PATCH',
      path: '/v1/customers/{id}',
      summary: 'Update a customer (fields sent only; custom_fields merge)',
      scope: 'customers:write',
      params: IdParams,
      body: CustomerPatch,
      bodyExample: { arr: 150000, custom_fields: { tier: 'platinum', legacy_flag: null } },
      handler: patch,
      errors: [404, 409, 413, 415, 422],
      responses: { 200: { description: 'The updated customer.', schema: Customer } },
    },
    {
      ...common,
      method: 'DELETE',
      path: '/v1/customers/{id}',
      summary: 'Soft-delete a customer, or remove it permanently with hard=true (admin:*)',
      description:
        'With `hard=true` the customer is gone at once and the erasure of all its data (events, rollups, ' +
        'health history, metric values, contacts, tasks, …) is queued and runs in the background: ' +
        '`GET /v1/erasures/{customer_id}` follows it. docs/erasure.md.',
      scope: 'customers:delete',
      scopeWhen: { query: { hard: true }, scope: 'admin:*' },
      params: IdParams,
      query: DeleteQuery,
      handler: remove,
      errors: [404],
      responses: { 204: { description: 'Deleted.' } },
    },
    {
      ...common,
      method: 'POST',
      path: '/v1/customers/{id}/restore',
      summary: 'Restore a soft-deleted customer',
      scope: 'admin:*',
      params: IdParams,
      handler: restore,
      bucket: 'write',
      errors: [404],
      responses: { 200: { description: 'The restored customer.', schema: Customer } },
    },
    {
      ...common,
      method: 'GET',
      path: '/v1/customers/{id}/contacts',
      summary: 'List contacts',
      scope: 'customers:read',
      params: IdParams,
      query: PageQuery,
      handler: listContacts,
      errors: [404],
      responses: { 200: { description: 'A page of contacts, oldest first.', schema: ContactList } },
    },
    {
      ...common,
      method: 'POST',
      path: '/v1/customers/{id}/contacts',
      summary: 'Create a contact',
      scope: 'customers:write',
      params: IdParams,
      body: ContactCreate,
      bodyExample: {
        name: 'Ada Lovelace',
        email: 'ada@acme.com',
        title: 'CTO',
        is_champion: true,
        whatsapp_number: '+4915112345678',
      },
      handler: createContact,
      errors: [404, 409, 413, 415],
      responses: { 201: { description: 'Created.', schema: Contact } },
    },
  ] satisfies Route[];
}
