import type { Logger } from '../../lib/logger.js';
import type { Sql } from '../../lib/pg.js';
import type { PlaybookRunner } from './runner.js';

/** How long the names of the enabled event triggers are trusted before they are read again. */
const NAMES_TTL_MS = 5000;

/**
 * Marks workspaces whose new events are named by one of their enabled `event` playbook triggers
 * (table playbook_event_marks). It sees the event names of every live usage message through the
 * event catalog's durable consumer (its Cs-Names header, processors/catalog.ts), which acks a
 * message only after flush() resolved: a mark is never lost, whichever instance holds the
 * message. Only names matter, so the marks cost one upsert per batch of messages.
 */
export class EventMarks {
  private seenNames = new Map<string, Set<string>>();
  private triggers = new Map<string, Set<string>>();
  private loadedAt = 0;

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
    if (Date.now() - this.loadedAt > NAMES_TTL_MS) await this.loadTriggers();
    const marked: string[] = [];
    for (const [tenantId, names] of this.seenNames) {
      const wanted = this.triggers.get(tenantId);
      if (wanted && [...names].some((n) => wanted.has(n))) marked.push(tenantId);
    }
    if (marked.length) {
      await this.sql`
        INSERT INTO playbook_event_marks (tenant_id, marked_at)
        SELECT t.id, now() FROM tenants t WHERE t.id = ANY(${marked}::uuid[])
        ON CONFLICT (tenant_id) DO UPDATE SET marked_at = now()`;
      this.log.debug({ tenants: marked.length }, 'event playbooks marked');
    }
    this.seenNames.clear();
  }

  private async loadTriggers(): Promise<void> {
    const rows = await this.sql<Array<{ tenant_id: string; names: string[] }>>`
      SELECT tenant_id::text, array_agg(DISTINCT trigger->>'event_name') AS names
      FROM playbooks WHERE enabled AND trigger->>'type' = 'event' GROUP BY tenant_id`;
    this.triggers = new Map(rows.map((r) => [r.tenant_id, new Set(r.names)]));
    this.loadedAt = Date.now();
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
    const only = this.o.tenants;
    const claimAfter = Math.floor(this.o.pollMs * 0.8);
    const rows = await this.sql<Array<{ id: string }>>`
      UPDATE playbook_event_marks SET evaluated_at = now()
      WHERE marked_at > now() - (${this.o.settleMs}::float8 * interval '1 ms')
        AND (evaluated_at IS NULL OR evaluated_at < now() - (${claimAfter}::float8 * interval '1 ms'))
        ${only.length ? this.sql`AND tenant_id = ANY(${only}::uuid[])` : this.sql``}
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
