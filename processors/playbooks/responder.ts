import type { NatsConnection } from 'nats';
import type { Logger } from '../../lib/logger.js';
import { subjects } from '../../lib/nats.js';
import type { PlaybookRunReply, PlaybookRunRequest } from '../../schemas/playbook-run.js';
import { CommandResponder, requestUuids } from '../command-responder.js';
import type { Evaluator } from './evaluate.js';

/**
 * Evaluate now (POST /v1/playbooks/{id}/run): cmd.playbooks.run, answered after the run's
 * transaction committed (trigger_source 'manual'). A disabled playbook runs only dry.
 */
export function playbookRunResponder(
  nc: NatsConnection,
  evaluator: Evaluator,
  log: Logger,
  maxInFlight = 16,
): CommandResponder<PlaybookRunRequest, PlaybookRunReply> {
  return new CommandResponder<PlaybookRunRequest, PlaybookRunReply>(
    nc,
    {
      subject: subjects.playbookRun,
      queue: 'playbook-runner',
      what: 'playbook run',
      parse,
      async handle(req) {
        const r = await evaluator.evaluate(req.tenant_id, req.playbook_id, 'manual', req.dry_run);
        if (r.status !== 'done') return { ok: false, error: r.status };
        log.info({ tenantId: req.tenant_id, playbookId: req.playbook_id, ...r }, 'playbook run on request');
        return { ok: true, run_id: r.runId };
      },
      invalid: { ok: false, error: 'invalid_request' },
      busy: { ok: false, error: 'run_failed' },
      failed: { ok: false, error: 'run_failed' },
      maxInFlight,
    },
    log,
  );
}

function parse(data: Uint8Array): PlaybookRunRequest | undefined {
  const r = requestUuids(data, 'tenant_id', 'playbook_id');
  if (!r || (r.dry_run !== undefined && typeof r.dry_run !== 'boolean')) return undefined;
  return { tenant_id: r.tenant_id, playbook_id: r.playbook_id, dry_run: r.dry_run === true };
}
