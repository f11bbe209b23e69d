import type { ConsumerMessages, JetStreamClient, JsMsg } from 'nats';

/**
 * The loop of a consumer that handles messages in batches (the event catalog, the webhook
 * fan-out): messages are gathered as they come and handed to `write` every `kickMs` or once
 * `maxMessages` are waiting (then pulling pauses until the batch is written); batches are written
 * one after the other. `write` acks the messages it handled. stop() stops pulling and writes what
 * was gathered.
 */
export class BatchedConsumer {
  private batch: JsMsg[] = [];
  private messages?: ConsumerMessages;
  private loop?: Promise<void>;
  private timer?: NodeJS.Timeout;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly js: JetStreamClient,
    private readonly stream: string,
    private readonly consumer: string,
    private readonly o: { maxMessages: number; kickMs: number },
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

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.messages?.close();
    await this.loop;
    this.kick();
    await this.writing;
  }
}
