import type { Msg, NatsConnection, Subscription } from 'nats';
import { isUuid } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { subjects } from '../../lib/nats.js';
import type { RecalculateReply, RecalculateRequest } from '../../schemas/health.js';
import type { HealthMetrics } from '../metrics.js';
import { type BatcherOptions, RecalculateBatcher } from './batcher.js';
import type { HealthScorer } from './scorer.js';
import type { HistoryBuffer } from './store.js';

export const SCORER_QUEUE = 'health-scorer';

export interface ResponderOptions extends BatcherOptions {
  /** Requests held at once (waiting or being calculated); more are answered scorer_busy. */
  maxInFlight: number;
}

const DEFAULTS: ResponderOptions = { maxInFlight: 256, maxBatch: 500, windowMs: 2 };

/**
 * On-demand recalculation (POST /v1/customers/{id}/health/recalculate): core NATS requests on
 * cmd.health.recalculate, shared by every processors instance through one queue group, answered
 * once customer_health is committed. Requests of one workspace are calculated together (see
 * batcher.ts). A bad request gets `{ok: false, error}`; nothing a message holds can throw out of
 * the handler. Requests beyond `maxInFlight` are refused at once so the core API answers 503
 * instead of waiting for its timeout behind a queue.
 */
export class RecalculateResponder {
  private sub?: Subscription;
  private inFlight = new Set<Promise<void>>();
  private batcher: RecalculateBatcher<string>;
  private readonly o: ResponderOptions;

  constructor(
    private readonly nc: NatsConnection,
    scorer: HealthScorer,
    history: HistoryBuffer,
    private readonly log: Logger,
    private readonly metrics: HealthMetrics,
    options: Partial<ResponderOptions> = {},
  ) {
    this.o = { ...DEFAULTS, ...options };
    this.batcher = new RecalculateBatcher(
      (tenantId, ids) => scorer.scoreCustomers(tenantId, ids, history),
      log,
      this.o,
    );
  }

  start(): void {
    this.sub = this.nc.subscribe(subjects.healthRecalculate, {
      queue: SCORER_QUEUE,
      callback: (err, msg) => {
        if (err) {
          this.log.warn({ err: String(err) }, 'health recalculation subscription error');
          return;
        }
        if (this.inFlight.size >= this.o.maxInFlight) {
          this.reply(msg, { ok: false, error: 'scorer_busy' });
          return;
        }
        const p = this.handle(msg).finally(() => this.inFlight.delete(p));
        this.inFlight.add(p);
      },
    });
  }

  private async handle(msg: Msg): Promise<void> {
    const req = parse(msg.data);
    if (!req) {
      this.metrics.recalculated('invalid');
      this.reply(msg, { ok: false, error: 'invalid_request' });
      return;
    }
    try {
      const health = await this.batcher.recalculate(req.tenant_id, req.customer_id);
      this.metrics.recalculated(health ? 'ok' : 'unknown_customer');
      // The health is JSON text already: spliced in, not parsed and serialized again.
      if (health) this.respond(msg, `{"ok":true,"health":${health}}`);
      else this.reply(msg, { ok: false, error: 'unknown_customer' });
    } catch {
      // Logged once per batch by the batcher.
      this.metrics.recalculated('failed');
      this.reply(msg, { ok: false, error: 'recalculation_failed' });
    }
  }

  private reply(msg: Msg, r: RecalculateReply): void {
    this.respond(msg, JSON.stringify(r));
  }

  private respond(msg: Msg, text: string): void {
    if (!msg.reply) return;
    try {
      msg.respond(text);
    } catch (err) {
      this.log.warn({ err: String(err) }, 'health recalculation reply failed');
    }
  }

  /** Stops taking requests and lets those in progress answer. */
  async stop(): Promise<void> {
    this.sub?.unsubscribe();
    await Promise.all(this.inFlight);
  }
}

function parse(data: Uint8Array): RecalculateRequest | undefined {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(data).toString('utf8'));
  } catch {
    return undefined;
  }
  const r = v as Partial<RecalculateRequest> | null;
  if (typeof r !== 'object' || r === null) return undefined;
  if (typeof r.tenant_id !== 'string' || typeof r.customer_id !== 'string') return undefined;
  if (!isUuid(r.tenant_id) || !isUuid(r.customer_id)) return undefined;
  return { tenant_id: r.tenant_id.toLowerCase(), customer_id: r.customer_id.toLowerCase() };
}
