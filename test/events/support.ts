import { randomUUID } from 'node:crypto';
import { bootstrap, db, seed, startTier, type Teardowns, type Tier, type Workspace } from '../helpers/stack.js';

export const EVENTS = '/v1/events';
export const BACKFILL = '/v1/events/backfill';
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const DAY = 24 * 3600_000;

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

export async function call(
  base: string,
  method: string,
  path: string,
  opts: { token?: string | null; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {
    ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
    ...opts.headers,
  };
  let raw: string | undefined;
  if (opts.body !== undefined) {
    raw = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(base + path, { method, headers, body: raw });
  const text = await res.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, text, body };
}

/** POST /v1/events (or backfill) with `events`. */
export const postEvents = (
  base: string,
  token: string,
  events: unknown[],
  headers: Record<string, string> = {},
  path = EVENTS,
) => call(base, 'POST', path, { token, body: { events }, headers });

/** A workspace with `customers` internal customers (cust-000001…) and their service ids in order. */
export async function workspace(customers: number, args: string[] = []): Promise<{ ws: Workspace; ids: string[] }> {
  const ws = await bootstrap(args);
  if (customers > 0) await seed(ws.tenant_id, customers);
  const rows = await db()<
    { id: string }[]
  >`SELECT id::text FROM customers WHERE tenant_id = ${ws.tenant_id} ORDER BY external_id`;
  return { ws, ids: rows.map((r) => r.id) };
}

/** One ingest process (surface A and B) with limits out of the way unless overridden. */
export async function ingest(t: Teardowns, env: Record<string, string> = {}): Promise<Tier> {
  const tier = await startTier(t, 'ingest', {
    INGEST_PROCESSES: '1',
    EVENTS_BATCHES_PER_MIN: '100000',
    EVENTS_BACKFILLS_PER_MIN: '100000',
    EVENTS_READS_PER_MIN: '100000',
    ...env,
  });
  t.teardown(() => tier.stop('SIGTERM'));
  return tier;
}

/**
 * The deduplication on the request path (SURFACE_B_DEDUP=request), for the files about what it
 * records and where it publishes; events/stream-dedup is about the default, after the stream.
 */
export const REQUEST_PATH = { SURFACE_B_DEDUP: 'request' };

export const ev = (customerId: string, extra: Record<string, unknown> = {}) => ({
  customer_id: customerId,
  event_name: 'feature_used',
  ...extra,
});
export const xid = () => `x-${randomUUID()}`;

/** A surface-B problem+json answer. */
export function isProblem(
  t: { equal: Function; match: Function; ok: Function },
  r: Answer,
  status: number,
  code: string,
): void {
  t.equal(r.status, status, `status ${status} (${r.text.slice(0, 300)})`);
  t.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/, 'problem+json');
  t.match(r.body?.type ?? '', new RegExp(`/errors/${code}$`), `type ends with /errors/${code}`);
  t.equal(r.body?.status, status);
  t.ok(
    typeof r.body?.title === 'string' && typeof r.body?.detail === 'string' && typeof r.body?.instance === 'string',
    'title, detail, instance',
  );
  t.equal(r.body?.trace_id, r.headers.get('x-trace-id'), 'trace_id equals X-Trace-Id');
}

/** A 200 from POST /v1/events with exactly accepted, rejected, errors. */
export function expect200(
  t: { equal: Function; same: Function },
  r: Answer,
  accepted: number,
  rejected = 0,
): Array<{ index: number; code: string; message: string }> {
  t.equal(r.status, 200, `200 (${r.text.slice(0, 400)})`);
  t.same(Object.keys(r.body ?? {}).sort(), ['accepted', 'errors', 'rejected'], 'body has accepted, rejected, errors');
  t.equal(r.body?.accepted, accepted, 'accepted');
  t.equal(r.body?.rejected, rejected, 'rejected');
  t.equal(r.body?.errors?.length, rejected, 'one error per rejected event');
  return r.body?.errors ?? [];
}
