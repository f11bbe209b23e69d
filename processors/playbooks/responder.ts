import type { Msg, NatsConnection, Subscription } from 'nats';
import { isUuid } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { subjects } from '../../lib/nats.js';
import type { PlaybookRunReply, PlaybookRunRequest } from '../../schemas/playbook-run.js';
import type { Evaluator } from './evaluate.js';

export const RUNNER_QUEUE = 'playbook-runner';

/**
 * Evaluate now (POST /v1/playbooks/{id}/run): core NATS requests on cmd.playbooks.run, shared by
 * every processors instance through one queue group, answered after the run's transaction
 * committed (trigger_source 'manual'). A disabled playbook runs only dry. Requests beyond
 * `maxInFlight` are refused at once (`run_failed`), so the core API answers instead of queueing.
 */
export class PlaybookRunResponder {
  private sub?: Subscription;
  private inFlight = new Set<Promise<void>>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly evaluator: Evaluator,
    private readonly log: Logger,
    private readonly maxInFlight = 16,
  ) {}

  start(): void {
    this.sub = this.nc.subscribe(subjects.playbookRun, {
      queue: RUNNER_QUEUE,
      callback: (err, msg) => {
        if (err) {
          this.log.warn({ err: String(err) }, 'playbook run subscription error');
          return;
        }
        if (this.inFlight.size >= this.maxInFlight) return this.reply(msg, { ok: false, error: 'run_failed' });
        const p = this.handle(msg).finally(() => this.inFlight.delete(p));
        this.inFlight.add(p);
      },
    });
  }

  private async handle(msg: Msg): Promise<void> {
    const req = parse(msg.data);
    if (!req) return this.reply(msg, { ok: false, error: 'invalid_request' });
    try {
      const r = await this.evaluator.evaluate(req.tenant_id, req.playbook_id, 'manual', req.dry_run);
      if (r.status !== 'done') return this.reply(msg, { ok: false, error: r.status });
      this.log.info({ tenantId: req.tenant_id, playbookId: req.playbook_id, ...r }, 'playbook run on request');
      this.reply(msg, { ok: true, run_id: r.runId });
    } catch (err) {
      this.log.error({ err, ...req }, 'playbook run on request failed');
      this.reply(msg, { ok: false, error: 'run_failed' });
    }
  }

  private reply(msg: Msg, r: PlaybookRunReply): void {
    if (!msg.reply) return;
    try {
      msg.respond(JSON.stringify(r));
    } catch (err) {
      this.log.warn({ err: String(err) }, 'playbook run reply failed');
    }
  }

  /** Stops taking requests and lets those in progress answer. */
  async stop(): Promise<void> {
    this.sub?.unsubscribe();
    await Promise.all(this.inFlight);
  }
}

function parse(data: Uint8Array): PlaybookRunRequest | undefined {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(data).toString('utf8'));
  } catch {
    return undefined;
  }
  const r = v as Partial<PlaybookRunRequest> | null;
  if (typeof r !== 'object' || r === null) return undefined;
  if (typeof r.tenant_id !== 'string' || typeof r.playbook_id !== 'string') return undefined;
  if (!isUuid(r.tenant_id) || !isUuid(r.playbook_id)) return undefined;
  if (r.dry_run !== undefined && typeof r.dry_run !== 'boolean') return undefined;
  return {
    tenant_id: r.tenant_id.toLowerCase(),
    playbook_id: r.playbook_id.toLowerCase(),
    dry_run: r.dry_run === true,
  };
}
