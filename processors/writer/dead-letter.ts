import { type JetStreamClient, headers as natsHeaders } from 'nats';
import { subjects } from '../../lib/nats.js';
import type { RowsMessage } from './held.js';

/**
 * Publishes a message ClickHouse can never take to dlq.<consumer>.<subject>, with its original
 * headers and the reason. The copy's msgID is derived from the original's stream sequence, so a
 * crash between publishing and acking still leaves one copy.
 */
export async function publishDeadLetter(
  js: JetStreamClient,
  consumer: string,
  m: RowsMessage,
  reason: string,
): Promise<void> {
  const h = natsHeaders();
  if (m.headers) for (const [k, v] of m.headers) for (const x of v) h.append(k, x);
  h.set('Cs-Dlq-Reason', reason.replace(/[\r\n]+/g, ' '));
  h.set('Cs-Dlq-Consumer', consumer);
  h.set('Cs-Original-Subject', m.subject);
  h.set('Cs-Original-Seq', String(m.seq));
  h.set('Cs-Original-Msg-Id', m.headers?.get('Nats-Msg-Id') ?? '');
  await js.publish(subjects.dlq(consumer, m.subject), m.data, { headers: h, msgID: `dlq-${consumer}-${m.seq}` });
}
