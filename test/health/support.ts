import { connect, type NatsConnection } from 'nats';
import { subjects } from '../../lib/nats.js';
import type { DimensionScore, HealthModel } from '../../schemas/health.js';
import {
  ch,
  db,
  startTier,
  urls,
  waitFor,
  type Teardowns,
  type Tier,
  type Workspace,
  PROPERTY_COLUMNS,
} from '../helpers/stack.js';
import { BILLING, USAGE, send } from '../ingest/support.js';

/** Helpers of the health scorer tests: events through surface A, recalculation over NATS, stored rows. */

export const DAY = 24 * 3600_000;
export const daysAgo = (n: number, now = Date.now()) => new Date(now - n * DAY).toISOString();

export async function ingestTier(t: Teardowns): Promise<Tier> {
  const tier = await startTier(t, 'ingest', { INGEST_PROCESSES: '1' });
  t.teardown(() => tier.stop('SIGTERM'));
  return tier;
}

/**
 * A processors tier whose scheduled runs cover only `tenants` (none: no scheduled run, only
 * on-demand requests), so tests do not score each other's workspaces.
 */
export async function processorsTier(t: Teardowns, tenants: string[], env: Record<string, string> = {}): Promise<Tier> {
  const tier = await startTier(t, 'processors', {
    HEALTH_TENANTS: tenants.length ? tenants.join(',') : '00000000-0000-0000-0000-000000000000',
    HEALTH_LEASE_TTL_MS: '5000',
    ...env,
  });
  t.teardown(() => tier.stop('SIGTERM'));
  return tier;
}

export async function natsClient(t: Teardowns): Promise<NatsConnection> {
  const nc = await connect({ servers: urls.NATS_URL, name: 'test-health' });
  t.teardown(() => nc.close());
  return nc;
}

export interface UsageEvent {
  event_name: string;
  external_customer_id: string;
  user_id?: string;
  timestamp?: string;
}

/** Sends usage events through surface A (in requests of up to 100) and waits until the rollups hold them. */
export async function sendUsage(ingest: Tier, ws: Workspace, events: UsageEvent[]): Promise<void> {
  const before = await rollupEvents(ws.tenant_id);
  for (let i = 0; i < events.length; i += 100) {
    const res = await send(ingest.url, USAGE, { events: events.slice(i, i + 100) }, { key: ws.ingestion_key });
    if (res.status !== 202 || res.body.rejected !== 0) throw new Error(`surface A answered ${res.status} ${res.text}`);
  }
  await waitFor(
    'usage events in the rollups',
    async () => (await rollupEvents(ws.tenant_id)) >= before + events.length,
    60_000,
    200,
  );
}

export async function sendBilling(
  ingest: Tier,
  ws: Workspace,
  events: Array<{ event_type: string; customer_id: string; status?: string }>,
): Promise<void> {
  const before = await billingEvents(ws.tenant_id);
  const res = await send(ingest.url, BILLING, { events }, { key: ws.ingestion_key });
  if (res.status !== 202) throw new Error(`surface A answered ${res.status} ${res.text}`);
  await waitFor(
    'billing events in the rollups',
    async () => (await billingEvents(ws.tenant_id)) >= before + events.length,
    60_000,
    200,
  );
}

async function rollupEvents(tenant: string): Promise<number> {
  const [r] = await ch<{ n: string }>(`SELECT countMerge(events) AS n FROM usage_daily WHERE tenant_id = '${tenant}'`);
  return Number(r?.n ?? 0);
}

async function billingEvents(tenant: string): Promise<number> {
  const [r] = await ch<{ n: string }>(
    `SELECT countMerge(events) AS n FROM billing_daily WHERE tenant_id = '${tenant}'`,
  );
  return Number(r?.n ?? 0);
}

/** cmd.health.recalculate as the core API sends it; the scorer's reply. */
export async function recalculate(nc: NatsConnection, tenantId: string, customerId: string): Promise<any> {
  const m = await nc.request(
    subjects.healthRecalculate,
    JSON.stringify({ tenant_id: tenantId, customer_id: customerId }),
    {
      timeout: 20_000,
    },
  );
  return JSON.parse(m.string());
}

export interface StoredHealth {
  score: number;
  status: string;
  calculated_at: Date;
  dimensions: DimensionScore[];
  dims: Record<string, DimensionScore>;
}

export async function stored(customerId: string): Promise<StoredHealth | undefined> {
  const [r] = await db()<Array<Omit<StoredHealth, 'dims'>>>`
    SELECT score, status, calculated_at, dimensions FROM customer_health WHERE customer_id = ${customerId}`;
  return r ? { ...r, dims: Object.fromEntries(r.dimensions.map((d) => [d.key, d])) } : undefined;
}

/** Recalculates one customer now and returns what was stored. */
export async function scoreNow(nc: NatsConnection, tenantId: string, customerId: string): Promise<StoredHealth> {
  const reply = await recalculate(nc, tenantId, customerId);
  if (reply?.ok !== true) throw new Error(`recalculation failed: ${JSON.stringify(reply)}`);
  return (await stored(customerId))!;
}

export async function setModel(tenantId: string, model: Partial<HealthModel>): Promise<void> {
  await db()`
    INSERT INTO health_models (tenant_id, model) VALUES (${tenantId}, ${JSON.stringify(model)}::text::jsonb)
    ON CONFLICT (tenant_id) DO UPDATE SET model = EXCLUDED.model, updated_at = now()`;
}

/** health_changed rows of a customer (or workspace) in csp.events. */
export async function storedChanges(tenantId: string, customerId?: string): Promise<any[]> {
  const customer = customerId ? ` AND customer_id = '${customerId}'` : '';
  return ch(
    `SELECT toString(event_id) AS event_id, toString(batch_id) AS batch_id, toString(customer_id) AS customer_id,
       surface, ${PROPERTY_COLUMNS}, ts
     FROM events WHERE tenant_id = '${tenantId}' AND event_name = 'health_changed'${customer} ORDER BY ts, event_id`,
  );
}
