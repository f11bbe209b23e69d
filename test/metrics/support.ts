import { randomUUID } from 'node:crypto';
import { client } from '../core-api/_helpers.js';
import { db, urls, type Workspace } from '../helpers/stack.js';

/** Helpers of the metrics tests: catalog names, events written as the sink writes them, keys. */

export async function known(w: Workspace, ...names: string[]): Promise<void> {
  for (const n of names)
    await db()`INSERT INTO event_catalog (tenant_id, event_name) VALUES (${w.tenant_id}, ${n}) ON CONFLICT DO NOTHING`;
}

export interface StoredEvent {
  customer: string;
  name: string;
  /** Milliseconds before now. */
  ago: number;
  props?: Record<string, string>;
}

/** Events written straight into csp.events (JSONEachRow, as the ClickHouse writer does). */
export async function storeEvents(tenantId: string, rows: StoredEvent[]): Promise<void> {
  const now = Date.now();
  const body = rows
    .map((r) => {
      const ts = new Date(now - r.ago).toISOString().slice(0, 19).replace('T', ' ');
      const props = r.props ?? {};
      return JSON.stringify({
        tenant_id: tenantId,
        customer_id: r.customer,
        event_name: r.name,
        ts,
        ts_ms: 0,
        event_id: randomUUID(),
        batch_id: randomUUID(),
        received_at: ts,
        surface: 'a',
        properties: JSON.stringify(props),
        prop_keys: Object.keys(props),
        prop_values: Object.values(props),
      });
    })
    .join('\n');
  const q = encodeURIComponent('INSERT INTO csp.events FORMAT JSONEachRow');
  const res = await fetch(`${urls.CLICKHOUSE_URL}/?query=${q}`, { method: 'POST', body });
  if (!res.ok) throw new Error(`ClickHouse: ${await res.text()}`);
}

/** An API key of the workspace with `role` and `scopes`. */
export async function apiKey(apiUrl: string, w: Workspace, role: string, scopes: string[]): Promise<string> {
  const r = await client(apiUrl, w.api_key).post('/v1/api-keys', { name: `${role} key`, role, scopes });
  if (r.status !== 201) throw new Error(`${r.status} ${r.text}`);
  return r.body.key;
}
