import type { ConsumerMessages, JetStreamClient, JsMsg } from 'nats';
import type { Logger } from '../lib/logger.js';

/**
 * The loop of a consumer that handles messages in batches (the event catalog, the webhook
 * fan-out): messages are gathered as they come and handed to `write` every `kickMs` or once
 * `maxMessages` are waiting (then pulling pauses until the batch is written); batches are written
 * one after the other. `write` acks the messages it handled, through retryThenAck. stop() stops
 * pulling and writes what was gathered.
 */
export class BatchedConsumer {
  private batch: JsMsg[] = [];
  private messages?: ConsumerMessages;
  private loop?: Promise<void>;
  private timer?: NodeJS.Timeout;
  private writing: Promise<void> = Promise.resolve();
  private stopping = false;

  constructor(
    private readonly js: JetStreamClient,
    private readonly stream: string,
    private readonly consumer: string,
    private readonly o: { maxMessages: number; kickMs: number; log: Logger },
    private readonly write: (batch: JsMsg[]) => Promise<void>,
  ) {}

  async start(): Promise<void> {
    const c = await this.js.consumers.get(this.stream, this.consumer);
    this.messages = await c.consume({ max_messages: this.o.maxMessages });
    this.timer = setInterval(() => this.kick(), this.o.kickMs);
    this.loop = (async () => {
      for await (const m of this.messages!) {
        this.batch.push(m);
        if (this.batch.length >= this.o.maxMessages) {
          this.kick();
          await this.writing;
        }
      }
    })();
  }

  private kick(): void {
    if (!this.batch.length) return;
    const batch = this.batch;
    this.batch = [];
    this.writing = this.writing.then(() => this.write(batch));
  }

  /**
   * Runs `store` until it succeeds, keeping the batch's messages in progress and backing off between
   * tries (`failed` logged), then acks them and resolves true; false, nothing acked, once stopping:
   * the messages are redelivered to the next process.
   */
  async retryThenAck(batch: JsMsg[], failed: string, store: () => Promise<void>): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      try {
        await store();
        break;
      } catch (err) {
        if (this.stopping) return false;
        this.o.log.warn({ err: String(err), attempt }, `${failed}; retrying`);
        for (const m of batch) m.working();
        await new Promise((r) => setTimeout(r, Math.min(10_000, 200 * 2 ** attempt)));
      }
    }
    for (const m of batch) m.ack();
    return true;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.timer);
    await this.messages?.close();
    await this.loop;
    this.kick();
    await this.writing;
  }
}
