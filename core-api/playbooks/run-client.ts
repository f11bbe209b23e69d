import { subjects } from '../../lib/nats.js';
import { ApiError, notFound } from '../../lib/problem.js';
import {
  PLAYBOOK_RUN_RETRY_AFTER_S,
  type PlaybookRunReply,
  type PlaybookRunRequest,
} from '../../schemas/playbook-run.js';
import { CommandClient } from '../command-client.js';

/**
 * Run now: the core API does not evaluate playbooks, it asks a playbook runner (processors, queue
 * group `playbook-runner`) over core NATS request/reply and waits for the run id, which the runner
 * sends once the run (and its tasks) is committed. No runner, one too slow or one that failed all
 * answer 503 `runner_unavailable` with Retry-After; a run that did not commit fired nothing.
 */
export class PlaybookRunClient extends CommandClient {
  /** The id of the recorded run. */
  async run(req: PlaybookRunRequest): Promise<string> {
    const { text, reply } = await this.ask<PlaybookRunReply>(subjects.playbookRun, req, {
      log: 'playbook run: no runner answered',
      error: (code) =>
        unavailable(
          code === '503'
            ? 'No playbook runner is running; nothing was evaluated. Retry later.'
            : `No playbook runner answered within ${this.timeoutMs / 1000} s. Retry later; a run that did not ` +
                'complete fired nothing.',
        ),
    });
    if (reply?.ok === true && typeof reply.run_id === 'string') return reply.run_id;
    // The playbook changed between the core API's check and the run (deleted or disabled meanwhile).
    if (reply?.ok === false && reply.error === 'unknown_playbook') throw notFound('Playbook');
    if (reply?.ok === false && reply.error === 'playbook_disabled') throw disabled();
    this.log.warn({ reply: text.slice(0, 300), ...req }, 'playbook run failed in the runner');
    throw unavailable('The playbook runner could not evaluate this playbook now; nothing was fired.');
  }
}

export const disabled = () =>
  new ApiError('playbook_disabled', 'The playbook is disabled: only a dry run is allowed. Enable it to run it.');

const unavailable = (detail: string) =>
  new ApiError('runner_unavailable', detail, undefined, [['Retry-After', String(PLAYBOOK_RUN_RETRY_AFTER_S)]]);
