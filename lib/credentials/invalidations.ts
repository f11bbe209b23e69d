import { randomUUID } from 'node:crypto';
import { createInbox, type NatsConnection, type Subscription } from 'nats';
import type { Logger } from '../logger.js';

/**
 * Credential invalidations that are in force in every process before the request that caused
 * them is answered (SPEC.md: a revoked API key, a rotated ingestion key and a revoked OAuth
 * family stop working "at once").
 *
 * A process that caches credentials (core-api, ingest) is a member: it applies each invalidation
 * it listens to and replies with its id, and says which subjects it listens to on `inv.members`
 * at start, every second after, on a roll call, and once more (as leaving) at shutdown.
 *
 * The revoking process publishes with a reply inbox and answers its client when every member
 * heard from in the last 3 seconds that listens to the subject has replied, or after 2 seconds
 * at most: a member that stopped without leaving, or is cut off from NATS (it drops its caches
 * when it reconnects), does not hold a revocation up for longer.
 *
 * A flush alone is not enough: the NATS server has the message when the flush returns, but
 * another process may read its client's next HTTP request before its NATS socket.
 */
const MEMBERS = 'inv.members';
const ROLL_CALL = 'inv.members.roll';
const HEARTBEAT_MS = 1_000;
const ALIVE_MS = 3 * HEARTBEAT_MS;
const WAIT_MS = 2_000;

interface Presence {
  id: string;
  /** Absent when the member leaves. */
  subjects?: string[];
}

export class Invalidations {
  readonly id = randomUUID();
  private readonly subjects: string[] = [];
  private readonly known = new Map<string, { subjects: ReadonlySet<string>; heard: number }>();
  private readonly subs: Subscription[] = [];
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly log: Logger,
  ) {}

  /** Applies `handler` to each invalidation on `subject` and acknowledges it; call before `start`. */
  on(subject: string, handler: (payload: string) => void): this {
    this.subjects.push(subject);
    this.subs.push(
      this.nc.subscribe(subject, {
        callback: (err, m) => {
          if (err) return;
          handler(m.string());
          if (m.reply) m.respond(this.id);
        },
      }),
    );
    return this;
  }

  /**
   * Joins: from here on revokers wait for this process. `watch` also follows the other members,
   * for a process that revokes; it asks them to announce themselves at once.
   */
  async start(opts: { watch: boolean }): Promise<this> {
    if (opts.watch) {
      this.subs.push(
        this.nc.subscribe(MEMBERS, {
          callback: (err, m) => {
            if (err) return;
            try {
              this.heard(m.json<Presence>());
            } catch {
              // Not a presence message: nothing to learn from it.
            }
          },
        }),
      );
    }
    this.subs.push(this.nc.subscribe(ROLL_CALL, { callback: () => this.announce() }));
    this.announce();
    if (opts.watch) this.nc.publish(ROLL_CALL);
    this.heartbeat = setInterval(() => this.announce(), HEARTBEAT_MS);
    this.heartbeat.unref();
    await this.nc.flush();
    return this;
  }

  /**
   * Publishes an invalidation and resolves once every live member listening to `subject` has
   * applied it (or after WAIT_MS). Only a watching process knows the members to wait for.
   */
  async publish(subject: string, payload: string): Promise<void> {
    const waiting = new Set(this.live(subject));
    if (waiting.size === 0) {
      this.nc.publish(subject, payload);
      await this.nc.flush();
      return;
    }
    const inbox = createInbox();
    await new Promise<void>((resolve) => {
      const sub = this.nc.subscribe(inbox, {
        callback: (err, m) => {
          if (err) return;
          waiting.delete(m.string());
          if (waiting.size === 0) finish();
        },
      });
      const timer = setTimeout(() => {
        this.log.warn({ subject, unanswered: [...waiting] }, 'invalidation not acknowledged by every member in time');
        finish();
      }, WAIT_MS);
      function finish(): void {
        clearTimeout(timer);
        sub.unsubscribe();
        resolve();
      }
      this.nc.publish(subject, payload, { reply: inbox });
    });
  }

  /** How many live members listen to `subject`, as far as a watching process knows. */
  members(subject: string): number {
    return this.live(subject).length;
  }

  /** Leaves: revokers stop waiting for this process. Call before draining the connection. */
  stop(): void {
    clearInterval(this.heartbeat);
    if (this.nc.isClosed()) return;
    this.nc.publish(MEMBERS, JSON.stringify({ id: this.id } satisfies Presence));
    for (const s of this.subs) s.unsubscribe();
  }

  private announce(): void {
    if (this.nc.isClosed()) return;
    const p: Presence = { id: this.id, subjects: this.subjects };
    this.nc.publish(MEMBERS, JSON.stringify(p));
  }

  /** The ids of the members heard from lately that listen to `subject`; forgets the silent ones. */
  private live(subject: string): string[] {
    const now = Date.now();
    const ids: string[] = [];
    for (const [id, m] of this.known) {
      if (now - m.heard > ALIVE_MS) this.known.delete(id);
      else if (m.subjects.has(subject)) ids.push(id);
    }
    return ids;
  }

  private heard(p: Presence): void {
    if (typeof p?.id !== 'string') return;
    if (!Array.isArray(p.subjects)) this.known.delete(p.id);
    else this.known.set(p.id, { subjects: new Set(p.subjects), heard: Date.now() });
  }
}
