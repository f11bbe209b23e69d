import { isUuid } from '../../lib/ids.js';
import { columnsOf, FORMAT_HEADER, formatOf, type RowFormat, rowSpans, rowsWithout } from '../../lib/row-binary.js';
import type { SinkTable } from '../../schemas/rows.js';
import type { ErasedIds } from '../erasure/erased-customers.js';
import type { RowsMessage } from './held.js';

/**
 * What the writer reads of a JetStream message. The ingest tier and the outbox relay write each
 * message's rows in the sink's own format, with headers:
 * - Nats-Msg-Id: the request's id, stored as every row's batch_id;
 * - Cs-Rows: how many rows the payload holds;
 * - Cs-Format: the rows' format (lib/row-binary.ts); absent for JSONEachRow rows separated by
 *   commas, the first format, which messages written before RowBinary still have;
 * - Cs-Republished: set when the publisher sent the message again after a lost PubAck, so the
 *   stream may hold it twice.
 */

const NIL_UUID = '00000000-0000-0000-0000-000000000000';
const COMMA = Buffer.from(',');

export function rowsOf(m: RowsMessage): number {
  return Number(m.headers?.get('Cs-Rows') ?? 0);
}

export function batchIdOf(m: RowsMessage): string {
  const id = m.headers?.get('Nats-Msg-Id') ?? '';
  // batch ids are UUIDs set by our publishers; anything else can only be a foreign message.
  return isUuid(id) ? id.toLowerCase() : NIL_UUID;
}

/** May this message already be stored, in part or whole, by an earlier delivery or copy? */
export function isSuspect(m: RowsMessage): boolean {
  return m.redelivered || m.headers?.has('Cs-Republished') === true;
}

/** The message's row format; undefined for one this build cannot read (written by a newer one). */
export function formatOfMessage(m: RowsMessage): RowFormat | undefined {
  return formatOf(m.headers?.get(FORMAT_HEADER));
}

/** Messages grouped by row format, in order of first appearance: one insert per format. */
export function byFormat<M extends RowsMessage>(batch: M[]): Map<RowFormat, M[]> {
  const out = new Map<RowFormat, M[]>();
  for (const m of batch) {
    const f = formatOfMessage(m)!;
    const list = out.get(f);
    if (list) list.push(m);
    else out.set(f, [m]);
  }
  return out;
}

/**
 * The payloads of messages of one format, in order, as the chunks of one insert body; `override`
 * replaces a message's payload. JSONEachRow payloads are joined by commas, RowBinary ones simply
 * follow. Not concatenated: the chunks go to the socket as they are (one copy into the kernel),
 * where a joined buffer meant allocating and filling megabytes per insert: 28 % of the processors
 * tier's CPU while draining a backlog (bench/RESULTS.md).
 */
export function body<M extends RowsMessage>(batch: M[], format: RowFormat, override?: Map<M, Buffer>): Buffer[] {
  const parts: Buffer[] = [];
  const comma = format === 'JSONEachRow';
  for (const m of batch) {
    const o = override?.get(m);
    const d = o ?? Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength);
    if (d.byteLength === 0) continue;
    if (parts.length && comma) parts.push(COMMA);
    parts.push(d);
  }
  return parts;
}

/**
 * The payload without the rows whose event_id is in `stored`, and how many rows remain. Only for
 * a partly stored message (rare): it reads the rows, where the normal path never does.
 */
export function withoutRows(m: RowsMessage, table: SinkTable, stored: Set<string>): { payload: Buffer; rows: number } {
  const format = formatOfMessage(m);
  if (format === 'JSONEachRow') {
    const rows = JSON.parse(`[${Buffer.from(m.data).toString('utf8')}]`) as Array<{ event_id?: string }>;
    const missing = rows.filter((r) => !stored.has(String(r.event_id).toLowerCase()));
    return { payload: Buffer.from(JSON.stringify(missing).slice(1, -1)), rows: missing.length };
  }
  if (format === undefined) throw new Error(`unknown row format ${m.headers?.get(FORMAT_HEADER)}`);
  const keep = rowSpans(m.data, columnsOf(format, table)).filter((r) => !stored.has(r.eventId));
  const data = Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength);
  return { payload: Buffer.concat(keep.map((r) => data.subarray(r.start, r.end))), rows: keep.length };
}

/**
 * The payload (`data`: the message's own, or what reconcile left of it) without the rows of the
 * customers in `erased`, with the rows kept and dropped; undefined when no row is dropped. Only for
 * messages of a workspace that has erased customers: it reads every row.
 */
export function withoutCustomers(
  m: RowsMessage,
  data: Uint8Array,
  table: SinkTable,
  erased: ErasedIds,
): { payload: Buffer; rows: number; dropped: number } | undefined {
  const format = formatOfMessage(m);
  if (format === 'JSONEachRow') {
    const rows = JSON.parse(`[${Buffer.from(data).toString('utf8')}]`) as Array<{ customer_id?: string }>;
    const kept = rows.filter((r) => !erased.text.has(String(r.customer_id).toLowerCase()));
    if (kept.length === rows.length) return undefined;
    const payload = Buffer.from(JSON.stringify(kept).slice(1, -1));
    return { payload, rows: kept.length, dropped: rows.length - kept.length };
  }
  if (format === undefined) throw new Error(`unknown row format ${m.headers?.get(FORMAT_HEADER)}`);
  const r = rowsWithout(data, columnsOf(format, table), 'customer_id', erased.wire);
  if (r.dropped === 0) return undefined;
  const b = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return { payload: Buffer.concat(r.ranges.map(([s, e]) => b.subarray(s, e))), rows: r.kept, dropped: r.dropped };
}
