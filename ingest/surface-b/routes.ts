import type { AuditLog } from '../../lib/credentials/audit.js';
import type { Authenticator } from '../../lib/credentials/authenticate.js';
import { clientIp, type Allowlist } from '../../lib/credentials/ip.js';
import { endpoint, type Dialect, type Exchange } from '../../lib/http/kernel.js';
import { refuseUnread } from '../../lib/http/body.js';
import type { Traffic } from '../../lib/http/traffic.js';
import { methodOf, reply, STATUS_TEXT, type HttpRequest, type HttpResponse } from '../../lib/http/uws.js';
import { requestHash } from '../../lib/idempotency.js';
import { uuidv7 } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { isPgUnavailable, STORE_RETRY_AFTER_S } from '../../lib/pg.js';
import { subjects } from '../../lib/nats.js';
import { ApiError, invalid, problemBody } from '../../lib/problem.js';
import type { SharedRateLimiter } from '../../lib/rate-limit.js';
import { MAX_BACKFILL_AGE_MS } from '../../schemas/events.js';
import { MAX_EVENT_AGE_MS } from '../../schemas/ingest.js';
import type { IngestMetrics } from '../metrics.js';
import { EventStoreFull } from '../publisher.js';
import type { DailyQuota } from '../quota.js';
import type { Resolver } from '../resolver.js';
import { prepareB, release, scanEvents, type PreparedB } from './events.js';
import type { EventQuery } from './query.js';
import { type Admission, admit, decode, idempotencyKey, queryParams, requireJson, validate } from './steps.js';
import type { Answer, SurfaceBStore } from './store.js';

/**
 * Ingestion surface B: POST /v1/events, POST /v1/events/backfill and GET /v1/events, with the
 * core API's bearer credentials, scopes and problem+json errors, on the ingest tier's hot path.
 * The routes are the entries of schemas/ingest-routes.ts; each runs its steps (steps.ts) in order.
 */

export interface SurfaceBOptions {
  maxBodyBytes: number;
  batchesPerMinute: number;
  backfillsPerMinute: number;
  readsPerMinute: number;
  futureSkewMs: number;
  ageGraceMs: number;
}

export interface SurfaceBDeps {
  auth: Authenticator;
  audit: AuditLog;
  limiter: SharedRateLimiter;
  quota: DailyQuota;
  store: SurfaceBStore;
  resolver: Resolver;
  events: EventQuery;
  metrics: IngestMetrics;
  log: Logger;
  baseUrl: string;
  trustedProxies: Allowlist;
  traffic: Traffic;
  opts: SurfaceBOptions;
}

type Kind = 'events' | 'backfill' | 'query';

interface ExchangeB extends Exchange, Admission {
  kind: Kind;
  ip: string;
}

/** An answer: the store's (bytes, replayed as recorded) or one written here (problem+json, a page of events). */
interface Out {
  status: number;
  body: string | Buffer;
  headers: Array<[string, string]>;
}

const METRIC: Record<Kind, string> = { events: 'events_b', backfill: 'events_backfill', query: 'events_query' };
const DEFAULT_QUERY_SPAN_MS = 7 * 24 * 3600_000;
const JSON_TYPE: Array<[string, string]> = [['Content-Type', 'application/json']];

export function surfaceB(d: SurfaceBDeps) {
  const { log, metrics, opts } = d;

  const dialect: Dialect<ExchangeB, Out> = {
    traffic: d.traffic,
    refusal: (r) =>
      r.kind === 'framing'
        ? new ApiError('invalid_request', r.message)
        : r.kind === 'too_large'
          ? new ApiError('payload_too_large', `The request body exceeds ${r.maxBytes} bytes; send smaller batches.`)
          : r.kind === 'bad_encoding'
            ? new ApiError('unsupported_media_type', r.message)
            : new ApiError('service_unavailable', 'The server is busy; nothing was stored. Retry shortly.', undefined, [
                ['Retry-After', '1'],
              ]),
    render(x, err) {
      let e: ApiError;
      if (err instanceof ApiError) e = err;
      else if (err instanceof EventStoreFull) {
        log.error({ trace_id: x.traceId, err: err.message }, 'event store refused the batch');
        e = new ApiError(
          'service_unavailable',
          'The event store is full; no event of this request was stored. Retry later.',
          undefined,
          [['Retry-After', String(err.retryAfter)]],
        );
      } else if (isPgUnavailable(err)) {
        log.error({ trace_id: x.traceId, err }, 'PostgreSQL unavailable');
        e = new ApiError(
          'service_unavailable',
          'The database is unavailable; no event of this request was stored. Retry shortly.',
          undefined,
          [['Retry-After', String(STORE_RETRY_AFTER_S)]],
        );
      } else {
        log.error({ trace_id: x.traceId, err }, 'surface B request failed');
        e = new ApiError(
          'internal_error',
          x.kind === 'query'
            ? 'The query failed. Retry with backoff; quote the trace_id when contacting support.'
            : 'No event of this request was stored. Retry with backoff; quote the trace_id when contacting support.',
        );
      }
      metrics.refused('b', e.code);
      if (e.status < 500) log.debug({ trace_id: x.traceId, code: e.code }, 'request refused');
      else if (e.status === 503) log.warn({ trace_id: x.traceId, code: e.code, detail: e.message }, 'unavailable');
      const body = JSON.stringify(problemBody(d.baseUrl, e, x.head.url, x.traceId));
      return { status: e.status, body, headers: [['Content-Type', 'application/problem+json'], ...e.headers] };
    },
    send(x, a, close) {
      const all: Array<[string, string]> = [['X-Trace-Id', x.traceId], ['Cache-Control', 'no-store'], ...a.headers];
      if (x.rate)
        all.push(
          ['X-RateLimit-Limit', String(x.rate.limit)],
          ['X-RateLimit-Remaining', String(x.rate.remaining)],
          ['X-RateLimit-Reset', String(x.rate.resetAt)],
        );
      reply(x.res, x.state, STATUS_TEXT[a.status] ?? `${a.status} Unknown`, all, a.body, close);
      metrics.observe(METRIC[x.kind], a.status, performance.now() - x.started);
      if (x.principal)
        d.audit.record({
          tenant_id: x.principal.tenantId,
          actor_kind: x.principal.kind,
          actor_id: x.principal.actorId,
          trace_id: x.traceId,
          method: x.head.method,
          endpoint: x.head.url,
          status: a.status,
          ip: x.ip,
          at: new Date(),
        });
    },
    lost: (x, err) => log.error({ trace_id: x.traceId, err }, 'answer not written'),
  };

  const open = (kind: Kind) => (x: Exchange) => {
    const b = x as ExchangeB;
    b.kind = kind;
    b.ip = clientIp(x.head.remoteAddress, x.head.headers['x-forwarded-for'], d.trustedProxies);
    return b;
  };

  /** POST /v1/events and POST /v1/events/backfill: the same steps, another window, bucket and subject. */
  async function ingest(x: ExchangeB, body: Buffer): Promise<Answer> {
    const backfill = x.kind === 'backfill';
    const p = await admit(
      d,
      x,
      x.head,
      x.ip,
      backfill ? 'events_backfill' : 'events_b',
      backfill ? opts.backfillsPerMinute : opts.batchesPerMinute,
      'events:write',
    );
    const key = idempotencyKey(x.head);
    requireJson(x.head, body);
    const now = Date.now();
    // A body that cannot be read throws here, before the plan is asked for.
    const reading = read(x, p.tenantId, body, backfill, now);
    const [plan, prepared] = await Promise.all([d.quota.planOf(p.tenantId), reading]);
    const jobId = backfill ? uuidv7(now) : undefined;
    const counts = { accepted: prepared.accepted, rejected: prepared.errors.length, errors: prepared.errors };
    const answer: Answer = backfill
      ? {
          status: 202,
          body: Buffer.from(
            JSON.stringify({
              job_id: jobId,
              status: prepared.rowCount === 0 ? 'succeeded' : 'queued',
              status_url: `/v1/jobs/${jobId}`,
              ...counts,
            }),
          ),
          headers: [...JSON_TYPE, ['Location', `/v1/jobs/${jobId}`]],
        }
      : { status: 200, body: Buffer.from(JSON.stringify(counts)), headers: JSON_TYPE };
    // Quota, job row, Idempotency-Key record and publish, the publish last (store.ts).
    const out = await d.store
      .store({
        tenantId: p.tenantId,
        plan,
        subject: backfill ? subjects.backfill(p.tenantId) : subjects.usage(p.tenantId),
        msgId: x.traceId,
        prepared,
        idempotency:
          key === undefined
            ? undefined
            : { scope: backfill ? 'events.backfill' : 'events', key, hash: requestHash(body) },
        job: backfill ? { id: jobId!, rejected: prepared.errors.length } : undefined,
        answer,
      })
      .finally(() => release(prepared, d.store.payloads));
    metrics.events(out.stored, out.replayed ? 0 : prepared.errors.length);
    return out.replayed ? { ...out, headers: [...out.headers, ['Idempotent-Replayed', 'true']] } : out;
  }

  /**
   * The request's events read, checked and written as rows, in a function of its own. Until V8
   * optimizes it, an async function keeps every local alive across its awaits, and `ingest` runs
   * only a few dozen times a second: the events (a thousand objects and their strings) waited
   * through the store's PostgreSQL round trips, copied by every collection meanwhile and
   * promoted. Only the rows and the keys need to wait.
   */
  function read(x: ExchangeB, tenantId: string, body: Buffer, backfill: boolean, now: number): Promise<PreparedB> {
    // Read from the bytes when the scanner covers the body (every event then valid), else parsed
    // and validated, each event then checked on its own in prepareB.
    const scanned = scanEvents(body);
    const { events, unstorable, numbers } = scanned ? { events: scanned } : validate(decode(x.head, body));
    return prepareB(events, {
      tenantId,
      batchId: x.traceId,
      now,
      resolver: d.resolver,
      unstorable,
      numbers,
      checked: scanned !== undefined,
      payloads: d.store.payloads,
      oldest: now - (backfill ? MAX_BACKFILL_AGE_MS : MAX_EVENT_AGE_MS) - opts.ageGraceMs,
      newest: now + opts.futureSkewMs,
      tooOld: backfill
        ? 'timestamp is more than 2 years in the past'
        : 'timestamp is more than 30 days in the past; send older events to POST /v1/events/backfill',
    });
  }

  /** GET /v1/events: a page of stored events, newest first. */
  async function list(x: ExchangeB): Promise<Out> {
    const p = await admit(d, x, x.head, x.ip, 'events_read', opts.readsPerMinute, 'events:read');
    const v = queryParams(x.head.query);
    const toMs = v.to !== undefined ? Date.parse(v.to) : Date.now() + opts.futureSkewMs;
    const fromMs = v.from !== undefined ? Date.parse(v.from) : toMs - DEFAULT_QUERY_SPAN_MS;
    if (!(fromMs < toMs)) throw invalid([{ field: 'from', code: 'invalid_range', message: 'from must be before to' }]);
    const page = await d.events.page({
      tenantId: p.tenantId,
      customerId: v.customer_id?.toLowerCase(),
      eventName: v.event_name,
      fromMs,
      toMs,
      limit: v.limit ?? 100,
      cursor: v.cursor,
    });
    return { status: 200, body: JSON.stringify(page), headers: JSON_TYPE };
  }

  const events = endpoint(dialect, {
    open: open('events'),
    maxBodyBytes: () => opts.maxBodyBytes,
    steps: (x, body) => ingest(x, body!),
  });
  const backfill = endpoint(dialect, {
    open: open('backfill'),
    maxBodyBytes: () => opts.maxBodyBytes,
    steps: (x, body) => ingest(x, body!),
  });
  const query = endpoint(dialect, { open: open('query'), maxBodyBytes: () => undefined, steps: list });

  const notAllowed = (allow: string) => (res: HttpResponse, req: HttpRequest) => {
    const traceId = uuidv7();
    const method = methodOf(req);
    const e = new ApiError(
      'method_not_allowed',
      `${method} is not allowed on ${req.getUrl()}; allowed: ${allow}.`,
      undefined,
      [['Allow', allow]],
    );
    const body = JSON.stringify(problemBody(d.baseUrl, e, req.getUrl(), traceId));
    const headers: Array<[string, string]> = [
      ['Content-Type', 'application/problem+json'],
      ['X-Trace-Id', traceId],
      ['Allow', allow],
    ];
    refuseUnread(res, req, method === 'HEAD', STATUS_TEXT[405], headers, body);
  };

  return {
    events,
    backfill,
    query,
    eventsNotAllowed: notAllowed('GET, POST'),
    backfillNotAllowed: notAllowed('POST'),
  };
}
