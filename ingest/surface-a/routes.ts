import { uuidv7 } from '../../lib/ids.js';
import { endpoint, type Dialect, type Exchange } from '../../lib/http/kernel.js';
import { refuseUnread } from '../../lib/http/body.js';
import type { Traffic } from '../../lib/http/traffic.js';
import { methodOf, reply, STATUS_TEXT, type HttpRequest, type HttpResponse } from '../../lib/http/uws.js';
import type { Logger } from '../../lib/logger.js';
import { isPgUnavailable, STORE_RETRY_AFTER_S } from '../../lib/pg.js';
import { compile } from '../../schemas/ajv.js';
import { INGEST_ROUTES } from '../../schemas/ingest-routes.js';
import type { BillingEvent } from '../../schemas/ingest.js';
import { numberRejections } from '../event-rules.js';
import { EventStoreFull } from '../publisher.js';
import { prepareBilling } from './billing.js';
import { type Answer, answer, answerError, bodyProblem, IngestError } from './errors.js';
import {
  answerBilling,
  answerUsage,
  authenticate,
  decode,
  exactAmounts,
  publishBilling,
  publishUsage,
  quota,
  rateLimit,
  requireJson,
  type SurfaceADeps,
  validate,
} from './steps.js';
import { type IncomingUsage, prepareUsage, scanUsage } from './usage.js';

/**
 * Ingestion surface A: POST /v1/ingest/events and POST /v1/ingest/billing-events with an
 * X-API-Key, in SPEC.md's wire shapes. The routes are the entries of schemas/ingest-routes.ts (the
 * OpenAPI document is written from the same table); each runs its steps (steps.ts) in order.
 */

const usageBatch = compile(INGEST_ROUTES.usage.body);
const billingBatch = compile(INGEST_ROUTES.billing.body);

/** Only the header fields the steps read are copied from the request. */
const READS: ReadonlySet<string> = new Set(['x-api-key', 'content-type']);

interface ExchangeA extends Exchange {
  endpoint: 'usage' | 'billing';
}

/** Names the exchange's endpoint in place: the hot path allocates nothing for it. */
function named(x: Exchange, endpoint: ExchangeA['endpoint']): ExchangeA {
  (x as ExchangeA).endpoint = endpoint;
  return x as ExchangeA;
}

export interface SurfaceA extends SurfaceADeps {
  log: Logger;
  traffic: Traffic;
}

export function surfaceA(d: SurfaceA) {
  const dialect: Dialect<ExchangeA, Answer> = {
    traffic: d.traffic,
    refusal: (r) =>
      r.kind === 'framing'
        ? new IngestError('invalid_framing', r.message)
        : r.kind === 'too_large'
          ? new IngestError('payload_too_large', r.message, [
              {
                type: 'payload_too_large',
                loc: ['body'],
                msg: `Request body exceeds ${r.maxBytes} bytes`,
                input: null,
              },
            ])
          : r.kind === 'bad_encoding'
            ? bodyProblem('content_encoding_invalid', r.message, ['header', 'content-encoding'])
            : new IngestError('service_unavailable', 'The server is busy', [], 1),
    render(x, err) {
      d.metrics.refused(
        'a',
        err instanceof IngestError
          ? err.code
          : isPgUnavailable(err) || err instanceof EventStoreFull
            ? 'service_unavailable'
            : 'internal_error',
      );
      if (err instanceof IngestError && err.code !== 'internal_error') {
        if (err.code === 'service_unavailable') d.log.error({ trace_id: x.traceId, err: err.message }, 'batch refused');
        return answerError(err);
      }
      if (err instanceof EventStoreFull) {
        d.log.error({ trace_id: x.traceId, err: err.message }, 'batch refused');
        return answer('service_unavailable', err.message, [], err.retryAfter);
      }
      if (isPgUnavailable(err)) {
        d.log.error({ trace_id: x.traceId, err }, 'batch refused: PostgreSQL unavailable');
        return answer('service_unavailable', 'The database is unavailable', [], STORE_RETRY_AFTER_S);
      }
      d.log.error({ trace_id: x.traceId, err }, 'ingestion failed');
      return answer('internal_error', '');
    },
    send(x, a, close) {
      const headers: Array<[string, string]> = [
        ['Content-Type', 'application/json'],
        ['X-Trace-Id', x.traceId],
        ...a.headers,
      ];
      reply(x.res, x.state, STATUS_TEXT[a.status], headers, JSON.stringify(a.body), close);
      d.metrics.observe(x.endpoint, a.status, performance.now() - x.started);
    },
    lost: (x, err) => d.log.error({ trace_id: x.traceId, err }, 'answer not written'),
  };

  const usage = endpoint(dialect, {
    headers: READS,
    open: (x) => named(x, 'usage'),
    maxBodyBytes: () => d.opts.maxBodyBytes,
    async steps(x, body) {
      const org = await authenticate(d, x.head);
      await rateLimit(d, org);
      requireJson(x.head, body!);
      // Read from the bytes when the scanner covers the body, else parsed and validated (ingest/scan.ts).
      const scanned = scanUsage(body!);
      const decoded = scanned ? undefined : decode(x.head, body!);
      const events = scanned ?? (validate(usageBatch, decoded!.value) as { events: IncomingUsage[] }).events;
      const p = await prepareUsage(events, {
        numbers: numberRejections(decoded?.inexact),
        tenantId: org.tenantId,
        batchId: x.traceId,
        now: Date.now(),
        resolver: d.resolver,
        payloads: d.publisher.payloads,
        futureSkewMs: d.opts.futureSkewMs,
        ageGraceMs: d.opts.ageGraceMs,
      });
      await quota(d, org, p.accepted);
      await publishUsage(d, org, p, x.traceId);
      return answerUsage(d, p);
    },
  });

  const billing = endpoint(dialect, {
    headers: READS,
    open: (x) => named(x, 'billing'),
    maxBodyBytes: () => d.opts.maxBodyBytes,
    async steps(x, body) {
      const org = await authenticate(d, x.head);
      await rateLimit(d, org);
      const decoded = decode(x.head, body!);
      exactAmounts(decoded.inexact);
      const { events } = validate(billingBatch, decoded.value) as { events: BillingEvent[] };
      const p = await prepareBilling(events, {
        tenantId: org.tenantId,
        batchId: x.traceId,
        now: Date.now(),
        resolver: d.resolver,
        payloads: d.publisher.payloads,
      });
      await publishBilling(d, org, p, x.traceId);
      return answerBilling(d, p);
    },
  });

  /** 404 for a path of no surface's, 405 for another method on surface A's own paths; the body is dropped first. */
  const unmatched = (res: HttpResponse, req: HttpRequest) => {
    const traceId = uuidv7();
    const url = req.getUrl();
    const found = url === INGEST_ROUTES.usage.path || url === INGEST_ROUTES.billing.path;
    const a = found ? answer('method_not_allowed', 'Method Not Allowed') : answer('not_found', 'Not Found');
    const headers: Array<[string, string]> = [
      ['Content-Type', 'application/json'],
      ['X-Trace-Id', traceId],
      ...a.headers,
    ];
    if (found) headers.push(['Allow', 'POST']);
    refuseUnread(res, req, methodOf(req) === 'HEAD', STATUS_TEXT[a.status], headers, JSON.stringify(a.body));
  };

  return { usage, billing, unmatched };
}
