import type { AuditLog } from '../lib/credentials/audit.js';
import type { Authenticator } from '../lib/credentials/authenticate.js';
import { clientIp, type Allowlist } from '../lib/credentials/ip.js';
import type { Principal } from '../lib/credentials/principal.js';
import { requireScope } from '../lib/credentials/scopes.js';
import { uuidv7 } from '../lib/ids.js';
import { decodeJson, inspect, isJsonContentType, pathText } from '../lib/json.js';
import type { Logger } from '../lib/logger.js';
import { subjects } from '../lib/nats.js';
import { ApiError, fieldErrors, invalid, problemBody } from '../lib/problem.js';
import type { Decision, SharedRateLimiter } from '../lib/rate-limit.js';
import {
  methodOf,
  readHead,
  reply,
  STATUS_TEXT,
  type HttpRequest,
  type HttpResponse,
  type ReplyState,
  type RequestHead,
  type TemplatedApp,
} from '../lib/uws.js';
import { afterBody, readBody, refuseUnread } from '../lib/uws-body.js';
import { compile } from '../schemas/ajv.js';
import { compileQuery } from '../schemas/core/validate.js';
import { BatchShapeB, EventsQuery, MAX_BACKFILL_AGE_MS } from '../schemas/events.js';
import { MAX_EVENT_AGE_MS } from '../schemas/ingest.js';
import { admitBody, type Traffic } from './app.js';
import { IngestError } from './errors.js';
import { prepareB } from './events-b.js';
import type { EventQuery } from './event-query.js';
import type { IngestMetrics } from './metrics.js';
import type { DailyQuota } from './quota.js';
import type { Resolver } from './resolver.js';
import type { SurfaceBStore } from './store-b.js';
import { IDEMPOTENCY_KEY_RE, requestHash } from '../lib/idempotency.js';

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
  opts: SurfaceBOptions;
}

type Kind = 'events' | 'backfill' | 'query';

interface Ctx {
  res: HttpResponse;
  state: ReplyState;
  head: RequestHead;
  /** Close the connection after the answer (framing in doubt, or a refused body not read to its end). */
  close?: boolean;
  traceId: string;
  started: number;
  kind: Kind;
  rate?: Decision;
  principal?: Principal;
  ip: string;
}

const shape = compile(BatchShapeB);
const query = compileQuery(EventsQuery);
const DEFAULT_QUERY_SPAN_MS = 7 * 24 * 3600_000;

/**
 * Ingestion surface B: POST /v1/events, POST /v1/events/backfill and GET /v1/events, with the
 * core API's bearer credentials, scopes and problem+json errors, on the ingest tier's hot path.
 */
export function surfaceB(app: TemplatedApp, deps: SurfaceBDeps, traffic: Traffic): TemplatedApp {
  const { log, metrics, opts } = deps;

  const send = (c: Ctx, status: number, body: string | Buffer, headers: Array<[string, string]>) => {
    const all: Array<[string, string]> = [['X-Trace-Id', c.traceId], ['Cache-Control', 'no-store'], ...headers];
    if (c.rate)
      all.push(
        ['X-RateLimit-Limit', String(c.rate.limit)],
        ['X-RateLimit-Remaining', String(c.rate.remaining)],
        ['X-RateLimit-Reset', String(c.rate.resetAt)],
      );
    reply(c.res, c.state, STATUS_TEXT[status] ?? `${status} Unknown`, all, body, traffic.draining || c.close);
    metrics.observe(
      c.kind === 'query' ? 'events_query' : c.kind === 'backfill' ? 'events_backfill' : 'events_b',
      status,
      performance.now() - c.started,
    );
    if (c.principal) {
      deps.audit.record({
        tenant_id: c.principal.tenantId,
        actor_kind: c.principal.kind,
        actor_id: c.principal.actorId,
        trace_id: c.traceId,
        method: c.head.method,
        endpoint: c.head.url,
        status,
        ip: c.ip,
        at: new Date(),
      });
    }
  };

  const fail = (c: Ctx, err: unknown) => {
    let e: ApiError;
    if (err instanceof ApiError) e = err;
    else if (err instanceof IngestError && err.code === 'service_unavailable') {
      log.error({ trace_id: c.traceId, err: err.message }, 'event store refused the batch');
      e = new ApiError(
        'service_unavailable',
        'The event store is full; no event of this request was stored. Retry later.',
        undefined,
        [['Retry-After', String(err.retryAfter || 5)]],
      );
    } else {
      log.error({ trace_id: c.traceId, err }, 'surface B request failed');
      e = new ApiError(
        'internal_error',
        c.kind === 'query'
          ? 'The query failed. Retry with backoff; quote the trace_id when contacting support.'
          : 'No event of this request was stored. Retry with backoff; quote the trace_id when contacting support.',
      );
    }
    if (e.status < 500) log.debug({ trace_id: c.traceId, code: e.code }, 'request refused');
    else if (e.status === 503) log.warn({ trace_id: c.traceId, code: e.code, detail: e.message }, 'unavailable');
    send(c, e.status, JSON.stringify(problemBody(deps.baseUrl, e, c.head.url, c.traceId)), [
      ['Content-Type', 'application/problem+json'],
      ...e.headers,
    ]);
  };

  async function admit(
    c: Ctx,
    bucket: string,
    perMinute: number,
    scope: 'events:write' | 'events:read',
  ): Promise<Principal> {
    const p = await deps.auth.authenticate(c.head.headers.authorization, c.ip);
    c.principal = p;
    const d = await deps.limiter.take(p.tenantId, bucket, perMinute, 60_000);
    c.rate = d;
    if (!d.ok)
      throw new ApiError(
        'rate_limited',
        `Rate limit of ${d.limit} requests per minute exceeded for this workspace; retry in ${d.retryAfter} s.`,
        undefined,
        [['Retry-After', String(d.retryAfter)]],
      );
    requireScope(p, scope);
    return p;
  }

  /** The events, and those holding text no store can hold: index → the field (each rejected as invalid_unicode). */
  function parse(head: RequestHead, body: Buffer): { events: unknown[]; unstorable?: Map<number, string> } {
    const ct = head.headers['content-type'];
    if (!isJsonContentType(ct))
      throw new ApiError('unsupported_media_type', `Content-Type must be application/json${ct ? `, not ${ct}` : ''}.`);
    if (body.length === 0)
      throw new ApiError('malformed_json', 'The request body is empty; expected a JSON object with "events".');
    const decoded = decodeJson(body);
    if (!decoded.ok && (decoded.reason === 'not_utf8' || decoded.reason === 'syntax')) {
      throw new ApiError(
        'malformed_json',
        decoded.reason === 'not_utf8'
          ? 'The request body is not valid UTF-8.'
          : `The request body is not valid JSON: ${decoded.message}.`,
      );
    }
    const parsed = decoded.value;
    let unstorable: Map<number, string> | undefined;
    if (!decoded.ok) {
      const [top, first] = decoded.path;
      const events = (parsed as { events?: unknown }).events;
      // Inside one event it costs only that event; anywhere else the request is refused.
      if (top !== 'events' || typeof first !== 'number' || !Array.isArray(events)) {
        const field = pathText(decoded.path) || 'body';
        throw invalid([{ field, code: 'invalid_unicode', message: `${field} ${decoded.message}` }]);
      }
      unstorable = new Map([[first, pathText(decoded.path.slice(2))]]);
      for (let i = first + 1; i < events.length; i++) {
        const found = inspect(events[i], { text: true });
        if (found) unstorable.set(i, pathText(found.path));
      }
    }
    if (!shape.check(parsed)) {
      shape.explain(parsed);
      throw invalid(fieldErrors(shape.explain.errors ?? shape.check.errors));
    }
    return { events: (parsed as { events: unknown[] }).events, unstorable };
  }

  async function ingest(c: Ctx, body: Buffer): Promise<void> {
    const backfill = c.kind === 'backfill';
    const p = await admit(
      c,
      backfill ? 'events_backfill' : 'events_b',
      backfill ? opts.backfillsPerMinute : opts.batchesPerMinute,
      'events:write',
    );
    const key = c.head.headers['idempotency-key'];
    if (key !== undefined && !IDEMPOTENCY_KEY_RE.test(key)) {
      throw invalid([
        {
          field: 'Idempotency-Key',
          code: 'invalid_format',
          message: 'Idempotency-Key must be 1 to 255 visible ASCII characters',
        },
      ]);
    }
    const { events, unstorable } = parse(c.head, body);
    const now = Date.now();
    const [plan, prepared] = await Promise.all([
      deps.quota.planOf(p.tenantId),
      prepareB(events, {
        tenantId: p.tenantId,
        batchId: c.traceId,
        now,
        resolver: deps.resolver,
        unstorable,
        oldest: now - (backfill ? MAX_BACKFILL_AGE_MS : MAX_EVENT_AGE_MS) - opts.ageGraceMs,
        newest: now + opts.futureSkewMs,
        tooOld: backfill
          ? 'timestamp is more than 2 years in the past'
          : 'timestamp is more than 30 days in the past; send older events to POST /v1/events/backfill',
      }),
    ]);
    const jobId = backfill ? uuidv7(now) : undefined;
    const answer = backfill
      ? {
          status: 202,
          body: {
            job_id: jobId,
            status: 'queued',
            status_url: `/v1/jobs/${jobId}`,
            accepted: prepared.accepted,
            rejected: prepared.errors.length,
            errors: prepared.errors,
          },
          headers: [
            ['Content-Type', 'application/json'],
            ['Location', `/v1/jobs/${jobId}`],
          ] as Array<[string, string]>,
        }
      : {
          status: 200,
          body: { accepted: prepared.accepted, rejected: prepared.errors.length, errors: prepared.errors },
          headers: [['Content-Type', 'application/json']] as Array<[string, string]>,
        };
    if (backfill && prepared.rows.length === 0) (answer.body as { status: string }).status = 'succeeded';
    const out = await deps.store.store({
      tenantId: p.tenantId,
      plan,
      subject: backfill ? subjects.backfill(p.tenantId) : subjects.usage(p.tenantId),
      msgId: c.traceId,
      prepared,
      idempotency:
        key === undefined
          ? undefined
          : { scope: backfill ? 'events.backfill' : 'events', key, hash: requestHash(body) },
      job: backfill ? { id: jobId!, rejected: prepared.errors.length } : undefined,
      answer: { status: answer.status, body: Buffer.from(JSON.stringify(answer.body)), headers: answer.headers },
    });
    metrics.events(out.stored, out.replayed ? 0 : prepared.errors.length);
    send(c, out.status, out.body, out.replayed ? [...out.headers, ['Idempotent-Replayed', 'true']] : out.headers);
  }

  async function list(c: Ctx): Promise<void> {
    const p = await admit(c, 'events_read', opts.readsPerMinute, 'events:read');
    const q: Record<string, unknown> = Object.create(null);
    for (const [k, v] of new URLSearchParams(c.head.query)) if (!(k in q)) q[k] = v;
    if (!query(q)) throw invalid(fieldErrors(query.errors), 'The query string is invalid; see errors.');
    const v = q as {
      customer_id?: string;
      event_name?: string;
      from?: string;
      to?: string;
      limit?: number;
      cursor?: string;
    };
    const toMs = v.to !== undefined ? Date.parse(v.to) : Date.now() + opts.futureSkewMs;
    const fromMs = v.from !== undefined ? Date.parse(v.from) : toMs - DEFAULT_QUERY_SPAN_MS;
    if (!(fromMs < toMs)) throw invalid([{ field: 'from', code: 'invalid_range', message: 'from must be before to' }]);
    const page = await deps.events.page({
      tenantId: p.tenantId,
      customerId: v.customer_id?.toLowerCase(),
      eventName: v.event_name,
      fromMs,
      toMs,
      limit: v.limit ?? 100,
      cursor: v.cursor,
    });
    send(c, 200, JSON.stringify(page), [['Content-Type', 'application/json']]);
  }

  const endpoint = (kind: Kind) => (res: HttpResponse, req: HttpRequest) => {
    if (traffic.closed) {
      res.close();
      return;
    }
    traffic.lastRequestAt = Date.now();
    const state: ReplyState = { aborted: false };
    res.onAborted(() => {
      state.aborted = true;
    });
    const head = readHead(req, res);
    state.head = head.method === 'HEAD';
    const c: Ctx = {
      res,
      state,
      head,
      traceId: uuidv7(),
      started: performance.now(),
      kind,
      ip: clientIp(head.remoteAddress, head.headers['x-forwarded-for'], deps.trustedProxies),
    };
    if (head.framing) {
      c.close = true;
      const framing = head.framing;
      // The answer closes the connection: the body is read first, or the close would reset it.
      afterBody(res, () => fail(c, new ApiError('invalid_request', framing)));
      return;
    }
    traffic.inflight++;
    const done = () => {
      traffic.inflight--;
    };
    if (kind === 'query') {
      list(c)
        .catch((e: unknown) => fail(c, e))
        .finally(done);
      return;
    }
    readBody(res, head, opts.maxBodyBytes, state, (err, body) => {
      if (err?.close) c.close = true;
      const release = err ? undefined : admitBody(traffic, body.length);
      const run = err
        ? Promise.reject(
            err.kind === 'too_large'
              ? new ApiError(
                  'payload_too_large',
                  `The request body exceeds ${opts.maxBodyBytes} bytes; send smaller batches.`,
                )
              : new ApiError('unsupported_media_type', err.message),
          )
        : release
          ? ingest(c, body)
          : Promise.reject(
              new ApiError('service_unavailable', 'The server is busy; nothing was stored. Retry shortly.', undefined, [
                ['Retry-After', '1'],
              ]),
            );
      run
        .catch((e: unknown) => fail(c, e))
        .finally(() => {
          release?.();
          done();
        });
    });
  };

  const notAllowed = (allow: string) => (res: HttpResponse, req: HttpRequest) => {
    const traceId = uuidv7();
    const method = methodOf(req);
    const e = new ApiError(
      'method_not_allowed',
      `${method} is not allowed on ${req.getUrl()}; allowed: ${allow}.`,
      undefined,
      [['Allow', allow]],
    );
    const body = JSON.stringify(problemBody(deps.baseUrl, e, req.getUrl(), traceId));
    const headers: Array<[string, string]> = [
      ['Content-Type', 'application/problem+json'],
      ['X-Trace-Id', traceId],
      ['Allow', allow],
    ];
    refuseUnread(res, req, method === 'HEAD', STATUS_TEXT[405], headers, body);
  };

  return app
    .post('/v1/events', endpoint('events'))
    .get('/v1/events', endpoint('query'))
    .head('/v1/events', endpoint('query'))
    .post('/v1/events/backfill', endpoint('backfill'))
    .any('/v1/events', notAllowed('GET, POST'))
    .any('/v1/events/backfill', notAllowed('POST'));
}
