import type { NatsConnection } from 'nats';
import type { Logger } from '../../lib/logger.js';
import { subjects } from '../../lib/nats.js';
import type { Sql } from '../../lib/pg.js';
import type { MaterializeReply, MaterializeRequest } from '../../schemas/materialize.js';
import { CommandResponder, requestUuids } from '../command-responder.js';
import { metricForNow } from './consumers.js';
import type { Materializer } from './materializer.js';

/**
 * Materialize now (POST /v1/metrics/{id}/materialize): cmd.metrics.materialize, answered once the
 * values are stored. It takes no lease: a scheduled run of the same workspace at the same time
 * writes the same kind of rows, the latest computed_at winning.
 */
export function materializeNowResponder(
  nc: NatsConnection,
  sql: Sql,
  materializer: Materializer,
  log: Logger,
  maxInFlight = 8,
): CommandResponder<MaterializeRequest, MaterializeReply> {
  return new CommandResponder<MaterializeRequest, MaterializeReply>(
    nc,
    {
      subject: subjects.metricsMaterialize,
      queue: 'metric-materializer',
      what: 'metric materialization',
      parse,
      async handle(req) {
        const m = await metricForNow(sql, req.tenant_id, req.metric_id);
        if (!m.found) return { ok: false, error: 'unknown_metric' };
        if (m.deleted) return { ok: false, error: 'metric_deleted' };
        const summary = await materializer.materializeOne(req.tenant_id, m.metric);
        log.info({ tenantId: req.tenant_id, ...summary }, 'metric materialized on request');
        return { ok: true, ...summary };
      },
      invalid: { ok: false, error: 'invalid_request' },
      busy: { ok: false, error: 'busy' },
      failed: { ok: false, error: 'materialization_failed' },
      maxInFlight,
    },
    log,
  );
}

function parse(data: Uint8Array): MaterializeRequest | undefined {
  const r = requestUuids(data, 'tenant_id', 'metric_id');
  return r && { tenant_id: r.tenant_id, metric_id: r.metric_id };
}
