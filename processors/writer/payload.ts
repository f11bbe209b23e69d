import type { JsMsg } from 'nats';
import { isUuid } from '../../lib/ids.js';

/**
 * What the writer reads of a JetStream message. The ingest tier (and the outbox relay) write each
 * message as ClickHouse JSONEachRow rows separated by commas, with headers:
 * - Nats-Msg-Id: the request's id, stored as every row's batch_id;
 * - Cs-Rows: how many rows the payload holds;
 * - Cs-Republished: set when the publisher sent the message again after a lost PubAck, so the
 *   stream may hold it twice.
 */

const NIL_UUID = '00000000-0000-0000-0000-000000000000';
const COMMA = Buffer.from(',');

export function rowsOf(m: JsMsg): number {
  return Number(m.headers?.get('Cs-Rows') ?? 0);
}

export function batchIdOf(m: JsMsg): string {
  const id = m.headers?.get('Nats-Msg-Id') ?? '';
  // batch ids are UUIDs set by our publishers; anything else can only be a foreign message.
  return isUuid(id) ? id.toLowerCase() : NIL_UUID;
}

/** May this message already be stored, in part or whole, by an earlier delivery or copy? */
export function isSuspect(m: JsMsg): boolean {
  return m.redelivered || m.headers?.has('Cs-Republished') === true;
}

/** Concatenates payloads into one insert body; `override` replaces a message's payload. */
export function body(batch: JsMsg[], override?: Map<JsMsg, Buffer>): Buffer {
  const parts: Buffer[] = [];
  let size = 0;
  for (const m of batch) {
    const o = override?.get(m);
    const d = o ?? Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength);
    if (d.byteLength === 0) continue;
    if (size) {
      parts.push(COMMA);
      size += 1;
    }
    parts.push(d);
    size += d.byteLength;
  }
  return Buffer.concat(parts, size);
}

/**
 * The payload without the rows whose event_id is in `stored`, and how many rows remain. Only for
 * a partly stored message (rare): it parses the rows, where the normal path never does.
 */
export function withoutRows(m: JsMsg, stored: Set<string>): { payload: Buffer; rows: number } {
  const rows = JSON.parse(`[${Buffer.from(m.data).toString('utf8')}]`) as Array<{ event_id?: string }>;
  const missing = rows.filter((r) => !stored.has(String(r.event_id).toLowerCase()));
  return { payload: Buffer.from(JSON.stringify(missing).slice(1, -1)), rows: missing.length };
}
