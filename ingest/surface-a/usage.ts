import type { BufferPool } from '../../lib/buffer-pool.js';
import { isUuid } from '../../lib/ids.js';
import { RESERVED_EVENT_NAMES } from '../../schemas/events.js';
import { MAX_EVENT_AGE_MS, UsageBatchA, type UsageEventA } from '../../schemas/ingest.js';
import { RowBinaryWriter } from '../../lib/row-binary.js';
import {
  blankRowFields,
  eventTime,
  isRejection,
  type Rejection,
  rowStamp,
  storedProperties,
  writeEventRow,
} from '../event-rules.js';
import { unprocessable, type Detail } from './errors.js';
import type { Resolver } from '../resolver.js';
import { BatchScanner, type Incoming } from '../scan.js';

export type EventErrorCode =
  | 'unknown_customer'
  | 'unknown_external_customer'
  | 'invalid_customer_id'
  | 'invalid_timestamp'
  | 'properties_too_large'
  | 'invalid_properties'
  | 'invalid_number'
  | 'reserved_event_name';

export interface EventError {
  index: number;
  event_name: string;
  code: EventErrorCode;
  message: string;
}

export interface Prepared {
  /** Accepted events as csp.events rows in RowBinary (lib/row-binary.ts). */
  rows: Buffer;
  accepted: number;
  errors: EventError[];
  /** Distinct event names of the accepted events, for the event catalog. */
  names: string[];
}

export interface UsageContext {
  tenantId: string;
  batchId: string;
  now: number;
  /** Timestamps up to this far ahead of the server clock are accepted (clock skew). */
  futureSkewMs: number;
  /** Grace added to the 30-day window for clock skew and transit time. */
  ageGraceMs: number;
  resolver: Resolver;
  /** Buffers for the rows (the publisher's; back there after the PubAck). */
  payloads?: BufferPool;
  /** Events whose properties hold a number a float would not keep, found while decoding: index → rejection. */
  numbers?: ReadonlyMap<number, Rejection>;
}

export type IncomingUsage = Incoming<UsageEventA>;

/**
 * Surface A's usage batch straight from the body's bytes when UsageBatchA accepts it as it is (ingest/scan.ts), else
 * undefined.
 */
const usageBatch = new BatchScanner<UsageEventA>(UsageBatchA);

export const scanUsage = (body: Buffer): IncomingUsage[] | undefined => usageBatch.scan(body);

/** Rule 1: an event with neither reference fails the whole request. */
function requireReferences(events: IncomingUsage[]): void {
  const details: Detail[] = [];
  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    if (e.customer_id === undefined && e.external_customer_id === undefined) {
      details.push({
        type: 'customer_reference_required',
        loc: ['body', 'events', i],
        msg: 'Each event needs customer_id or external_customer_id',
        input: null,
      });
    }
  }
  if (details.length) throw unprocessable(details);
}

/**
 * Per-event rules of surface A, on one pass: customer reference (rules 1–3), timestamp window,
 * properties size, product attribution. Accepted events come out already in the sink's row
 * format, stamped with tenant, event id, batch id and the resolved customer.
 */
export async function prepareUsage(events: IncomingUsage[], ctx: UsageContext): Promise<Prepared> {
  requireReferences(events);
  const { tenantId, resolver } = ctx;
  const ids: string[] = [];
  const srcs: string[] = [];
  const exts: string[] = [];
  let products = false;
  for (const e of events) {
    if (e.customer_id !== undefined) {
      ids.push(isUuid(e.customer_id) ? e.customer_id.toLowerCase() : '');
    } else {
      srcs.push(e.external_source ?? 'internal');
      exts.push(e.external_customer_id!);
    }
    if (e.product_id !== undefined || e.product_code !== undefined) products = true;
  }
  const [customers] = await Promise.all([
    resolver.prepare(tenantId, ids, srcs, exts),
    products ? resolver.prepareProducts(tenantId) : undefined,
  ]);

  // About 1 KB per row for the benchmark's events (577 B sent): one buffer, rarely grown.
  const rows = new RowBinaryWriter(events.length * 1024, ctx.payloads);
  let accepted = 0;
  const errors: EventError[] = [];
  const names = new Set<string>();
  const stamp = rowStamp({ tenantId, batchId: ctx.batchId, now: ctx.now, surface: 'a' });
  const window = {
    now: ctx.now,
    oldest: ctx.now - MAX_EVENT_AGE_MS - ctx.ageGraceMs,
    newest: ctx.now + ctx.futureSkewMs,
    tooOld: 'timestamp is more than 30 days in the past',
  };
  // One row's fields, filled in for each accepted event in turn (an object per event was garbage).
  const row = blankRowFields(customers.wire);
  let i = 0;
  // The reference of events[i] is ids[id] or customers.external[ext] (each in the events' order).
  let id = 0;
  let ext = 0;
  let e: IncomingUsage;
  const fail = (code: EventErrorCode, message: string) =>
    errors.push({ index: i, event_name: e.event_name, code, message });
  for (; i < events.length; i++) {
    e = events[i];
    const at = e.customer_id === undefined ? ext++ : id++;
    if (RESERVED_EVENT_NAMES.has(e.event_name)) {
      fail(
        'reserved_event_name',
        `${e.event_name} is generated by the service itself (integrations, health, playbooks) and cannot be sent`,
      );
      continue;
    }
    let slot: number;
    if (e.customer_id !== undefined) {
      if (ids[at] === '') {
        fail('invalid_customer_id', 'customer_id is not a valid UUID');
        continue;
      }
      slot = customers.ids[at];
      if (slot < 0) {
        fail('unknown_customer', 'No customer with this customer_id in the workspace');
        continue;
      }
    } else {
      slot = customers.external[at];
      if (slot < 0) {
        fail(
          'unknown_external_customer',
          `No customer with external_source "${e.external_source ?? 'internal'}" and this external_customer_id`,
        );
        continue;
      }
    }
    const ts = eventTime(e.timestamp, window);
    if (typeof ts !== 'number') {
      fail(ts.code, ts.message);
      continue;
    }
    const props = ctx.numbers?.get(i) ?? storedProperties(e.properties);
    if (isRejection(props)) {
      fail(props.code, props.message);
      continue;
    }
    names.add(e.event_name);
    accepted++;
    row.customerAt = 16 * slot;
    row.eventName = e.event_name;
    row.ts = ts;
    row.externalCustomerId = e.external_customer_id ?? '';
    row.externalSource = e.external_source ?? 'internal';
    row.userId = e.user_id ?? '';
    row.productId = resolver.product(tenantId, e.product_id, e.product_code);
    row.productCode = e.product_code ?? '';
    row.props = props;
    writeEventRow(rows, stamp, row);
  }
  return { rows: rows.take(), accepted, errors, names: [...names] };
}
