import type { NatsConnection } from 'nats';
import type { Logger } from '../lib/logger.js';
import type { ApiError } from '../lib/problem.js';

/**
 * The core API's side of a command the processors answer over core NATS request/reply (health
 * recalculation, materialize now, run now; processors/command-responder.ts): the core API does not
 * do the work, it asks and waits for the reply.
 */
export abstract class CommandClient {
  constructor(
    private readonly nc: NatsConnection,
    protected readonly timeoutMs: number,
    protected readonly log: Logger,
  ) {}

  /**
   * The reply's text and the reply parsed (undefined when unreadable: a failed command). No answer
   * is logged as `noAnswer.log` and thrown as `noAnswer.error(code)`.
   */
  protected async ask<Rep>(
    subject: string,
    req: object,
    noAnswer: { log: string; error: (code: string | undefined) => ApiError },
  ): Promise<{ text: string; reply?: Rep }> {
    let text: string;
    try {
      text = (await this.nc.request(subject, JSON.stringify(req), { timeout: this.timeoutMs })).string();
    } catch (err) {
      // nats.js codes: '503' no responders, 'TIMEOUT' no answer in time; anything else is a lost connection.
      const code = (err as { code?: string }).code;
      this.log.warn({ code, err: String(err), ...req }, noAnswer.log);
      throw noAnswer.error(code);
    }
    try {
      return { text, reply: JSON.parse(text) as Rep };
    } catch {
      return { text };
    }
  }
}
