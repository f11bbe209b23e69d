import { connect, headers } from 'nats';
import { uuidv7 } from '../lib/ids.js';
import { childMain, Meter, type LoadResult } from './meter.js';
import { FORMAT_HEADER, ROW_FORMAT } from '../lib/row-binary.js';
import { rowsPayload, Workload, type BenchTenant, type WorkloadOptions } from './workload.js';

/**
 * The JetStream ceiling, run as its own process: publishes the payloads ingest would publish for
 * the benchmark's request bodies (same bytes, same headers, a fresh Nats-Msg-Id each time) from
 * one Node process with `inflight` publishes awaiting their PubAck. With `payload: 'body'` it
 * publishes the request bodies themselves, as sent: what a system that stored each request as
 * it came would publish, the smallest a stored form can be.
 */
export interface PublishConfig {
  label: string;
  natsUrl: string;
  subjectPrefix: string;
  tenants: BenchTenant[];
  workload: WorkloadOptions;
  inflight: number;
  durationS: number;
  payload: 'rows' | 'body';
}

async function run(c: PublishConfig): Promise<LoadResult> {
  const now = Date.now();
  const msgs = new Workload(c.tenants, c.workload).bodies().map((b) => {
    const t = c.tenants[b.tenant];
    return {
      subject: `${c.subjectPrefix}.${t.tenantId}`,
      payload: c.payload === 'body' ? Buffer.from(b.json) : rowsPayload(t, b.events, now).payload,
      rows: b.events.length,
      names: [...new Set(b.events.map((e) => e.event_name))].join(','),
    };
  });
  const nc = await connect({ servers: c.natsUrl, name: 'bench-publish' });
  const js = nc.jetstream();
  let inflight = 0;
  let next = 0;
  let running = true;
  const meter = new Meter(c.label, c.durationS, () => inflight);

  const worker = async () => {
    while (running) {
      const m = msgs[next];
      next = (next + 1) % msgs.length;
      const h = headers();
      h.set('Cs-Rows', String(m.rows));
      h.set('Cs-Names', m.names);
      if (c.payload === 'rows') h.set(FORMAT_HEADER, ROW_FORMAT);
      const t0 = performance.now();
      inflight++;
      try {
        await js.publish(m.subject, m.payload, { msgID: uuidv7(), headers: h, timeout: 10_000 });
        meter.ok((performance.now() - t0) * 1000, m.rows, 0, m.payload.length, 200);
      } catch (err) {
        meter.fail(String((err as Error).message ?? err).slice(0, 60));
      } finally {
        inflight--;
      }
    }
  };
  meter.start();
  const timer = setTimeout(() => (running = false), c.durationS * 1000);
  await Promise.all(Array.from({ length: c.inflight }, worker));
  clearTimeout(timer);
  const result = meter.finish();
  await nc.close();
  return result;
}

childMain(run);
