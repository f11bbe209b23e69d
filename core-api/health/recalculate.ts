import { subjects } from '../../lib/nats.js';
import { RECALC_RETRY_AFTER_S } from '../../schemas/core/health.js';
import type { RecalculatedHealth, RecalculateReply, RecalculateRequest } from '../../schemas/health.js';
import { ApiError } from '../../lib/problem.js';
import { CommandClient } from '../command-client.js';

/** What the scorer said: the customer's new health, or that it has no such customer. */
export type RecalculateOutcome = { found: true; health?: RecalculatedHealth } | { found: false };

/**
 * On-demand recalculation: the core API does not score, it asks a scorer (processors, queue group
 * `health-scorer`) over core NATS request/reply and waits for `{ok: true, health}`, which the
 * scorer sends after customer_health is committed. No scorer, a scorer too slow or one that failed
 * all look the same to the client: 503 `scorer_unavailable` with Retry-After, the stored score
 * unchanged.
 */
export class Recalculator extends CommandClient {
  async recalculate(req: RecalculateRequest): Promise<RecalculateOutcome> {
    const { text, reply } = await this.ask<RecalculateReply>(subjects.healthRecalculate, req, {
      log: 'health recalculation: no scorer answered',
      error: (code) =>
        unavailable(
          code === '503'
            ? 'No health scorer is running; the stored score is unchanged. Retry later.'
            : `No health scorer answered within ${this.timeoutMs / 1000} s; the stored score is unchanged. ` +
                'Retry later.',
        ),
    });
    if (reply?.ok === true) return { found: true, health: reply.health };
    if (reply?.error === 'unknown_customer') return { found: false };
    this.log.warn({ reply: text.slice(0, 300), ...req }, 'health recalculation failed in the scorer');
    throw unavailable('The health scorer could not recalculate this customer now; the stored score is unchanged.');
  }
}

const unavailable = (detail: string) =>
  new ApiError('scorer_unavailable', detail, undefined, [['Retry-After', String(RECALC_RETRY_AFTER_S)]]);
