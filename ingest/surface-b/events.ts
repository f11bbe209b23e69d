import type { BufferPool } from '../../lib/buffer-pool.js';
import { EVENT_ROW_COLUMNS, RowBinaryWriter } from '../../lib/row-binary.js';
import type { ErrorObject } from 'ajv';
import { isUuid } from '../../lib/ids.js';
import { UNSTORABLE_MESSAGE } from '../../lib/json.js';
import { compile } from '../../schemas/ajv.js';
import {
  MAX_EXTERNAL_ID,
  RESERVED_EVENT_NAMES,
  UsageBatchB,
  UsageEventB,
  type EventBErrorCode,
} from '../../schemas/events.js';
import { eventRow, eventTime, isRejection, storedProperties } from '../event-rules.js';
import type { Resolver } from '../resolver.js';
import type { EventRow } from '../../schemas/rows.js';

export interface EventErrorB {
  index: number;
  code: EventBErrorCode;
  message: string;
}

export interface PreparedB {
  /** Valid events: duplicates of recorded events are among them until `dedupe` drops them. */
  accepted: number;
  errors: EventErrorB[];
  /** Valid events in the sink's row format, before deduplication. */
  rows: EventRow[];
  /** Per row: index into `keyCustomers`/`keyExternal`, or -1 when the event has no external_id. */
  rowKey: Int32Array;
  /** Distinct (customer_id, external_id) pairs of the valid events, first occurrence first. */
  keyCustomers: string[];
  keyExternal: string[];
  /** Rows that repeat a key seen earlier in the same batch: silently ignored, never stored. */
  inBatchDuplicates: number;
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
  /** Events holding text no store can hold (NUL, unpaired surrogates), found while decoding: index → field. */
  unstorable?: ReadonlyMap<number, string>;
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
    'event_name is required: snake_case (lowercase letters and digits in words joined by single underscores, starting with a letter), 1 to 64 characters',
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

/**
 * Per-event rules of surface B on one pass. The whole batch is schema-checked in one call first;
 * only when that fails is each event checked on its own, so one bad event never costs the others.
 * Accepted events come out already in the sink's row format.
 */
export async function prepareB(events: unknown[], ctx: ContextB): Promise<PreparedB> {
  const errors: EventErrorB[] = [];
  let valid: boolean[] | undefined;
  const unstorable = ctx.unstorable;
  if (unstorable?.size || !batchCheck.check({ events })) {
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
  const list = events as UsageEventB[];
  const { tenantId } = ctx;
  const ids: string[] = [];
  for (let i = 0; i < list.length; i++)
    if ((!valid || valid[i]) && isUuid(list[i].customer_id)) ids.push(list[i].customer_id.toLowerCase());
  const customers = await ctx.resolver.prepare(tenantId, ids, []);

  const rows: EventRow[] = [];
  const rowKey: number[] = [];
  const keyCustomers: string[] = [];
  const keyExternal: string[] = [];
  let keys: Map<string, number> | undefined;
  let inBatchDuplicates = 0;
  const stamp = { tenantId, batchId: ctx.batchId, now: ctx.now, surface: 'b' as const };
  for (let i = 0; i < list.length; i++) {
    if (valid && !valid[i]) continue;
    const e = list[i];
    if (RESERVED_EVENT_NAMES.has(e.event_name)) {
      errors.push({
        index: i,
        code: 'reserved_event_name',
        message: `${e.event_name} is generated by the service itself (integrations, health, playbooks) and cannot be sent`,
      });
      continue;
    }
    const customerId = e.customer_id.toLowerCase();
    if (!isUuid(customerId) || !customers.has(customerId)) {
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
    const props = storedProperties(e.properties as Record<string, unknown> | undefined);
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
    rowKey.push(key);
    rows.push(
      eventRow(stamp, {
        customerId,
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
      }),
    );
  }
  errors.sort((a, b) => a.index - b.index);
  return {
    accepted: rows.length + inBatchDuplicates,
    errors,
    rows,
    rowKey: Int32Array.from(rowKey),
    keyCustomers,
    keyExternal,
    inBatchDuplicates,
  };
}

/** Drops the rows whose key was already recorded; `fresh[k]` says key k was new. Returns the RowBinary payload. */
export function payloadOf(
  p: PreparedB,
  fresh: Uint8Array | null,
  payloads?: BufferPool,
): { payload: Buffer; stored: number; names: string[] } {
  const w = new RowBinaryWriter(p.rows.length * 1024, payloads);
  const names = new Set<string>();
  let stored = 0;
  for (let i = 0; i < p.rows.length; i++) {
    if (fresh && p.rowKey[i] >= 0 && fresh[p.rowKey[i]] !== 1) continue;
    const r = p.rows[i];
    w.row(EVENT_ROW_COLUMNS, r);
    names.add(r.event_name);
    stored++;
  }
  return { payload: w.take(), stored, names: [...names] };
}
