import { connect, headers } from 'nats';
import { uuidv7 } from '../lib/ids.js';
import { subjects } from '../lib/nats.js';
import { childMain } from './meter.js';
import { FORMAT_HEADER, ROW_FORMAT } from '../lib/row-binary.js';
import { rowsPayload, uuidBytes, Workload, type BenchTenant, type WorkloadOptions } from './workload.js';

/**
 * Publishes a backlog straight into EVENTS, as its own process: `messages` messages exactly as
 * ingest would publish them (rows in ClickHouse's format, Cs-Rows and Cs-Names headers), with
 * `inflight` PubAcks outstanding. No ingest tier runs, so the backlog builds as fast as
 * JetStream takes it and the run measures only what processors does with it.
 */
export interface BacklogConfig {
  natsUrl: string;
  tenants: BenchTenant[];
  workload: WorkloadOptions;
  messages: number;
  inflight: number;
}

export interface BacklogResult {
  messages: number;
  rows: number;
  /** Payload bytes of the acknowledged messages (rows as stored in JetStream, headers excluded). */
  bytes: number;
  seconds: number;
  /** Publishes that failed three times under the same message id (nothing of them was stored). */
  failed: number;
}

interface Template {
  subject: string;
  payload: Buffer;
  rows: number;
  names: string;
  /** Byte offsets of the 16-byte batch_id and event_id values, rewritten per message. */
  batchAt: number[];
  eventAt: number[];
}

async function run(c: BacklogConfig): Promise<BacklogResult> {
  const now = Date.now();
  const templates: Template[] = new Workload(c.tenants, c.workload).bodies().map((b) => {
    const t = c.tenants[b.tenant];
    const { payload, batchAt, eventAt } = rowsPayload(t, b.events, now);
    const tpl = {
      subject: subjects.usage(t.tenantId),
      payload,
      rows: b.events.length,
      names: [...new Set(b.events.map((e) => e.event_name))].join(','),
      batchAt,
      eventAt,
    };
    if (tpl.batchAt.length !== tpl.rows || tpl.eventAt.length !== tpl.rows)
      throw new Error(
        `row template of tenant ${t.tenantId}: ${tpl.batchAt.length} batch ids, ${tpl.eventAt.length} event ids for ${tpl.rows} rows`,
      );
    return tpl;
  });
  const nc = await connect({ servers: c.natsUrl, name: 'bench-backlog', noAsyncTraces: true });
  const js = nc.jetstream();
  let next = 0;
  let messages = 0;
  let rows = 0;
  let bytes = 0;
  let failed = 0;
  const t0 = performance.now();
  let shown = t0;

  const worker = async () => {
    while (next < c.messages) {
      const tpl = templates[next++ % templates.length];
      // The writer reconciles by batch_id = Nats-Msg-Id, and every row gets its own event id, as from ingest.
      const id = uuidv7();
      const payload = Buffer.from(tpl.payload);
      const batch = uuidBytes(id);
      for (const at of tpl.batchAt) batch.copy(payload, at);
      for (const at of tpl.eventAt) uuidBytes(uuidv7(now)).copy(payload, at);
      const h = headers();
      h.set(FORMAT_HEADER, ROW_FORMAT);
      h.set('Cs-Rows', String(tpl.rows));
      h.set('Cs-Names', tpl.names);
      let ok = false;
      for (let attempt = 0; attempt < 3 && !ok; attempt++) {
        try {
          await js.publish(tpl.subject, payload, { msgID: id, headers: h, timeout: 30_000 });
          ok = true;
        } catch (err) {
          if (attempt === 2)
            process.stderr.write(
              `backlog: publish failed 3 times: ${String((err as Error).message ?? err).slice(0, 200)}\n`,
            );
        }
      }
      if (!ok) {
        failed++;
        continue;
      }
      messages++;
      rows += tpl.rows;
      bytes += payload.length;
      if (performance.now() - shown > 5000) {
        shown = performance.now();
        process.stderr.write(
          `backlog: ${messages.toLocaleString('en-US')} of ${c.messages.toLocaleString('en-US')} messages in EVENTS\n`,
        );
      }
    }
  };
  await Promise.all(Array.from({ length: c.inflight }, worker));
  const seconds = (performance.now() - t0) / 1000;
  await nc.close();
  return { messages, rows, bytes, seconds: Math.round(seconds * 10) / 10, failed };
}

childMain<BacklogConfig, BacklogResult>(run);
