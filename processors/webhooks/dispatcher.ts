import type { Logger } from '../../lib/logger.js';
import { inTenants, type Sql } from '../../lib/pg.js';
import { signatureHeader } from '../../lib/webhooks/signature.js';
import type { WebhookMetrics } from '../metrics.js';
import type { Sender, SendResult } from './send.js';

export interface DispatcherOptions {
  /** Attempts in flight in this process, at most. */
  concurrency: number;
  /** Attempts in flight to one subscription in this process, at most. */
  perEndpoint: number;
  /** Pause between claims when nothing was due (fan-out in this process wakes it sooner). */
  pollMs: number;
  /** Whole-attempt deadline (the sender's); the claim's lease is longer. */
  timeoutMs: number;
  /** Delay before each retry, in ms: after attempt n fails, retryScheduleMs[n-1]; none left → failed. */
  retryScheduleMs: number[];
  /** A subscription whose attempts all failed for this long is disabled (reason `failing`). */
  disableAfterMs: number;
  /** Workspaces whose deliveries this process makes (empty: all). */
  tenants: string[];
  /** The signing secret of a stored value: decrypted (lib/credentials/data-cipher.ts), or as kept before encryption. */
  openSecret: (stored: string) => string;
  /** Counts each attempt's outcome (/metrics). */
  metrics?: WebhookMetrics;
}

interface Claimed {
  id: string;
  tenant_id: string;
  subscription_id: string;
  message_id: string;
  event_type: string;
  body: string;
  attempts: number;
  attempt_id: string;
  url: string;
  secret: string;
  previous_secret: string | null;
}

interface Outcome {
  d: Claimed;
  r: SendResult;
  gone: boolean;
  retryMs: number | null;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The delivery loop. Deliveries wait in PostgreSQL (webhook_deliveries), never in memory: this
 * process claims only as many as it has free slots, so its memory is bounded however many are
 * pending. Promises:
 * - a queue per subscription: a claim takes, for each enabled subscription that is not already at
 *   `perEndpoint` attempts here, up to `perEndpoint` of its due deliveries (index
 *   webhook_deliveries_due), the oldest due first across subscriptions: an endpoint that hangs
 *   until the timeout holds `perEndpoint` slots, never the others';
 * - claiming moves next_attempt_at past the attempt's deadline (a lease) and records the attempt
 *   as `pending`; a process killed mid-attempt leaves the delivery due again after the lease, and
 *   the next claim marks the orphaned attempt failed (`interrupted`): at least once, with the same
 *   `webhook-id`;
 * - outcomes are written in batches (one statement per flush): the attempt, the delivery
 *   (succeeded; pending again at now + the schedule's next delay; failed when none is left), and
 *   the subscription (410 Gone disables it; `failing_since` cleared by a success, set by a failure,
 *   and past `disableAfterMs` the subscription is disabled).
 * Several processes share the queue: claims lock with FOR UPDATE SKIP LOCKED.
 */
export class WebhookDispatcher {
  private inflight = 0;
  /** Outcomes of finished attempts not yet written to PostgreSQL. */
  private unwritten = 0;
  private readonly perSub = new Map<string, number>();
  private outcomes: Outcome[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private flushTimer?: NodeJS.Timeout;
  private loop?: Promise<void>;
  private stopping = false;
  private wakeUp?: () => void;

  constructor(
    private readonly sql: Sql,
    private readonly sender: Sender,
    private readonly log: Logger,
    private readonly o: DispatcherOptions,
  ) {}

  start(): void {
    this.flushTimer = setInterval(() => this.flush(), 50);
    this.loop = this.run();
  }

  /** New deliveries may be due: claim now instead of at the next poll. */
  wake(): void {
    this.wakeUp?.();
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      // Outcomes not yet written count too (up to the concurrency again): a slow PostgreSQL slows
      // claiming down instead of growing the buffer.
      const free = Math.min(
        this.o.concurrency - this.inflight,
        2 * this.o.concurrency - this.inflight - this.unwritten,
      );
      let claimed = 0;
      if (free > 0) {
        try {
          claimed = await this.claim(free);
          failures = 0;
        } catch (err) {
          failures++;
          this.log.warn({ err: String(err) }, 'webhook claim failed; retrying');
          await sleep(Math.min(10_000, 200 * 2 ** failures));
          continue;
        }
      }
      if (claimed > 0 && claimed === free) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.o.pollMs);
        this.wakeUp = () => {
          clearTimeout(timer);
          // A few ms more: the attempts finishing together are claimed for in one statement.
          setTimeout(resolve, this.stopping ? 0 : 5);
          this.wakeUp = undefined;
        };
      });
      this.wakeUp = undefined;
    }
  }

  private async claim(free: number): Promise<number> {
    const busy = [...this.perSub].filter(([, n]) => n >= this.o.perEndpoint).map(([id]) => id);
    // Past the attempt's deadline with a margin: a live process always records its outcome first.
    const leaseMs = 2 * this.o.timeoutMs + 5000;
    const rows = await this.sql<Claimed[]>`
      WITH picked AS (
        SELECT d.id FROM webhook_subscriptions s
        CROSS JOIN LATERAL (
          SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
          WHERE d.subscription_id = s.id AND d.status = 'pending' AND d.next_attempt_at <= now()
          ORDER BY d.next_attempt_at LIMIT ${this.o.perEndpoint}
          FOR UPDATE SKIP LOCKED
        ) d
        WHERE s.enabled AND NOT (s.id = ANY(${busy}::uuid[]))
          AND ${inTenants(this.o.tenants, 's')}
        ORDER BY d.next_attempt_at LIMIT ${free}
      ),
      claimed AS (
        UPDATE webhook_deliveries d SET attempts = d.attempts + 1,
          next_attempt_at = now() + ${leaseMs}::float8 * interval '1 ms', updated_at = now()
        FROM picked p WHERE d.id = p.id
        RETURNING d.id, d.tenant_id, d.subscription_id, d.message_id, d.event_type, d.body, d.attempts
      ),
      interrupted AS (
        UPDATE webhook_attempts a SET status = 'failed',
          error = 'interrupted: the dispatcher stopped during the attempt'
        WHERE a.delivery_id IN (SELECT id FROM claimed) AND a.status = 'pending'
        RETURNING 1
      ),
      att AS (
        INSERT INTO webhook_attempts (tenant_id, subscription_id, delivery_id, message_id, event_type, attempt, status)
        SELECT tenant_id, subscription_id, id, message_id, event_type, attempts, 'pending' FROM claimed
        RETURNING id, delivery_id
      )
      SELECT c.id::text, c.tenant_id::text, c.subscription_id::text, c.message_id::text, c.event_type, c.body,
        c.attempts, att.id::text AS attempt_id, s.url, s.secret,
        CASE WHEN s.previous_until > now() THEN s.previous_secret END AS previous_secret
      FROM claimed c JOIN att ON att.delivery_id = c.id JOIN webhook_subscriptions s ON s.id = c.subscription_id`;
    for (const d of rows) this.attempt(d);
    return rows.length;
  }

  private attempt(d: Claimed): void {
    this.inflight++;
    this.perSub.set(d.subscription_id, (this.perSub.get(d.subscription_id) ?? 0) + 1);
    const ts = Math.floor(Date.now() / 1000);
    let signature: string;
    try {
      const stored = d.previous_secret ? [d.secret, d.previous_secret] : [d.secret];
      signature = signatureHeader(stored.map(this.o.openSecret), d.message_id, ts, d.body);
    } catch (err) {
      // No configured key opens the secret: nothing goes out unsigned; the attempt fails with the reason.
      const error = `the signing secret cannot be read: ${(err as Error).message}`;
      this.log.error({ subscriptionId: d.subscription_id, err: error }, 'webhook not signed');
      queueMicrotask(() => this.settled(d, { ok: false, status: null, ms: 0, error }));
      return;
    }
    const headers = { 'webhook-id': d.message_id, 'webhook-timestamp': String(ts), 'webhook-signature': signature };
    void this.sender.send(d.url, headers, d.body).then((r) => this.settled(d, r));
  }

  /** An attempt's outcome, queued for the next flush. */
  private settled(d: Claimed, r: SendResult): void {
    const gone = r.status === 410;
    const retryMs = r.ok || gone ? null : (this.o.retryScheduleMs[d.attempts - 1] ?? null);
    this.o.metrics?.attempted(r.ok ? 'succeeded' : gone ? 'gone' : retryMs !== null ? 'retrying' : 'failed');
    this.outcomes.push({ d, r, gone, retryMs });
    this.unwritten++;
    // The slot is free at once: the delivery's lease keeps it from being claimed again until
    // its outcome is written.
    this.inflight--;
    const n = (this.perSub.get(d.subscription_id) ?? 1) - 1;
    if (n > 0) this.perSub.set(d.subscription_id, n);
    else this.perSub.delete(d.subscription_id);
    // No wake here: claims follow the flushes (every 50 ms), so a burst of finishing attempts
    // costs one claim statement, not one each.
    if (this.outcomes.length >= 200) this.flush();
  }

  private flush(): void {
    if (!this.outcomes.length) return;
    const batch = this.outcomes;
    this.outcomes = [];
    this.flushing = this.flushing.then(() => this.write(batch));
  }

  /** Outcomes to PostgreSQL, retried through a short outage of PostgreSQL. */
  private async write(batch: Outcome[]): Promise<void> {
    const col = <T>(f: (o: Outcome) => T) => batch.map(f);
    // postgres.js sends a JS boolean array as one boolean: booleans travel as text.
    const flag = (f: (o: Outcome) => boolean) => batch.map((o) => (f(o) ? 't' : 'f'));
    for (let attempt = 0; ; attempt++) {
      try {
        await this.sql`
          WITH r AS (
            SELECT * FROM unnest(${col((o) => o.d.id)}::uuid[], ${col((o) => o.d.attempt_id)}::uuid[],
              ${col((o) => o.d.subscription_id)}::uuid[], ${flag((o) => o.r.ok)}::text[]::boolean[],
              ${col((o) => o.r.status)}::int[], ${col((o) => o.r.ms)}::int[], ${col((o) => o.r.error)}::text[],
              ${col((o) => o.retryMs)}::float8[], ${flag((o) => o.gone)}::text[]::boolean[])
              AS r (delivery_id, attempt_id, subscription_id, ok, response_status, duration_ms, error, retry_ms, gone)
          ),
          d AS (
            UPDATE webhook_deliveries d SET
              status = CASE WHEN r.ok THEN 'succeeded' WHEN r.retry_ms IS NULL THEN 'failed' ELSE 'pending' END,
              next_attempt_at = CASE WHEN r.retry_ms IS NOT NULL THEN now() + r.retry_ms * interval '1 ms' END,
              updated_at = now()
            FROM r WHERE d.id = r.delivery_id
            RETURNING 1
          ),
          a AS (
            UPDATE webhook_attempts a SET status = CASE WHEN r.ok THEN 'succeeded' ELSE 'failed' END,
              response_status = r.response_status, duration_ms = r.duration_ms, error = r.error,
              next_attempt_at = CASE WHEN r.retry_ms IS NOT NULL THEN now() + r.retry_ms * interval '1 ms' END
            FROM r WHERE a.id = r.attempt_id
            RETURNING 1
          ),
          s AS (
            SELECT subscription_id, bool_or(ok) AS any_ok, bool_or(gone) AS gone FROM r GROUP BY subscription_id
          ),
          v AS (
            SELECT w.id, s.any_ok, s.gone,
              NOT s.any_ok
                AND coalesce(w.failing_since < now() - ${this.o.disableAfterMs}::float8 * interval '1 ms', false)
                AS stale
            FROM webhook_subscriptions w JOIN s ON s.subscription_id = w.id
          )
          UPDATE webhook_subscriptions w SET
            failing_since = CASE WHEN v.any_ok THEN NULL ELSE coalesce(w.failing_since, now()) END,
            enabled = w.enabled AND NOT (v.gone OR v.stale),
            disabled_reason = CASE WHEN v.gone AND w.enabled THEN 'gone' WHEN v.stale AND w.enabled THEN 'failing'
                                   ELSE w.disabled_reason END,
            updated_at = CASE WHEN w.enabled AND (v.gone OR v.stale) THEN now() ELSE w.updated_at END
          FROM v WHERE w.id = v.id
            AND (v.gone OR v.stale OR (v.any_ok AND w.failing_since IS NOT NULL)
                 OR (NOT v.any_ok AND w.failing_since IS NULL))`;
        break;
      } catch (err) {
        // Given up after a while (or sooner when stopping): the leases bring the deliveries back
        // and the next claim marks these attempts interrupted; the queue never stalls behind them.
        if (attempt >= 10 || (this.stopping && attempt >= 3)) {
          this.log.error(
            { err: String(err), outcomes: batch.length },
            'webhook outcomes dropped; the leases retry them',
          );
          break;
        }
        this.log.warn({ err: String(err), attempt }, 'webhook outcomes not written; retrying');
        await sleep(Math.min(10_000, 200 * 2 ** attempt));
      }
    }
    this.unwritten -= batch.length;
    for (const o of batch) {
      if (!o.r.ok)
        this.log.info(
          { subscriptionId: o.d.subscription_id, messageId: o.d.message_id, attempt: o.d.attempts, error: o.r.error },
          'webhook attempt failed',
        );
    }
    this.wake();
  }

  /** Stops claiming, waits for the attempts in flight (bounded by the sender's timeout) and their outcomes. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    await this.loop;
    while (this.inflight > 0) await sleep(50);
    clearInterval(this.flushTimer);
    this.flush();
    await this.flushing;
  }
}
