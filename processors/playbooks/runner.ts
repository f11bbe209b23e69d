import type { Logger } from '../../lib/logger.js';
import type { Sql } from '../../lib/pg.js';
import { enabledPlaybooks, type Trigger, type TriggerSource } from './definition.js';
import type { Evaluator } from './evaluate.js';

export interface WorkspaceEvaluation {
  playbooks: number;
  fired: number;
  tasks: number;
  ms: number;
}

/**
 * Evaluates a workspace's enabled playbooks, `concurrency` at a time (each in its own transaction,
 * see evaluate.ts; PostgreSQL runs a statement on one core and an evaluation also waits on its
 * ClickHouse read, so three at a time keep both cores of a small machine busy; evaluations of
 * different playbooks never wait on each other's locks). A
 * playbook that fails is logged and the others still run; the workspace run then fails, so a
 * scheduled run is retried after its back-off.
 */
export class PlaybookRunner {
  constructor(
    private readonly sql: Sql,
    private readonly evaluator: Evaluator,
    private readonly log: Logger,
    private readonly concurrency = 3,
  ) {}

  async runWorkspace(
    tenantId: string,
    source: TriggerSource,
    types?: Trigger['type'][],
    stopping: () => boolean = () => false,
  ): Promise<WorkspaceEvaluation> {
    const t0 = performance.now();
    const playbooks = await enabledPlaybooks(this.sql, tenantId, types);
    const out: WorkspaceEvaluation = { playbooks: playbooks.length, fired: 0, tasks: 0, ms: 0 };
    let failed = 0;
    let next = 0;
    const worker = async () => {
      while (next < playbooks.length) {
        const pb = playbooks[next++];
        if (stopping()) throw new Error('stopped by shutdown');
        try {
          const r = await this.evaluator.evaluate(tenantId, pb.id, source, false);
          if (r.status !== 'done') continue;
          out.fired += r.fired;
          out.tasks += r.tasks;
          if (r.fired || r.rearmed) this.log.info({ tenantId, playbookId: pb.id, source, ...r }, 'playbook evaluated');
        } catch (err) {
          failed++;
          this.log.error({ err, tenantId, playbookId: pb.id, source }, 'playbook evaluation failed');
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.concurrency, playbooks.length) }, worker));
    out.ms = Math.round(performance.now() - t0);
    if (failed) throw new Error(`${failed} of ${playbooks.length} playbooks failed`);
    return out;
  }
}

/** The triggers a health run or a materialization can change: conditions read both, thresholds metrics. */
const AFFECTED: Record<'health' | 'metrics', Trigger['type'][]> = {
  health: ['condition'],
  metrics: ['condition', 'metric_threshold'],
};

/**
 * Evaluations asked for after a health run or a metric materialization of a workspace. They
 * run after the request returns (the health or metrics run is not held up), one workspace at a
 * time; requests for a workspace already waiting are merged into the waiting one, so a burst of
 * runs costs one evaluation. Nothing is kept across a restart: the hourly schedule catches up.
 */
export class AfterRuns {
  private queue = new Map<string, TriggerSource>();
  private draining?: Promise<void>;
  private stopped = false;

  constructor(
    private readonly runner: PlaybookRunner,
    private readonly log: Logger,
  ) {}

  request(tenantId: string, source: 'health' | 'metrics'): void {
    if (this.stopped || this.queue.has(tenantId)) return;
    this.queue.set(tenantId, source);
    this.draining ??= this.drain().finally(() => {
      this.draining = undefined;
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.size && !this.stopped) {
      const [tenantId, source] = this.queue.entries().next().value as [string, TriggerSource];
      this.queue.delete(tenantId);
      await this.runner
        .runWorkspace(tenantId, source, AFFECTED[source as 'health' | 'metrics'], () => this.stopped)
        .catch((err: unknown) =>
          this.log.warn({ err: String(err), tenantId, source }, 'playbook evaluation after a run failed'),
        );
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.queue.clear();
    await this.draining;
  }
}
