import type { NatsConnection } from 'nats';
import type { Logger } from '../../lib/logger.js';
import { subjects } from '../../lib/nats.js';
import type { RecalculateReply, RecalculateRequest } from '../../schemas/health.js';
import { CommandResponder, requestUuids } from '../command-responder.js';
import type { HealthMetrics } from '../metrics.js';
import { type BatcherOptions, RecalculateBatcher } from './batcher.js';
import type { HealthScorer } from './scorer.js';
import type { HistoryBuffer } from './store.js';

export interface ResponderOptions extends BatcherOptions {
  /** Requests held at once (waiting or being calculated); more are answered scorer_busy. */
  maxInFlight: number;
}

const DEFAULTS: ResponderOptions = { maxInFlight: 256, maxBatch: 500, windowMs: 2 };

/** A reply, or a success's JSON text with the health spliced in (it is JSON text already). */
type Reply = RecalculateReply | string;

/**
 * On-demand recalculation (POST /v1/customers/{id}/health/recalculate): core NATS requests on
 * cmd.health.recalculate, shared by every processors instance through one queue group, answered
 * once customer_health is committed. Requests of one workspace are calculated together (see
 * batcher.ts). A bad request gets `{ok: false, error}`; nothing a message holds can throw out of
 * the handler. Requests beyond `maxInFlight` are refused at once so the core API answers 503
 * instead of waiting for its timeout behind a queue.
 */
export function recalculateResponder(
  nc: NatsConnection,
  scorer: HealthScorer,
  history: HistoryBuffer,
  log: Logger,
  metrics: HealthMetrics,
  options: Partial<ResponderOptions> = {},
): CommandResponder<RecalculateRequest, Reply> {
  const o: ResponderOptions = { ...DEFAULTS, ...options };
  const batcher = new RecalculateBatcher((tenantId, ids) => scorer.scoreCustomers(tenantId, ids, history), log, o);
  return new CommandResponder<RecalculateRequest, Reply>(
    nc,
    {
      subject: subjects.healthRecalculate,
      queue: 'health-scorer',
      what: 'health recalculation',
      parse(data) {
        const r = requestUuids(data, 'tenant_id', 'customer_id');
        if (!r) metrics.recalculated('invalid');
        return r && { tenant_id: r.tenant_id, customer_id: r.customer_id };
      },
      async handle(req) {
        try {
          const health = await batcher.recalculate(req.tenant_id, req.customer_id);
          metrics.recalculated(health ? 'ok' : 'unknown_customer');
          return health ? `{"ok":true,"health":${health}}` : { ok: false, error: 'unknown_customer' };
        } catch {
          // Logged once per batch by the batcher.
          metrics.recalculated('failed');
          return { ok: false, error: 'recalculation_failed' };
        }
      },
      text: (r) => (typeof r === 'string' ? r : JSON.stringify(r)),
      invalid: { ok: false, error: 'invalid_request' },
      busy: { ok: false, error: 'scorer_busy' },
      failed: { ok: false, error: 'recalculation_failed' },
      maxInFlight: o.maxInFlight,
    },
    log,
  );
}
