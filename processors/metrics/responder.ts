import type { Msg, NatsConnection, Subscription } from 'nats';
import { isUuid } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { subjects } from '../../lib/nats.js';
import type { Sql } from '../../lib/pg.js';
import type { MaterializeReply, MaterializeRequest } from '../../schemas/materialize.js';
import { metricForNow } from './consumers.js';
import type { Materializer } from './materializer.js';

export const MATERIALIZER_QUEUE = 'metric-materializer';

/**
 * Materialize now (POST /v1/metrics/{id}/materialize): core NATS requests on
 * cmd.metrics.materialize, shared by every processors instance through one queue group, answered
 * once the values are stored. It takes no lease: a scheduled run of the same workspace at the
 * same time writes the same kind of rows, the latest computed_at winning. Requests beyond
 * `maxInFlight` are refused at once (`busy`), so the core API answers 503 instead of queueing.
 */
export class MaterializeResponder {
  private sub?: Subscription;
  private inFlight = new Set<Promise<void>>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly sql: Sql,
    private readonly materializer: Materializer,
    private readonly log: Logger,
    private readonly maxInFlight = 8,
  ) {}

  start(): void {
    this.sub = this.nc.subscribe(subjects.metricsMaterialize, {
      queue: MATERIALIZER_QUEUE,
      callback: (err, msg) => {
        if (err) {
          this.log.warn({ err: String(err) }, 'materialize subscription error');
          return;
        }
        if (this.inFlight.size >= this.maxInFlight) return this.reply(msg, { ok: false, error: 'busy' });
        const p = this.handle(msg).finally(() => this.inFlight.delete(p));
        this.inFlight.add(p);
      },
    });
  }

  private async handle(msg: Msg): Promise<void> {
    const req = parse(msg.data);
    if (!req) return this.reply(msg, { ok: false, error: 'invalid_request' });
    try {
      const m = await metricForNow(this.sql, req.tenant_id, req.metric_id);
      if (!m.found) return this.reply(msg, { ok: false, error: 'unknown_metric' });
      if (m.deleted) return this.reply(msg, { ok: false, error: 'metric_deleted' });
      const summary = await this.materializer.materializeOne(req.tenant_id, m.metric);
      this.log.info({ tenantId: req.tenant_id, ...summary }, 'metric materialized on request');
      this.reply(msg, { ok: true, ...summary });
    } catch (err) {
      this.log.error({ err, ...req }, 'metric materialization on request failed');
      this.reply(msg, { ok: false, error: 'materialization_failed' });
    }
  }

  private reply(msg: Msg, r: MaterializeReply): void {
    if (!msg.reply) return;
    try {
      msg.respond(JSON.stringify(r));
    } catch (err) {
      this.log.warn({ err: String(err) }, 'materialize reply failed');
    }
  }

  /** Stops taking requests and lets those in progress answer. */
  async stop(): Promise<void> {
    this.sub?.unsubscribe();
    await Promise.all(this.inFlight);
  }
}

function parse(data: Uint8Array): MaterializeRequest | undefined {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(data).toString('utf8'));
  } catch {
    return undefined;
  }
  const r = v as Partial<MaterializeRequest> | null;
  if (typeof r !== 'object' || r === null) return undefined;
  if (typeof r.tenant_id !== 'string' || typeof r.metric_id !== 'string') return undefined;
  if (!isUuid(r.tenant_id) || !isUuid(r.metric_id)) return undefined;
  return { tenant_id: r.tenant_id.toLowerCase(), metric_id: r.metric_id.toLowerCase() };
}
