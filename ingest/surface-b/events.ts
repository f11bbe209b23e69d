import type { BufferPool } from '../../lib/buffer-pool.js';
import { RowBinaryWriter } from '../../lib/row-binary.js';
import type { ErrorObject } from 'ajv';
import { isUuid } from '../../lib/ids.js';
import { UNSTORABLE_MESSAGE } from '../../lib/json.js';
import { compile } from '../../schemas/ajv.js';
import { BatchScanner, type Incoming } from '../scan.js';
import {
  MAX_EXTERNAL_ID,
  RESERVED_EVENT_NAMES,
  UsageBatchB,
  UsageEventB,
  type EventBErrorCode,
} from '../../schemas/events.js';
import { eventTime, isRejection, type Rejection, rowStamp, storedProperties, writeEventRow } from '../event-rules.js';
import type { Resolver } from '../resolver.js';

export interface EventErrorB {
  index: number;
  code: EventBErrorCode;
  message: string;
}

export interface PreparedB {
  /** Valid events: duplicates of recorded events are among them until `dedupe` drops them. */
  accepted: number;
  errors: EventErrorB[];
  /**
   * The valid events' rows in the sink's format (RowBinary), before deduplication, written as each
   * event was checked: a request holds one buffer across its PostgreSQL round trips instead of
   * a thousand row objects (which survived into V8's old generation and cost full collections).
   * A buffer of `payloads`: `release` hands it back unless it became the published payload.
   */
  rows: Buffer;
  /** Rows in `rows`. */
  rowCount: number;
  /** Per row: where it ends in `rows` (it starts where the one before ends). */
  rowEnds: Int32Array;
  /** Per row: its event name, as an index into `names`. */
  rowName: Uint16Array;
  /** The distinct event names of the rows. */
  names: string[];
  /** Per row: index into `keyCustomers`/`keyExternal`, or -1 when the event has no external_id. */
  rowKey: Int32Array;
  /** Distinct (customer_id, external_id) pairs of the valid events, first occurrence first. */
  keyCustomers: string[];
  keyExternal: string[];
  /** Rows that repeat a key seen earlier in the same batch: silently ignored, never stored. */
  inBatchDuplicates: number;
  /** Set once `rows` itself was handed on as a payload: its new owner gives it back. */
  rowsTaken: boolean;
}

export interface ContextB {
  tenantId: string;
  batchId: string;
  now: number;
  /** Oldest accepted timestamp, ms since epoch (30 days, or 2 years for backfill, plus grace). */
  oldest: number;
  /** Newest accepted timestamp (now plus clock skew). */
  newest: number;
  /** Message of a too-old timestamp. */
  tooOld: string;
  resolver: Resolver;
  /** Set when the events were scanned (`scanEvents`): every one of them passed UsageEventB. */
  checked?: boolean;
  /** Events holding text no store can hold (NUL, unpaired surrogates), found while decoding: index → field. */
  unstorable?: ReadonlyMap<number, string>;
  /** Events whose properties hold a number a float would not keep, found while decoding: index → rejection. */
  numbers?: ReadonlyMap<number, Rejection>;
  /** Where the rows' buffer comes from (the publisher's pool). */
  payloads?: BufferPool;
}

const batchCheck = compile(UsageBatchB);
const eventCheck = compile(UsageEventB);

const FIELD_CODE: Record<string, EventBErrorCode> = {
  customer_id: 'invalid_customer_id',
  event_name: 'invalid_event_name',
  timestamp: 'invalid_timestamp',
  properties: 'invalid_properties',
  external_id: 'invalid_external_id',
  user_email: 'invalid_user_email',
  user_external_id: 'invalid_user_external_id',
};
const FIELD_RULE: Record<string, string> = {
  customer_id: "customer_id is required: a string of 1 to 255 characters (the customer's service UUID)",
  event_name:
    'event_name is required: snake_case (lowercase letters and digits in words joined by single underscores, ' +
    'starting with a letter), 1 to 64 characters',
  timestamp: 'timestamp must be an ISO 8601 date-time with a time zone, e.g. 2026-05-01T12:00:00Z',
  properties: 'properties must be a JSON object',
  external_id: `external_id must be a string of 1 to ${MAX_EXTERNAL_ID} characters`,
  user_email: 'user_email must be an e-mail address of at most 320 characters',
  user_external_id: 'user_external_id must be a string of 1 to 255 characters',
};

/** The first schema failure of one event as a per-event error. */
function explain(index: number, errors: ErrorObject[] | null | undefined): EventErrorB {
  const e = errors?.[0];
  if (!e || (e.instancePath === '' && e.keyword !== 'required'))
    return { index, code: 'invalid_event', message: 'each event must be a JSON object' };
  const field =
    e.keyword === 'required' && e.instancePath === '' ? String(e.params.missingProperty) : e.instancePath.split('/')[1];
  return {
    index,
    code: FIELD_CODE[field] ?? 'invalid_event',
    message: FIELD_RULE[field] ?? `${field}: ${e.message ?? 'invalid'}`,
  };
}

export type IncomingEventB = Incoming<UsageEventB>;

/**
 * Surface B's batch straight from the body's bytes when every event passes UsageEventB as it is (ingest/scan.ts),
 * else undefined.
 */
const scanner = new BatchScanner<UsageEventB>(UsageBatchB);

export const scanEvents = (body: Buffer): IncomingEventB[] | undefined => scanner.scan(body);

/**
 * Per-event rules of surface B on one pass. The whole batch is schema-checked in one call first;
 * only when that fails is each event checked on its own, so one bad event never costs the others.
 * Accepted events come out already in the sink's row format.
 */
export async function prepareB(events: unknown[], ctx: ContextB): Promise<PreparedB> {
  const errors: EventErrorB[] = [];
  let valid: boolean[] | undefined;
  const unstorable = ctx.unstorable;
  if (!ctx.checked && (unstorable?.size || !batchCheck.check({ events }))) {
    valid = new Array<boolean>(events.length);
    for (let i = 0; i < events.length; i++) {
      const field = unstorable?.get(i);
      if (field !== undefined) {
        valid[i] = false;
        errors.push({ index: i, code: 'invalid_unicode', message: `${field || 'the event'} ${UNSTORABLE_MESSAGE}` });
        continue;
      }
      valid[i] = eventCheck.check(events[i]);
      if (!valid[i]) errors.push(explain(i, eventCheck.check.errors));
    }
  }
  const list = events as IncomingEventB[];
  const { tenantId } = ctx;
  // ids[i] is events[i]'s customer id, '' for an event that cannot have one.
  const ids = new Array<string>(list.length);
  for (let i = 0; i < list.length; i++)
    ids[i] = (!valid || valid[i]) && isUuid(list[i].customer_id) ? list[i].customer_id.toLowerCase() : '';
  const customers = await ctx.resolver.prepare(tenantId, ids);

  // About 1 KB per row for the benchmark's events: one buffer, rarely grown.
  const rows = new RowBinaryWriter(list.length * 1024, ctx.payloads);
  const rowEnds = new Int32Array(list.length);
  const rowName = new Uint16Array(list.length);
  const names: string[] = [];
  const nameAt = new Map<string, number>();
  let rowCount = 0;
  const rowKey = new Int32Array(list.length);
  const keyCustomers: string[] = [];
  const keyExternal: string[] = [];
  let keys: Map<string, number> | undefined;
  let inBatchDuplicates = 0;
  const stamp = rowStamp({ tenantId, batchId: ctx.batchId, now: ctx.now, surface: 'b' });
  for (let i = 0; i < list.length; i++) {
    if (valid && !valid[i]) continue;
    const e = list[i];
    if (RESERVED_EVENT_NAMES.has(e.event_name)) {
      errors.push({
        index: i,
        code: 'reserved_event_name',
        message:
          `${e.event_name} is generated by the service itself (integrations, health, playbooks) ` +
          'and cannot be sent',
      });
      continue;
    }
    const customerId = ids[i];
    const slot = customers.ids[i];
    if (slot < 0) {
      errors.push({
        index: i,
        code: 'unknown_customer',
        message: 'No customer with this customer_id in the workspace',
      });
      continue;
    }
    const ts = eventTime(e.timestamp, ctx);
    if (typeof ts !== 'number') {
      errors.push({ index: i, code: ts.code, message: ts.message });
      continue;
    }
    const props = ctx.numbers?.get(i) ?? storedProperties(e.properties);
    if (isRejection(props)) {
      errors.push({ index: i, code: props.code, message: props.message });
      continue;
    }
    let key = -1;
    if (e.external_id !== undefined) {
      keys ??= new Map();
      const k = `${customerId} ${e.external_id}`;
      const seen = keys.get(k);
      if (seen !== undefined) {
        // A copy inside one batch: the first one counts, the rest are ignored like any duplicate.
        inBatchDuplicates++;
        continue;
      }
      key = keyCustomers.length;
      keys.set(k, key);
      keyCustomers.push(customerId);
      keyExternal.push(e.external_id);
    }
    let name = nameAt.get(e.event_name);
    if (name === undefined) nameAt.set(e.event_name, (name = names.push(e.event_name) - 1));
    rowKey[rowCount] = key;
    rowName[rowCount] = name;
    writeEventRow(rows, stamp, {
      customer: customers.wire,
      customerAt: 16 * slot,
      eventName: e.event_name,
      ts,
      externalCustomerId: '',
      externalSource: '',
      userId: e.user_external_id ?? e.user_email ?? '',
      productId: '',
      productCode: '',
      externalId: e.external_id ?? '',
      userEmail: e.user_email ?? '',
      userExternalId: e.user_external_id ?? '',
      props,
    });
    rowEnds[rowCount++] = rows.length;
  }
  errors.sort((a, b) => a.index - b.index);
  return {
    accepted: rowCount + inBatchDuplicates,
    errors,
    rows: rows.take(),
    rowCount,
    rowEnds,
    rowName,
    names,
    rowKey,
    keyCustomers,
    keyExternal,
    inBatchDuplicates,
    rowsTaken: false,
  };
}

/**
 * The payload of the rows whose key was not recorded before (`fresh[k] = 1` says key k was new;
 * null: every row). When every row stays, the payload is `p.rows` itself, handed on (`rowsTaken`);
 * otherwise the rows that stay are copied into a buffer of `payloads`, and `p.rows` is left as it
 * was, so a transaction retried after a deadlock computes the same payload again.
 */
export function payloadOf(
  p: PreparedB,
  fresh: Uint8Array | null,
  payloads?: BufferPool,
): { payload: Buffer; stored: number; names: string[] } {
  const keep = (i: number) => !fresh || p.rowKey[i] < 0 || fresh[p.rowKey[i]] === 1;
  let stored = 0;
  let bytes = 0;
  const used = new Uint8Array(p.names.length);
  for (let i = 0; i < p.rowCount; i++) {
    if (!keep(i)) continue;
    stored++;
    bytes += p.rowEnds[i] - (i === 0 ? 0 : p.rowEnds[i - 1]);
    used[p.rowName[i]] = 1;
  }
  const names = p.names.filter((_, n) => used[n] === 1);
  if (stored === p.rowCount) {
    p.rowsTaken = true;
    return { payload: p.rows, stored, names };
  }
  const payload = payloads ? payloads.take(bytes).subarray(0, bytes) : Buffer.allocUnsafe(bytes);
  let at = 0;
  for (let i = 0; i < p.rowCount; i++) {
    if (!keep(i)) continue;
    const start = i === 0 ? 0 : p.rowEnds[i - 1];
    at += p.rows.copy(payload, at, start, p.rowEnds[i]);
  }
  return { payload, stored, names };
}

/** Hands the rows' buffer back to `payloads` once the request is done, unless it became a payload. */
export function release(p: PreparedB, payloads: BufferPool): void {
  if (!p.rowsTaken) payloads.give(p.rows);
}
