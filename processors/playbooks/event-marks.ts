import type { Logger } from '../../lib/logger.js';
import { inTenants, type Sql } from '../../lib/pg.js';
import type { PlaybookRunner } from './runner.js';

/**
 * Marks workspaces whose new events are named by one of their enabled `event` playbook triggers
 * (table playbook_event_marks). It sees the event names of every live usage message through the
 * event catalog's durable consumer (its Cs-Names header, processors/catalog/catalog.ts), which
 * acks a message only after flush() resolved: a mark is never lost, whichever instance holds the
 * message. The enabled triggers are read by the statement that writes the marks, never from a
 * copy kept in the process: each name is looked at once, so a copy older than a playbook saved
 * just before its events would lose their mark for good, in any instance holding one. One
 * statement per batch of messages.
 */
export class EventMarks {
  private seenNames = new Map<string, Set<string>>();

  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
  ) {}

  /** The names of one message (comma-separated, as the Cs-Names header carries them). */
  seen(tenantId: string, names: string): void {
    let s = this.seenNames.get(tenantId);
    if (!s) this.seenNames.set(tenantId, (s = new Set()));
    for (const n of names.split(',')) if (n) s.add(n);
  }

  /** Writes the marks of what was seen; on failure they are kept for the next call. */
  async flush(): Promise<void> {
    if (!this.seenNames.size) return;
    const tenants: string[] = [];
    const names: string[] = [];
    for (const [tenantId, seen] of this.seenNames)
      for (const n of seen) {
        tenants.push(tenantId);
        names.push(n);
      }
    // One probe of playbooks_enabled per workspace, ended by its first hit (LATERAL … LIMIT 1; a
    // semi-join would scan every enabled playbook of every workspace). A workspace deleted
    // meanwhile has no playbooks left, hence no mark to break the foreign key. The planner counts
    // each probe as reading all of its workspace's playbooks: with thousands in a workspace it
    // would compile the statement (JIT) for longer than it runs.
    const marked = await this.sql.begin(async (tx) => {
      await tx`SET LOCAL jit = off`;
      return tx`
        INSERT INTO playbook_event_marks (tenant_id, marked_at)
        SELECT s.tenant_id, now()
        FROM (
          SELECT tenant_id, array_agg(event_name) AS names
          FROM unnest(${tenants}::uuid[], ${names}::text[]) AS u (tenant_id, event_name)
          GROUP BY tenant_id
        ) s
        CROSS JOIN LATERAL (
          SELECT FROM playbooks p
          WHERE p.tenant_id = s.tenant_id AND p.enabled AND p.trigger->>'type' = 'event'
            AND p.trigger->>'event_name' = ANY(s.names)
          LIMIT 1
        ) hit
        ON CONFLICT (tenant_id) DO UPDATE SET marked_at = now()`;
    });
    if (marked.count) this.log.debug({ tenants: marked.count }, 'event playbooks marked');
    this.seenNames.clear();
  }
}

export interface EventLoopOptions {
  /** Pause between two looks at the marks (at most 20 s: a task within a minute of the event). */
  pollMs: number;
  /** A mark is evaluated at every poll until it is this old. */
  settleMs: number;
  /** Only these workspaces (empty: all). */
  tenants: string[];
}

/**
 * Evaluates the event playbooks of marked workspaces, every `pollMs` while the mark is younger
 * than `settleMs`: an event marked before the writer stored it is seen by a later evaluation.
 * A workspace is claimed with one conditional update (evaluated_at), so instances polling at the
 * same time do not evaluate it twice in one round; evaluations of one playbook are serialised by
 * evaluate.ts anyway.
 */
export class EventLoop {
  private timer?: NodeJS.Timeout;
  private ticking?: Promise<void>;
  private stopping = false;

  constructor(
    private readonly sql: Sql,
    private readonly runner: PlaybookRunner,
    private readonly log: Logger,
    private readonly o: EventLoopOptions,
  ) {}

  start(): void {
    this.schedule(Math.random() * this.o.pollMs);
  }

  private schedule(delayMs: number): void {
    if (this.stopping) return;
    this.timer = setTimeout(() => {
      this.ticking = this.tick()
        .catch((err: unknown) => this.log.warn({ err: String(err) }, 'event playbook tick failed'))
        .finally(() => {
          this.ticking = undefined;
          this.schedule(this.o.pollMs);
        });
    }, delayMs);
  }

  async tick(): Promise<void> {
    const claimAfter = Math.floor(this.o.pollMs * 0.8);
    const rows = await this.sql<Array<{ id: string }>>`
      UPDATE playbook_event_marks SET evaluated_at = now()
      WHERE marked_at > now() - (${this.o.settleMs}::float8 * interval '1 ms')
        AND (evaluated_at IS NULL OR evaluated_at < now() - (${claimAfter}::float8 * interval '1 ms'))
        AND ${inTenants(this.o.tenants)}
      RETURNING tenant_id::text AS id`;
    for (const { id } of rows) {
      if (this.stopping) return;
      await this.runner
        .runWorkspace(id, 'event', ['event'], () => this.stopping)
        .catch((err: unknown) => this.log.warn({ err: String(err), tenantId: id }, 'event playbooks failed'));
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    await this.ticking;
  }
}
