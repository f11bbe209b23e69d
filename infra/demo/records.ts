import { inTenant, type Sql } from '../../lib/pg.js';
import type { DemoData } from './data.js';

/**
 * The demo's account records, written as `npm run seed` writes customers: straight into PostgreSQL,
 * in one transaction. They are what a workspace's CRM import would hold (customers with their
 * owners, renewal dates and custom fields, contacts, the customer-success managers as users, three
 * products) and a status history reaching back before today, which the API cannot write (a change
 * made through it is dated now). Everything the product computes goes through its API
 * (infra/demo/load.ts).
 *
 * The customers are the external ids cust-000001…cust-000100 of source `internal`: created, or made
 * the demo's when they exist (fields, creation time and status history replaced). Returns each
 * customer's id by its index.
 */
export async function writeRecords(sql: Sql, tenantId: string, data: DemoData): Promise<Map<number, string>> {
  const cs = data.customers;
  return sql.begin(async (tx) => {
    await tx`
      INSERT INTO users (tenant_id, email, role)
      SELECT ${tenantId}, e, 'csm' FROM unnest(${data.users.map((u) => u.email)}::text[]) AS e
      ON CONFLICT DO NOTHING`;
    await tx`
      INSERT INTO products (tenant_id, code, name)
      VALUES (${tenantId}, 'P0001', 'Core platform'), (${tenantId}, 'P0002', 'Analytics add-on'),
             (${tenantId}, 'P0003', 'Mobile app')
      ON CONFLICT DO NOTHING`;
    const rows = await tx<Array<{ id: string; external_id: string }>>`
      INSERT INTO customers AS c (tenant_id, name, email_domain, arr, owner_email, status, renewal_date,
                                  custom_fields, external_id, external_source, created_at)
      SELECT ${tenantId}, d.name, d.domain, d.arr, d.owner, d.status, d.renewal, d.fields, d.ext, 'internal', d.created
      FROM unnest(${cs.map((c) => c.name)}::text[], ${cs.map((c) => c.email_domain)}::text[],
                  ${cs.map((c) => c.arr)}::numeric[], ${cs.map((c) => c.owner_email)}::text[],
                  ${cs.map((c) => c.status)}::text[], ${cs.map((c) => c.renewal_date)}::date[],
                  ${cs.map((c) => JSON.stringify(c.custom_fields))}::jsonb[], ${cs.map((c) => c.external_id)}::text[],
                  ${cs.map((c) => c.created_at)}::timestamptz[])
        AS d (name, domain, arr, owner, status, renewal, fields, ext, created)
      ON CONFLICT (tenant_id, external_source, external_id) WHERE external_id IS NOT NULL DO UPDATE
        SET name = EXCLUDED.name, email_domain = EXCLUDED.email_domain, arr = EXCLUDED.arr,
            owner_email = EXCLUDED.owner_email, status = EXCLUDED.status, renewal_date = EXCLUDED.renewal_date,
            custom_fields = EXCLUDED.custom_fields, created_at = EXCLUDED.created_at, deleted_at = NULL,
            updated_at = now()
      RETURNING c.id::text, c.external_id`;
    const byExt = new Map(rows.map((r) => [r.external_id, r.id]));
    const ids = new Map(cs.map((c) => [c.index, byExt.get(c.external_id)!]));

    // The history as it happened, in place of the rows the triggers wrote at creation and now.
    const hist = cs.flatMap((c) => c.history.map((h) => ({ id: ids.get(c.index)!, ...h })));
    await tx`
      DELETE FROM customer_status_history
      WHERE ${inTenant(tenantId)} AND customer_id = ANY(${[...ids.values()]}::uuid[])`;
    await tx`
      INSERT INTO customer_status_history (tenant_id, customer_id, status, deleted, changed_at)
      SELECT ${tenantId}, h.id, h.status, false, h.at
      FROM unnest(${hist.map((h) => h.id)}::uuid[], ${hist.map((h) => h.status)}::text[],
                  ${hist.map((h) => h.at)}::timestamptz[]) WITH ORDINALITY AS h (id, status, at, n)
      ORDER BY h.n`;

    const ct = data.contacts;
    await tx`
      INSERT INTO contacts (tenant_id, customer_id, name, email, title, is_champion, whatsapp_number)
      SELECT ${tenantId}, d.customer, d.name, d.email, d.title, d.champion, d.whatsapp
      FROM unnest(${ct.map((c) => ids.get(c.customer)!)}::uuid[], ${ct.map((c) => c.name)}::text[],
                  ${ct.map((c) => c.email)}::text[], ${ct.map((c) => c.title)}::text[],
                  ${ct.map((c) => String(c.is_champion))}::boolean[], ${ct.map((c) => c.whatsapp_number)}::text[])
        AS d (customer, name, email, title, champion, whatsapp)
      ON CONFLICT DO NOTHING`;
    return ids;
  }) as Promise<Map<number, string>>;
}
