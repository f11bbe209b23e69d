import { isUuid } from '../lib/ids.js';
import { tenantOfSubject } from '../lib/nats.js';
import type { Sql } from '../lib/pg.js';
import type { RowsMessage } from './writer/held.js';

/**
 * Completes surface-B backfill jobs as their messages reach ClickHouse: `stored` and `processed` are
 * the rows stored, `duplicates` the accepted events that were not (duplicates in the request, and
 * with SURFACE_B_DEDUP=stream those the writer dropped), final once the job has succeeded. The ingest tier inserts the
 * job row in the transaction that waits for the PubAck, so the row may not be committed yet when
 * the writer gets here: an upsert waits on that row's lock instead of missing it, and creates the
 * row if the request was rolled back after its message was stored anyway.
 */
export function backfillJobHooks(sql: Sql) {
  const split = (messages: RowsMessage[]) => {
    const ids: string[] = [];
    const tenants: string[] = [];
    const rows: number[] = [];
    for (const m of messages) {
      const id = m.headers?.get('Cs-Job-Id') ?? '';
      if (!isUuid(id)) continue;
      ids.push(id);
      tenants.push(tenantOfSubject(m.subject) ?? '');
      // What the writer stored: the message's rows less those it dropped as duplicates.
      rows.push(Number(m.headers?.get('Cs-Rows') ?? 0) - (m.duplicates ?? 0));
    }
    return { ids, tenants, rows };
  };

  return {
    async onStored(messages: RowsMessage[]): Promise<void> {
      const { ids, tenants, rows } = split(messages);
      if (!ids.length) return;
      await sql`
        INSERT INTO jobs (
          id, tenant_id, type, status, params, input, total, processed, counts, started_at, finished_at, heartbeat_at
        )
        SELECT id, tenant, 'events.backfill', 'succeeded', '{}', '[]', n, n, jsonb_build_object('stored', n),
          now(), now(), now()
        FROM unnest(${ids}::uuid[], ${tenants}::uuid[], ${rows}::int[]) AS u(id, tenant, n)
        ON CONFLICT (id) DO UPDATE SET status = 'succeeded', total = EXCLUDED.total, processed = EXCLUDED.processed,
          counts = jobs.counts || jsonb_build_object('stored', EXCLUDED.processed) || CASE
            WHEN jobs.counts ? 'accepted'
            THEN jsonb_build_object('duplicates', (jobs.counts->>'accepted')::int - EXCLUDED.processed)
            ELSE '{}' END,
          started_at = coalesce(jobs.started_at, now()), finished_at = coalesce(jobs.finished_at, now()),
          heartbeat_at = now()`;
    },
    async onDeadLettered(message: RowsMessage, reason: string): Promise<void> {
      const { ids, tenants } = split([message]);
      if (!ids.length) return;
      await sql`
        INSERT INTO jobs (id, tenant_id, type, status, params, input, total, error, finished_at)
        VALUES (${ids[0]}, ${tenants[0]}, 'events.backfill', 'failed', '{}', '[]', 0, ${reason.slice(0, 500)}, now())
        ON CONFLICT (id) DO UPDATE SET status = 'failed', error = EXCLUDED.error, finished_at = now()`;
    },
  };
}
