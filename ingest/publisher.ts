import { headers, type JetStreamClient } from 'nats';
import { IngestError } from './errors.js';

/**
 * One JetStream message per request, acknowledged by the stream before we answer. If the PubAck
 * does not come in time we publish again with the same Nats-Msg-Id: the stream's duplicate window
 * answers "duplicate" when the first copy was stored, so the request is stored once or not at all.
 */
export class Publisher {
  constructor(
    private readonly js: JetStreamClient,
    private readonly timeoutMs: number,
    private readonly attempts = 3,
  ) {}

  async publish(subject: string, payload: Uint8Array, msgId: string, meta: Record<string, string>): Promise<void> {
    const h = headers();
    for (const k in meta) h.set(k, meta[k]);
    let last: unknown;
    for (let attempt = 0; attempt < this.attempts; attempt++) {
      // A copy sent after a lost PubAck is marked: if a nats-server restart forgot the first copy's
      // id, the stream holds both, and the writer checks a marked copy against what is stored.
      if (attempt > 0) h.set('Cs-Republished', String(attempt));
      try {
        await this.js.publish(subject, payload, { msgID: msgId, headers: h, timeout: this.timeoutMs });
        return;
      } catch (err) {
        last = err;
        const text = String((err as Error)?.message ?? err);
        if (/maximum (bytes|messages) exceeded|insufficient resources|storage/i.test(text)) {
          throw new IngestError(503, `event store is full: ${text}`, [], 5);
        }
        if (!/timeout|TIMEOUT|503|no responders|disconnect|closed/i.test(text)) break;
      }
    }
    const e = new IngestError(500, `JetStream did not acknowledge: ${String((last as Error)?.message ?? last)}`);
    (e as { cause?: unknown }).cause = last;
    throw e;
  }
}
