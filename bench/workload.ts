import { NO_PROPERTIES, splitProperties } from '../lib/event-properties.js';
import { EVENT_ROW_COLUMNS, RowBinaryWriter, rowSpans } from '../lib/row-binary.js';
import type { EventRow } from '../schemas/rows.js';
import { uuidv7 } from '../lib/ids.js';
import { Random } from '../infra/demo/random.js';

/** A benchmark workspace: its ingestion key and the seeded customers and products it references. */
export interface BenchTenant {
  tenantId: string;
  key: string;
  /** [customer uuid, external id] of seeded customers. */
  customers: Array<[string, string]>;
  /** [product uuid, code] of seeded products. */
  products: Array<[string, string]>;
}

export interface UsageEvent {
  event_name: string;
  customer_id?: string;
  external_customer_id?: string;
  user_id?: string;
  product_code?: string;
  properties?: Record<string, unknown>;
  timestamp?: string;
}

export interface RequestBody {
  tenant: number;
  events: UsageEvent[];
  json: string;
}

// Weighted towards the few events that dominate real product analytics.
const EVENT_NAMES: Array<[string, number]> = [
  ['page_view', 30],
  ['feature_used', 20],
  ['api_call', 15],
  ['session_started', 8],
  ['search_performed', 6],
  ['report_exported', 5],
  ['dashboard_viewed', 5],
  ['file_uploaded', 4],
  ['integration_synced', 3],
  ['seat_added', 1],
  ['invite_sent', 2],
  ['setting_changed', 1],
];
const PAGES = [
  '/dashboard',
  '/reports/weekly',
  '/settings/billing',
  '/customers',
  '/customers/:id',
  '/playbooks',
  '/integrations/salesforce',
  '/search',
];
const PLANS = ['starter', 'growth', 'scale', 'enterprise'];
const BROWSERS = ['chrome', 'firefox', 'safari', 'edge'];
const FEATURES = [
  'bulk_edit',
  'csv_export',
  'ai_summary',
  'health_view',
  'segment_builder',
  'sso',
  'webhooks',
  'custom_fields',
];
const WORDS =
  'lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua'.split(
    ' ',
  );

export interface WorkloadOptions {
  bodiesPerTenant: number;
  eventsPerBody: number;
  seed: number;
  /** Share of events that reference the customer by its service UUID rather than its external id. */
  customerIdShare: number;
  now: number;
}

export class Workload {
  private readonly rnd: () => number;
  private readonly nameTotal = EVENT_NAMES.reduce((s, [, w]) => s + w, 0);

  constructor(
    private readonly tenants: BenchTenant[],
    private readonly o: WorkloadOptions,
  ) {
    // Seeded, so that two runs send the same bytes.
    const r = new Random(o.seed);
    this.rnd = () => r.next();
  }

  private pick<T>(a: readonly T[]): T {
    return a[Math.floor(this.rnd() * a.length)];
  }

  private eventName(): string {
    let r = this.rnd() * this.nameTotal;
    for (const [n, w] of EVENT_NAMES) if ((r -= w) < 0) return n;
    return EVENT_NAMES[0][0];
  }

  private text(bytes: number): string {
    let s = '';
    while (s.length < bytes) s += (s ? ' ' : '') + this.pick(WORDS);
    return s.slice(0, bytes);
  }

  /** Serialized sizes spread over 100 B–2 KB, most of them small, as product events are. */
  private properties(): Record<string, unknown> {
    const r = this.rnd();
    const target = r < 0.6 ? 100 + this.rnd() * 200 : r < 0.9 ? 300 + this.rnd() * 500 : 800 + this.rnd() * 1200;
    const p: Record<string, unknown> = {
      plan: this.pick(PLANS),
      page: this.pick(PAGES),
      duration_ms: Math.floor(this.rnd() * 30_000),
      success: this.rnd() < 0.97,
    };
    if (this.rnd() < 0.5) p.feature = this.pick(FEATURES);
    if (this.rnd() < 0.3) p.browser = { name: this.pick(BROWSERS), version: `${100 + Math.floor(this.rnd() * 30)}.0` };
    if (this.rnd() < 0.3) p.tags = [this.pick(WORDS), this.pick(WORDS), this.pick(WORDS)];
    if (this.rnd() < 0.4) p.amount = Math.round(this.rnd() * 100_000) / 100;
    const size = JSON.stringify(p).length;
    if (target > size + 12) p.note = this.text(Math.floor(target - size - 12));
    return p;
  }

  private event(t: BenchTenant): UsageEvent {
    const [id, ext] = this.pick(t.customers);
    const e: UsageEvent = { event_name: this.eventName() };
    if (this.rnd() < this.o.customerIdShare) e.customer_id = id;
    else e.external_customer_id = ext;
    e.user_id = `user-${ext.slice(-6)}-${Math.floor(this.rnd() * 20)}`;
    if (t.products.length && this.rnd() < 0.2) e.product_code = this.pick(t.products)[1];
    e.properties = this.properties();
    // Within the last three days; a few without timestamp (time of receipt).
    if (this.rnd() < 0.95) e.timestamp = new Date(this.o.now - Math.floor(this.rnd() * 3 * 86_400_000)).toISOString();
    return e;
  }

  /** bodiesPerTenant bodies for each tenant, interleaved so consecutive requests hit different tenants. */
  bodies(): RequestBody[] {
    const out: RequestBody[] = [];
    for (let i = 0; i < this.o.bodiesPerTenant; i++) {
      for (let ti = 0; ti < this.tenants.length; ti++) {
        const events: UsageEvent[] = [];
        for (let j = 0; j < this.o.eventsPerBody; j++) events.push(this.event(this.tenants[ti]));
        out.push({ tenant: ti, events, json: JSON.stringify({ events }) });
      }
    }
    return out;
  }
}

/** A message payload as ingest writes it, with where each row's ids sit (rewritten per copy). */
export interface RowsPayload {
  payload: Buffer;
  /** Byte offsets of every row's 16-byte batch_id and event_id. */
  batchAt: number[];
  eventAt: number[];
}

/** The 16 wire bytes of a UUID in RowBinary. */
export function uuidBytes(id: string): Buffer {
  const w = new RowBinaryWriter(16);
  w.uuid(id);
  return w.take();
}

/**
 * The RowBinary rows ingest would publish for these events (Cs-Format: ROW_FORMAT), stamped as
 * ingest stamps them.
 */
export function rowsPayload(t: BenchTenant, events: UsageEvent[], now: number): RowsPayload {
  const byExt = extIndex(t);
  const products = new Map(t.products.map(([id, code]) => [code, id]));
  const batchId = uuidv7(now);
  const receivedAt = Math.floor(now / 1000);
  const w = new RowBinaryWriter(events.length * 1024);
  for (const e of events) {
    const ts = e.timestamp ? Date.parse(e.timestamp) : now;
    const props = e.properties ? splitProperties(e.properties) : NO_PROPERTIES;
    w.row(EVENT_ROW_COLUMNS, {
      tenant_id: t.tenantId,
      customer_id: e.customer_id ?? byExt.get(e.external_customer_id!)!,
      event_name: e.event_name,
      ts: Math.floor(ts / 1000),
      ts_ms: ts % 1000,
      event_id: uuidv7(now),
      batch_id: batchId,
      received_at: receivedAt,
      external_customer_id: e.external_customer_id ?? '',
      external_source: 'internal',
      user_id: e.user_id ?? '',
      product_id: e.product_code ? (products.get(e.product_code) ?? '') : '',
      product_code: e.product_code ?? '',
      surface: 'a',
      external_id: '',
      properties: props.raw,
      prop_keys: props.keys,
      prop_values: props.values,
      user_email: '',
      user_external_id: '',
      prop_kinds: props.kinds,
    } satisfies EventRow);
  }
  // Where each row's ids sit, found in the bytes written rather than computed from the layout.
  const payload = w.take();
  const batch = uuidBytes(batchId);
  const spans = rowSpans(payload, EVENT_ROW_COLUMNS);
  return {
    payload,
    eventAt: spans.map((r) => payload.indexOf(uuidBytes(r.eventId), r.start)),
    batchAt: spans.map((r) => payload.indexOf(batch, r.start)),
  };
}

const extIndexes = new WeakMap<BenchTenant, Map<string, string>>();
function extIndex(t: BenchTenant): Map<string, string> {
  let m = extIndexes.get(t);
  if (!m) extIndexes.set(t, (m = new Map(t.customers.map(([id, ext]) => [ext, id]))));
  return m;
}
