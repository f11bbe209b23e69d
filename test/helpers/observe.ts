import type { ConsumerInfo, JetStreamManager } from 'nats';
import { sampleSum } from '../../lib/prometheus.js';
import { ch, type Teardowns, urls, waitFor } from './stack.js';

/**
 * What tests poll instead of sleeping: a tier's /metrics, the writers' JetStream consumers and the
 * inserts running in ClickHouse.
 */

/** A sample of a tier's /metrics, summed over the label sets that have `labels`; 0 before its first sample. */
export async function metric(tierUrl: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  return sampleSum(await (await fetch(`${tierUrl}/metrics`)).text(), name, labels);
}

/** A JetStream manager on the test stack's nats-server (or `url`'s), closed at teardown. */
export async function jetstream(t: Teardowns, url = urls.NATS_URL): Promise<JetStreamManager> {
  // Loaded here: most files that observe never talk to NATS (a tenth of a CPU-second to load).
  const { connect } = await import('nats');
  const nc = await connect({ servers: url, name: 'test-observe' });
  t.teardown(() => nc.close());
  return nc.jetstreamManager();
}

export const consumerInfo = async (jsm: JetStreamManager, consumer: string): Promise<ConsumerInfo> =>
  jsm.consumers.info((await import('../../lib/nats.js')).STREAM_EVENTS, consumer);

/**
 * When the consumer last delivered a message, in ms. nats-server sends a timestamp (the client's
 * type says nanoseconds); without one, now: a hold measured from it is never overestimated.
 */
export function lastDelivery(c: ConsumerInfo): number {
  const at = c.delivered.last_active as unknown;
  const ms = typeof at === 'string' ? Date.parse(at) : Number.NaN;
  return Number.isFinite(ms) ? ms : Date.now();
}

/** Inserts into csp.<table> running in ClickHouse now, whichever process sent them. */
export async function runningInserts(table: string): Promise<number> {
  const [r] = await ch<{ c: string }>(
    `SELECT count() AS c FROM system.processes WHERE query LIKE 'INSERT INTO csp.${table} %'`,
  );
  return Number(r.c);
}

/**
 * Resolves once nothing more can land in csp.<table> from what was published so far: the writer's
 * consumer has delivered every message and had each acknowledged (a writer acks only after its
 * insert), and no insert into the table is still running in ClickHouse (one a killed writer left
 * behind would finish on its own). Until then a late duplicate could still appear.
 */
export async function writersIdle(
  jsm: JetStreamManager,
  consumer: string,
  table: string,
  timeoutMs = 60_000,
): Promise<void> {
  await waitFor(
    `${consumer}: every message acknowledged and no insert into csp.${table} running`,
    async () => {
      const c = await consumerInfo(jsm, consumer);
      return c.num_pending === 0 && c.num_ack_pending === 0 && (await runningInserts(table)) === 0;
    },
    timeoutMs,
    200,
  );
}
