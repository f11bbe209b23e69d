import { inTenant, type Sql } from '../../lib/pg.js';

/** Rows removed per customer id, per table. */
export type Removed = Map<string, Record<string, number>>;

/** Tables not to erase from: the records of erasures themselves, and customers (removed with the request). */
const KEEP = new Set(['erasures', 'customers']);

/**
 * The PostgreSQL half of an erasure, in the caller's transaction: the customer row and every table
 * whose foreign key cascades from it went with the request (remove_customers()); what is left are
 * rows that name the customer without a foreign key. Found in the catalog (every table with a uuid
 * customer_id column), so a table added later is covered: generated events not yet relayed
 * (event_outbox), surface B's deduplication keys (event_dedup), queued notifications, and so on.
 * Besides: stored Idempotency-Key answers that are the customer (its body), its id in the matched
 * lists and action entries of playbook runs, and the webhook events about it (reduced to their ids,
 * webhook_erased_data() of migration 0088): published outbox rows, and deliveries that ended or
 * wait for a disabled subscription. A delivery still pending is sent whole and reduced when it
 * ends, as an outbox row not yet published is once it is (triggers of 0088): subscribers still get
 * customer.deleted with what it says. The erased ones are counted once (they keep their mark).
 */
export async function erasePostgres(tx: Sql, tenantId: string, ids: string[]): Promise<Removed> {
  const out: Removed = new Map(ids.map((id) => [id, {}]));
  const add = (rows: Array<{ id: string; n: number }>, table: string) => {
    for (const r of rows) {
      const m = out.get(r.id);
      if (m) m[table] = (m[table] ?? 0) + Number(r.n);
    }
  };
  const tables = await tx<Array<{ table: string; tenant: boolean }>>`
    SELECT c.table_name AS table, bool_or(t.column_name IS NOT NULL) AS tenant
    FROM information_schema.columns c
    JOIN information_schema.tables tb ON tb.table_schema = c.table_schema AND tb.table_name = c.table_name
      AND tb.table_type = 'BASE TABLE'
    LEFT JOIN information_schema.columns t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
      AND t.column_name = 'tenant_id'
    WHERE c.table_schema = current_schema() AND c.column_name = 'customer_id' AND c.data_type = 'uuid'
    GROUP BY c.table_name ORDER BY c.table_name`;
  for (const { table, tenant } of tables) {
    if (KEEP.has(table)) continue;
    add(
      await tx<Array<{ id: string; n: number }>>`
        WITH d AS (
          DELETE FROM ${tx(table)} WHERE customer_id = ANY(${ids}::uuid[])
            ${tenant ? tx`AND ${inTenant(tenantId)}` : tx``}
          RETURNING customer_id)
        SELECT customer_id::text AS id, count(*)::int AS n FROM d GROUP BY 1`,
      table,
    );
  }
  add(
    await tx<Array<{ id: string; n: number }>>`
      WITH d AS (
        DELETE FROM idempotency_keys WHERE ${inTenant(tenantId)}
          AND coalesce(body->>'customer_id', body->>'id') = ANY(${ids}::text[])
        RETURNING coalesce(body->>'customer_id', body->>'id') AS id)
      SELECT id, count(*)::int AS n FROM d GROUP BY 1`,
    'idempotency_keys',
  );
  // The run stays (its counts are the workspace's history); the customer's id leaves its lists.
  const entries = ids.map((id) => JSON.stringify([{ customer_id: id }]));
  const runs = await tx<Array<{ id: string; matched: number; actions: number }>>`
    WITH u AS (
      SELECT r.id AS run, x.id, count(*) FILTER (WHERE x.list = 'matched') AS matched,
        count(*) FILTER (WHERE x.list = 'actions') AS actions
      FROM playbook_runs r, LATERAL (
        SELECT m, 'matched' FROM unnest(r.matched) AS m WHERE m = ANY(${ids}::uuid[])
        UNION ALL
        SELECT (a ->> 'customer_id')::uuid, 'actions' FROM jsonb_array_elements(r.actions) AS a
        WHERE a ->> 'customer_id' = ANY(${ids}::text[])) AS x (id, list)
      WHERE ${inTenant(tenantId, 'r')}
        AND (r.matched && ${ids}::uuid[] OR r.actions @> ANY(${entries}::text[]::jsonb[]))
      GROUP BY 1, 2
    ), d AS (
      UPDATE playbook_runs r SET
        matched = array(
          SELECT m FROM unnest(r.matched) WITH ORDINALITY AS e(m, i) WHERE m <> ALL(${ids}::uuid[]) ORDER BY i),
        actions = (
          SELECT coalesce(jsonb_agg(a ORDER BY i), '[]') FROM jsonb_array_elements(r.actions) WITH ORDINALITY AS e(a, i)
          WHERE NOT coalesce(a ->> 'customer_id' = ANY(${ids}::text[]), false))
      WHERE r.id IN (SELECT run FROM u))
    SELECT id::text, sum(matched)::int AS matched, sum(actions)::int AS actions FROM u GROUP BY 1`;
  add(
    runs.map((r) => ({ id: r.id, n: r.matched })).filter((r) => r.n > 0),
    'playbook_runs.matched',
  );
  add(
    runs.map((r) => ({ id: r.id, n: r.actions })).filter((r) => r.n > 0),
    'playbook_runs.actions',
  );
  add(
    await tx<Array<{ id: string; n: number }>>`
      WITH u AS (
        UPDATE webhook_outbox SET data = webhook_erased_data(data)
        WHERE webhook_event_customer(type, data) = ANY(${ids}::uuid[]) AND ${inTenant(tenantId)}
          AND published_at IS NOT NULL AND NOT data @> '{"erased": true}'
        RETURNING webhook_event_customer(type, data) AS id)
      SELECT id::text, count(*)::int AS n FROM u GROUP BY 1`,
    'webhook_outbox.data',
  );
  add(
    await tx<Array<{ id: string; n: number }>>`
      WITH u AS (
        UPDATE webhook_deliveries d SET body = webhook_erased_body(d.body)
        FROM webhook_subscriptions s
        WHERE webhook_body_customer(d.event_type, d.body) = ANY(${ids}::uuid[]) AND ${inTenant(tenantId, 'd')}
          AND s.id = d.subscription_id AND (d.status <> 'pending' OR NOT s.enabled)
          AND NOT d.body::jsonb @> '{"data": {"erased": true}}'
        RETURNING webhook_body_customer(d.event_type, d.body) AS id)
      SELECT id::text, count(*)::int AS n FROM u GROUP BY 1`,
    'webhook_deliveries.body',
  );
  return out;
}
