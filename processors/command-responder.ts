import type { Msg, NatsConnection, Subscription } from 'nats';
import { isUuid } from '../lib/ids.js';
import type { Logger } from '../lib/logger.js';

/**
 * A command the core API sends by core NATS request/reply (materialize now, run a playbook now):
 * every processors instance subscribes in one queue group, so each request reaches one of them.
 * Nothing a message holds can throw out of the handler: a request that does not parse gets the
 * `invalid` reply, a handler that throws the `failed` one (logged). Requests beyond `maxInFlight`
 * get the `busy` reply at once, so the core API answers instead of waiting for its timeout
 * behind a queue. stop() lets the requests in progress answer.
 */
export interface Command<Req, Rep> {
  subject: string;
  queue: string;
  /** For log lines: "<what> on request failed". */
  what: string;
  parse(data: Uint8Array): Req | undefined;
  handle(req: Req): Promise<Rep>;
  /** The text a reply is sent as; JSON.stringify when absent. */
  text?(r: Rep): string;
  invalid: Rep;
  busy: Rep;
  failed: Rep;
  maxInFlight: number;
}

export class CommandResponder<Req, Rep> {
  private sub?: Subscription;
  private inFlight = new Set<Promise<void>>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly c: Command<Req, Rep>,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.sub = this.nc.subscribe(this.c.subject, {
      queue: this.c.queue,
      callback: (err, msg) => {
        if (err) {
          this.log.warn({ err: String(err) }, `${this.c.what} subscription error`);
          return;
        }
        if (this.inFlight.size >= this.c.maxInFlight) return this.reply(msg, this.c.busy);
        const p = this.handle(msg).finally(() => this.inFlight.delete(p));
        this.inFlight.add(p);
      },
    });
  }

  private async handle(msg: Msg): Promise<void> {
    const req = this.c.parse(msg.data);
    if (!req) return this.reply(msg, this.c.invalid);
    try {
      this.reply(msg, await this.c.handle(req));
    } catch (err) {
      this.log.error({ err, req }, `${this.c.what} on request failed`);
      this.reply(msg, this.c.failed);
    }
  }

  private reply(msg: Msg, r: Rep): void {
    if (!msg.reply) return;
    try {
      msg.respond(this.c.text ? this.c.text(r) : JSON.stringify(r));
    } catch (err) {
      this.log.warn({ err: String(err) }, `${this.c.what} reply failed`);
    }
  }

  async stop(): Promise<void> {
    this.sub?.unsubscribe();
    await Promise.all(this.inFlight);
  }
}

/** The JSON object a request carries, or undefined. */
export function requestObject(data: Uint8Array): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(Buffer.from(data).toString('utf8')) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The JSON object a request carries, its `keys` UUIDs (lowercased), or undefined. */
export function requestUuids<K extends string>(
  data: Uint8Array,
  ...keys: K[]
): (Record<string, unknown> & Record<K, string>) | undefined {
  const r = requestObject(data);
  if (!r) return undefined;
  for (const k of keys) {
    const v = r[k];
    if (typeof v !== 'string' || !isUuid(v)) return undefined;
    r[k] = v.toLowerCase();
  }
  return r as Record<string, unknown> & Record<K, string>;
}
