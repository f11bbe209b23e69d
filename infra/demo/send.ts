import { mapLimit } from '../../lib/map-limit.js';
import { chTenant } from '../../lib/metrics/literal.js';
import type { Sql } from '../../lib/pg.js';
import type { ClickHouse } from '../../processors/clickhouse.js';
import { type DemoClient, DemoStopped } from './client.js';
import { type DemoData, demoEventPrefix } from './data.js';
import { backfillSent, billingSent, type DemoProgress } from './progress.js';

/**
 * The demo's events, sent through the ingestion path as a customer's systems would send them:
 * usage through the backfill endpoint of surface B (90 days, beyond the 30 of POST /v1/events),
 * this month's invoices through surface A. Either part can be sent again after a load stopped
 * anywhere and the workspace ends up with each event once:
 *
 * - usage batches the progress row (progress.ts) does not list as accepted are sent; each event
 *   carries its external id, so one accepted but not yet listed when the load stopped is dropped
 *   by surface B (the job then reports it among its duplicates);
 * - billing batches are sent from the first one the progress row does not count.
 *
 * Then it waits until ClickHouse holds all of them, those of the stopped load included, which may
 * still have been on their way: the health run that follows reads them.
 */

const BACKFILL_BATCH = 1000;
const BILLING_BATCH = 50;

export interface SendOptions {
  sql: Sql;
  ch: ClickHouse;
  ingest: DemoClient;
  surfaceA: DemoClient;
  api: DemoClient;
  tenantId: string;
  data: DemoData;
  ids: Map<number, string>;
  progress: DemoProgress;
  log: (line: string) => void;
  /** Stop once this many event requests (backfill and billing, in that order) have been sent. */
  stopAfter?: number;
  /** Stop at the next request; the one in progress ends first and is counted. */
  signal?: AbortSignal;
}

export interface Sent {
  /** Usage events this load sent and the backfill accepted (duplicates of events held already included). */
  events: number;
  /** Of those, already held (sent by a load that stopped before it recorded them). */
  duplicates: number;
  /** Billing events sent by this load. */
  billing: number;
}

export async function sendEvents(o: SendOptions): Promise<Sent> {
  let requests = 0;
  const go = () => {
    if (o.signal?.aborted || (o.stopAfter !== undefined && requests >= o.stopAfter)) return false;
    requests++;
    return true;
  };
  const halt = () => new DemoStopped(requests);

  const usage = await backfill(o, go);
  if (usage.stopped) throw halt();
  o.log(`${usage.accepted} usage events sent in ${usage.jobs.length} backfill jobs; waiting until they are stored`);
  // The jobs are stored in order; poll the last ones most, then confirm every one.
  let duplicates = 0;
  for (const id of usage.jobs.reverse()) duplicates += await jobDone(o, id);
  if (duplicates) o.log(`${duplicates} of them were stored by a load that stopped`);

  const billing = await sendBilling(o, go);
  if (billing.stopped) throw halt();
  o.log(`${billing.sent} billing events sent (${o.data.billing.length} in all)`);
  await allStored(o);
  return { events: usage.accepted, duplicates, billing: billing.sent };
}

async function backfill(
  o: SendOptions,
  go: () => boolean,
): Promise<{ accepted: number; jobs: string[]; stopped: boolean }> {
  const batches: Array<{ n: number; events: DemoData['events'] }> = [];
  for (let i = 0; i < o.data.events.length; i += BACKFILL_BATCH) {
    const n = i / BACKFILL_BATCH;
    if (!o.progress.backfillDone.has(n)) batches.push({ n, events: o.data.events.slice(i, i + BACKFILL_BATCH) });
  }
  let accepted = 0;
  let stopped = false;
  const jobs: string[] = [];
  // A stop lets the requests in progress end: every worker skips what is left.
  await mapLimit(batches, 2, async (batch) => {
    if (stopped || !go()) {
      stopped = true;
      return;
    }
    const r = await o.ingest.post<{ job_id: string; accepted: number; rejected: number; errors: unknown[] }>(
      '/v1/events/backfill',
      { events: batch.events.map(({ customer, ...e }) => ({ customer_id: o.ids.get(customer)!, ...e })) },
    );
    if (r.body.rejected > 0) throw new Error(`backfill rejected events: ${JSON.stringify(r.body.errors.slice(0, 3))}`);
    await backfillSent(o.sql, o.progress, batch.n);
    accepted += r.body.accepted;
    jobs.push(r.body.job_id);
  });
  return { accepted, jobs, stopped };
}

/** The job's duplicates once it has stored its events. */
async function jobDone(o: SendOptions, id: string): Promise<number> {
  const deadline = Date.now() + 120_000;
  for (let wait = 100; ; wait = Math.min(wait * 2, 2000)) {
    const r = await o.api.get<{ status: string; counts: { duplicates: number } }>(`/v1/jobs/${id}`);
    if (r.body.status === 'succeeded') return r.body.counts.duplicates;
    if (r.body.status === 'failed') throw new Error(`backfill job ${id} failed`);
    if (Date.now() > deadline) throw new Error(`backfill job ${id} still ${r.body.status} after 120 s`);
    await o.api.sleep(wait);
  }
}

/** POST /v1/ingest/billing-events, 50 a request, each accepted batch counted before the next is sent. */
async function sendBilling(o: SendOptions, go: () => boolean): Promise<{ sent: number; stopped: boolean }> {
  let sent = 0;
  for (let b = o.progress.billingBatches; b * BILLING_BATCH < o.data.billing.length; b++) {
    if (!go()) return { sent, stopped: true };
    const events = o.data.billing.slice(b * BILLING_BATCH, (b + 1) * BILLING_BATCH).map(({ customer, ...e }) => ({
      customer_id: o.ids.get(customer)!,
      ...e,
    }));
    const r = await o.surfaceA.post<{ accepted: number }>('/v1/ingest/billing-events', { events });
    await billingSent(o.sql, o.progress, b + 1);
    sent += r.body.accepted;
  }
  return { sent, stopped: false };
}

export function billingBatches(data: DemoData): number {
  return Math.ceil(data.billing.length / BILLING_BATCH);
}

/** Until ClickHouse holds every demo event of the workspace: this load's and a stopped one's. */
async function allStored(o: SendOptions): Promise<void> {
  const tenant = chTenant(o.tenantId);
  const customers = [...o.ids.values()].map((id) => `'${uuid(id)}'`).join(',');
  const prefix = demoEventPrefix(o.data.seed);
  const query =
    `SELECT (SELECT count() FROM csp.events WHERE ${tenant} AND surface = 'b' ` +
    `AND startsWith(external_id, '${prefix}')) AS usage, ` +
    `(SELECT count() FROM csp.billing_events WHERE ${tenant} ` +
    `AND customer_id IN (${customers})) AS billing`;
  const want = { usage: o.data.events.length, billing: o.data.billing.length };
  const deadline = Date.now() + 120_000;
  for (let wait = 100; ; wait = Math.min(wait * 2, 2000)) {
    const [n] = await o.ch.rows<{ usage: string; billing: string }>(query);
    if (Number(n.usage) >= want.usage && Number(n.billing) >= want.billing) return;
    if (Date.now() > deadline)
      throw new Error(
        `ClickHouse holds ${n.usage} of ${want.usage} usage and ${n.billing} of ${want.billing} billing events ` +
          'after 120 s',
      );
    await o.api.sleep(wait);
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
function uuid(s: string): string {
  if (!UUID.test(s)) throw new Error(`not a UUID: ${s}`);
  return s;
}
