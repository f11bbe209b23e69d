import { subjects } from '../../lib/nats.js';
import {
  MATERIALIZE_RETRY_AFTER_S,
  type MaterializeReply,
  type MaterializeRequest,
  type MaterializeSummary,
} from '../../schemas/materialize.js';
import { ApiError, notFound } from '../../lib/problem.js';
import { CommandClient } from '../command-client.js';

/**
 * Materialize now: the core API does not compute metrics, it asks a materializer (processors,
 * queue group `metric-materializer`) over core NATS request/reply and waits for the values to be
 * stored. No materializer, one too slow or one that failed all answer 503
 * `materializer_unavailable` with Retry-After, the stored values unchanged.
 */
export class MaterializeClient extends CommandClient {
  async materialize(req: MaterializeRequest): Promise<MaterializeSummary> {
    const { text, reply } = await this.ask<MaterializeReply>(subjects.metricsMaterialize, req, {
      log: 'materialize: no materializer answered',
      error: (code) =>
        unavailable(
          code === '503'
            ? 'No metric materializer is running; stored values are unchanged. Retry later.'
            : `No metric materializer answered within ${this.timeoutMs / 1000} s; stored values are unchanged. ` +
                'Retry later.',
        ),
    });
    if (reply?.ok === true) {
      const { ok: _ok, ...summary } = reply;
      return summary;
    }
    // The metric changed between the core API's check and the run (deleted meanwhile).
    if (reply?.error === 'unknown_metric') throw notFound('Metric');
    if (reply?.error === 'metric_deleted')
      throw new ApiError('conflict', 'The metric is deleted; it is no longer materialized.');
    this.log.warn({ reply: text.slice(0, 300), ...req }, 'materialize failed in the materializer');
    throw unavailable('The metric materializer could not compute this metric now; stored values are unchanged.');
  }
}

const unavailable = (detail: string) =>
  new ApiError('materializer_unavailable', detail, undefined, [['Retry-After', String(MATERIALIZE_RETRY_AFTER_S)]]);
