import { randomUUID } from 'node:crypto';
import { splitProperties } from '../../lib/event-properties.js';
import { BILLING_ROW_COLUMNS, EVENT_ROW_COLUMNS, ROW_FORMAT, RowBinaryWriter } from '../../lib/row-binary.js';
import type { Logger } from '../../lib/logger.js';
import type { ClickHouse } from '../../processors/clickhouse.js';
import type { Scored } from '../../processors/health/score.js';
import { historyRows, insertHistory } from '../../processors/health/store.js';
import { ValueBatch } from '../../processors/metrics/store.js';
import type { BillingRow, EventRow } from '../../schemas/rows.js';
import { Random } from '../../infra/demo/random.js';

/**
 * One workspace of the event store, the same on both engines: stored through the product's own
 * write paths (the writer's RowBinary inserts of csp.events and csp.billing_events, which feed the
 * materialized views; the health history and metric value inserts in JSONEachRow), through the
 * twin (twin.ts), so 18.16 and 26 receive the same bytes. Deterministic for a seed, relative to now.
 *
 * - 30 customers, about 3,000 events over 90 days (some today, some within seconds of midnight),
 *   seven product event names and one generated (surface 'system'), users and no user;
 * - properties of every kind: strings (empty, unicode, quotes and backslashes), integers, floats
 *   (negative, tiny, 2^53 - 1), booleans, null, objects, arrays, absent keys; half the rows in the
 *   current form (prop_kinds, `properties` empty), half as older rows (raw JSON, no kinds);
 * - surface B rows with external ids (csp.event_keys);
 * - billing events of every type and status, amounts NULL, zero, negative and fractional;
 * - health history over 20 days, two calculations on some days; metric values of three metrics,
 *   NULL values included, recomputed.
 * Six customers stop using the product in the last 10 days (usage_drop alerts).
 */

export const NAMES = ['login', 'report_exported', 'feature_used', 'invoice_viewed', 'seat_added', 'api_call', 'search'];
export const GENERATED = 'email_sent';
export const USERS = ['u1', 'u2', 'u3', 'u4', 'u5', 'u6', 'u7', 'u8', 'u9', 'u10', 'u11', 'u12'];
const BILLING_TYPES = ['payment_succeeded', 'payment_failed', 'invoice_disputed', 'dunning_attempt', 'refund_issued'];
const DAY_S = 86_400;

export interface Fixture {
  tenantId: string;
  customers: string[];
  /** Customers whose usage stops 10 days ago. */
  dropped: string[];
  metricIds: string[];
  now: Date;
  events: number;
}

/** A deterministic generator: the demo's (mulberry32), as a function. */
function random(seed: number): () => number {
  const r = new Random(seed);
  return () => r.next();
}

function properties(r: () => number, i: number): Record<string, unknown> {
  const all: Record<string, unknown> = {
    plan: ['pro', 'starter', 'enterprise', ''][i % 4],
    seats: Math.floor(r() * 50),
    amount: [12.5, -3.25, 1e-7, 123456.789, 0, 9007199254740991][i % 6],
    ratio: r(),
    active: r() < 0.5,
    note: null,
    meta: { a: i % 3, b: ['x', { c: true }] },
    tags: i % 5 === 0 ? [] : ['x', 'y'],
    unicode: 'héllo ✓ 日本',
    quote: `it's "q" \\ ${i % 3}`,
    format: ['pdf', 'csv', 'xlsx'][i % 3],
  };
  const keys = Object.keys(all).filter(() => r() < 0.7);
  return Object.fromEntries(keys.map((k) => [k, all[k]]));
}

function eventRows(f: Fixture, r: () => number, n: number): EventRow[] {
  const nowS = Math.floor(f.now.getTime() / 1000);
  const midnight = nowS - (nowS % DAY_S);
  const rows: EventRow[] = [];
  let batch = randomUUID();
  for (let i = 0; i < n; i++) {
    if (i % 500 === 0) batch = randomUUID();
    const c = Math.floor(r() * f.customers.length);
    const customer = f.customers[c];
    const dropped = f.dropped.includes(customer);
    // Recent days weigh more; a dropped customer has nothing in its last 10 days.
    let age = Math.floor(r() ** 1.5 * 90 * DAY_S);
    if (dropped && age < 10 * DAY_S) age += 10 * DAY_S;
    let ts = nowS - age;
    if (i % 97 === 0) ts = midnight - DAY_S * (i % 30) - (i % 2); // at or one second before a midnight
    const generated = i % 41 === 0;
    // An older row (odd i): its raw JSON is the whole truth, keys and values as they were split then.
    const current = i % 2 === 0;
    const legacy = current ? '' : JSON.stringify(properties(random(i), i));
    const p = splitProperties(current ? properties(r, i) : (JSON.parse(legacy) as Record<string, unknown>));
    const surfaceB = !generated && i % 3 === 0;
    rows.push({
      tenant_id: f.tenantId,
      customer_id: customer,
      event_name: generated ? GENERATED : NAMES[Math.floor(r() ** 2 * NAMES.length)],
      ts,
      ts_ms: Math.floor(r() * 1000),
      event_id: randomUUID(),
      batch_id: batch,
      received_at: ts + 1,
      external_customer_id: `cust-${String(c + 1).padStart(3, '0')}`,
      external_source: c % 2 ? 'internal' : 'salesforce',
      user_id: r() < 0.15 ? '' : USERS[Math.floor(r() * USERS.length)],
      product_id: r() < 0.5 ? '' : `p${i % 4}`,
      product_code: i % 7 === 0 ? 'CODE-1' : '',
      surface: generated ? 'system' : surfaceB ? 'b' : 'a',
      external_id: surfaceB ? `ext-${i}` : '',
      properties: current ? p.raw : legacy,
      prop_keys: p.keys,
      prop_values: p.values,
      user_email: surfaceB ? `user${i % 9}@example.com` : '',
      user_external_id: surfaceB ? `ue-${i % 9}` : '',
      prop_kinds: current ? p.kinds : '',
    });
  }
  return rows;
}

function billingRows(f: Fixture, r: () => number, n: number): BillingRow[] {
  const nowS = Math.floor(f.now.getTime() / 1000);
  const batch = randomUUID();
  return Array.from({ length: n }, (_, i) => {
    const ts = nowS - Math.floor(r() * 90 * DAY_S);
    return {
      tenant_id: f.tenantId,
      customer_id: f.customers[i % f.customers.length],
      event_type: BILLING_TYPES[Math.floor(r() * BILLING_TYPES.length)],
      amount: [null, 0, 99.99, -10, 1234.5, 0.01][i % 6],
      currency: i % 3 ? 'USD' : 'EUR',
      status: ['pending', 'resolved', 'failed'][i % 3],
      ts,
      ts_ms: i % 1000,
      event_id: randomUUID(),
      batch_id: batch,
      received_at: ts + 2,
    };
  });
}

function rowBinary(columns: typeof EVENT_ROW_COLUMNS, rows: Array<EventRow | BillingRow>): Buffer {
  const w = new RowBinaryWriter(1 << 20);
  for (const row of rows) w.row(columns, row as unknown as Record<string, unknown>);
  return w.take();
}

export async function loadFixture(ch: ClickHouse, log: Logger, seed = 52): Promise<Fixture> {
  const r = random(seed);
  const customers = Array.from({ length: 30 }, () => randomUUID());
  const f: Fixture = {
    tenantId: randomUUID(),
    customers,
    dropped: customers.slice(0, 6),
    metricIds: [randomUUID(), randomUUID(), randomUUID()],
    now: new Date(),
    events: 3000,
  };
  const events = eventRows(f, r, f.events);
  // Two inserts, as two writer batches would be.
  for (const part of [events.slice(0, 1800), events.slice(1800)])
    await ch.insert('events', rowBinary(EVENT_ROW_COLUMNS, part), `fixture-${randomUUID()}`, ROW_FORMAT);
  const billing = billingRows(f, r, 240);
  await ch.insert('billing_events', rowBinary(BILLING_ROW_COLUMNS, billing), `fixture-${randomUUID()}`, ROW_FORMAT);

  // Event property keys of events stored before the key sets existed (the legacy table readers add).
  const legacy = NAMES.slice(0, 3)
    .map((name, i) => JSON.stringify({ tenant_id: f.tenantId, event_name: name, key: `legacy_${i}`, events: 5 + i }))
    .join('\n');
  await ch.insert('event_property_keys', Buffer.from(`${legacy}\n`), `fixture-${randomUUID()}`);

  // Health history: 20 days, a second, later calculation on every fifth day.
  for (let d = 19; d >= 0; d--) {
    const at = new Date(f.now.getTime() - d * DAY_S * 1000);
    const score = Uint8Array.from(customers, (_, i) => (i * 7 + d * 3) % 101);
    const status = [...score].map((s) => (s >= 70 ? 'healthy' : s < 40 ? 'at_risk' : 'neutral')) as Scored['status'];
    await insertHistory(
      ch,
      log,
      historyRows(f.tenantId, customers, { score, status, dimensions: [] }, at),
      randomUUID(),
    );
    if (d % 5 === 0) {
      // An earlier calculation of the same day, stored after: argMax over calculated_at must not take it.
      const earlier = new Date(at.getTime() - 3600_000);
      const again: Scored = { score: score.map((s) => 100 - s), status: status.map(() => 'neutral'), dimensions: [] };
      await insertHistory(ch, log, historyRows(f.tenantId, customers, again, earlier), randomUUID());
    }
  }

  // Metric values: three metrics, computed three times over daily periods, NULL for some customers.
  const values = new ValueBatch(ch, log, `fixture-${randomUUID()}`);
  for (let k = 0; k < 3; k++)
    for (const [m, metricId] of f.metricIds.entries()) {
      const from = new Date(Math.floor(f.now.getTime() / 86_400_000 - 1 - k) * 86_400_000);
      const to = new Date(from.getTime() + 86_400_000 - 1000);
      const computedAt = new Date(f.now.getTime() - (3 - k) * 60_000);
      const v = customers.map((_, i) => ((i + m + k) % 7 === 0 ? null : (i * 1.5 + m) / (k + 1)));
      await values.add({ tenantId: f.tenantId, metricId, from, to, computedAt }, customers, v);
      await values.add(
        { tenantId: f.tenantId, metricId, from, to, computedAt },
        ['00000000-0000-0000-0000-000000000000'],
        [m + k],
      );
    }
  await values.flush();
  return f;
}
