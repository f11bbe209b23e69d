import type { Logger } from '../lib/logger.js';
import { uuidv7 } from '../lib/ids.js';
import { decodeJson, isJsonContentType } from '../lib/json.js';
import { subjects } from '../lib/nats.js';
import type { SharedRateLimiter } from '../lib/rate-limit.js';
import {
  framingProblem,
  methodOf,
  probeRoutes,
  reply,
  STATUS_TEXT,
  type HttpResponse,
  type HttpRequest,
  type RequestHead,
  type TemplatedApp,
} from '../lib/uws.js';
import { afterBody, readBody, refuseUnread } from '../lib/uws-body.js';
import { compile } from '../schemas/ajv.js';
import { BillingBatch, UsageBatchA, type BillingEvent, type UsageEventA } from '../schemas/ingest.js';
import { prepareBilling } from './billing.js';
import { type Answer, answer, answerError, bodyProblem, fromAjv, IngestError, unprocessable } from './errors.js';
import type { IngestionKeys, Org } from './keys.js';
import type { IngestMetrics } from './metrics.js';
import type { Publisher } from './publisher.js';
import type { DailyQuota } from './quota.js';
import type { Resolver } from './resolver.js';
import { prepareUsage } from './usage.js';

export interface IngestOptions {
  maxBodyBytes: number;
  /** Requests per minute per organization, shared by both surface-A endpoints and all processes. */
  requestsPerMinute: number;
  futureSkewMs: number;
  ageGraceMs: number;
}

export interface IngestDeps {
  keys: IngestionKeys;
  resolver: Resolver;
  limiter: SharedRateLimiter;
  quota: DailyQuota;
  publisher: Publisher;
  metrics: IngestMetrics;
  log: Logger;
  ready: () => boolean;
  opts: IngestOptions;
  /** Answers an unknown path another surface on this port owns, in its shape; false when it is none of its. */
  unknownPath?: (res: HttpResponse, req: HttpRequest) => boolean;
}

const usageBatch = compile(UsageBatchA);
const billingBatch = compile(BillingBatch);

type Kind = 'usage' | 'billing';

interface Ctx {
  res: HttpResponse;
  state: { aborted: boolean; inFlight?: boolean };
  traceId: string;
  started: number;
  kind: Kind;
  /** Close the connection after the answer (a refused body not read to its end). */
  close?: boolean;
}

/**
 * Shutdown state shared with main.ts. Draining: keep serving, but close each connection after its
 * answer so keep-alive clients reconnect elsewhere. Closed: the event store is going away; a late
 * request is dropped unanswered (the client sees a reset, knows nothing was acknowledged, retries).
 */
export interface Traffic {
  inflight: number;
  lastRequestAt: number;
  draining: boolean;
  closed: boolean;
  /** Bytes of request bodies being worked on; a request that would pass the budget is turned away. */
  bodyBytes: number;
  maxBodyBytesInFlight: number;
}

/**
 * Backpressure on memory: a process works on at most `maxBodyBytesInFlight` bytes of bodies at
 * once (parsed, a body takes several times its size). One request is always let through.
 * Returns the release function, or undefined when the caller must answer 503.
 */
export function admitBody(traffic: Traffic, bytes: number): (() => void) | undefined {
  if (traffic.bodyBytes > 0 && traffic.bodyBytes + bytes > traffic.maxBodyBytesInFlight) return undefined;
  traffic.bodyBytes += bytes;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    traffic.bodyBytes -= bytes;
  };
}

export function routes(app: TemplatedApp, deps: IngestDeps, traffic: Traffic): TemplatedApp {
  const { log, metrics, opts } = deps;

  const send = (c: Ctx, status: number, body: unknown, extra: Array<[string, string]> = [], close = false) => {
    const headers: Array<[string, string]> = [
      ['Content-Type', 'application/json'],
      ['X-Trace-Id', c.traceId],
      ...extra,
    ];
    reply(c.res, c.state, STATUS_TEXT[status], headers, JSON.stringify(body), close || c.close || traffic.draining);
    metrics.observe(c.kind, status, performance.now() - c.started);
  };

  const respond = (c: Ctx, a: Answer, close = false) => send(c, a.status, a.body, a.headers, close);

  const fail = (c: Ctx, err: unknown) => {
    if (!(err instanceof IngestError) || err.code === 'internal_error') {
      log.error({ trace_id: c.traceId, err }, 'ingestion failed');
      return respond(c, answer('internal_error', ''));
    }
    if (err.code === 'service_unavailable') log.error({ trace_id: c.traceId, err: err.message }, 'batch refused');
    respond(c, answerError(err));
  };

  async function authenticate(head: RequestHead): Promise<Org> {
    const key = head.headers['x-api-key'];
    if (key === undefined || key === '') throw new IngestError('unauthenticated', 'Missing X-API-Key header');
    const { hash, org } = deps.keys.peek(key.trim());
    const found = org === undefined ? await deps.keys.fetch(hash) : org;
    if (!found) throw new IngestError('unauthenticated', 'Invalid API key');
    return found;
  }

  function parse(head: RequestHead, body: Buffer, v: typeof usageBatch | typeof billingBatch): unknown {
    const ct = head.headers['content-type'];
    if (!isJsonContentType(ct)) {
      throw unprocessable([
        {
          type: 'content_type_invalid',
          loc: ['header', 'content-type'],
          msg: 'Content-Type must be application/json',
          input: ct ?? null,
        },
      ]);
    }
    if (body.length === 0) throw bodyProblem('missing', 'Request body is empty; expected a JSON object with "events"');
    const decoded = decodeJson(body);
    if (!decoded.ok) {
      if (decoded.reason === 'not_utf8') throw bodyProblem('json_invalid', 'Request body is not valid UTF-8');
      if (decoded.reason === 'syntax')
        throw unprocessable([
          { type: 'json_invalid', loc: ['body', decoded.position ?? 0], msg: 'JSON decode error', input: {} },
        ]);
      throw bodyProblem('string_unicode', `String ${decoded.message}`, ['body', ...decoded.path]);
    }
    const parsed = decoded.value;
    if (!v.check(parsed)) {
      v.explain(parsed);
      throw unprocessable(fromAjv(v.explain.errors ?? v.check.errors ?? [], parsed));
    }
    return parsed;
  }

  async function handle(c: Ctx, head: RequestHead, body: Buffer): Promise<void> {
    const org = await authenticate(head);
    const rl = await deps.limiter.take(org.tenantId, 'ingest_a', opts.requestsPerMinute, 60_000);
    if (!rl.ok)
      throw new IngestError(
        'rate_limited',
        `Rate limit of ${opts.requestsPerMinute} requests per minute exceeded for this organization`,
        [],
        rl.retryAfter,
      );
    const now = Date.now();
    if (c.kind === 'usage') {
      const { events } = parse(head, body, usageBatch) as { events: UsageEventA[] };
      const p = await prepareUsage(events, {
        tenantId: org.tenantId,
        batchId: c.traceId,
        now,
        resolver: deps.resolver,
        futureSkewMs: opts.futureSkewMs,
        ageGraceMs: opts.ageGraceMs,
      });
      const quota = deps.quota.take(org.tenantId, org.plan, p.accepted);
      if (quota) {
        const d = await quota;
        if (!d.ok)
          throw new IngestError(
            'daily_quota_exceeded',
            `Daily event quota of ${d.limit} events for the ${org.plan} plan is used up; it resets at 00:00 UTC`,
            [],
            d.retryAfter,
          );
      }
      if (p.accepted > 0) {
        await deps.publisher.publish(subjects.usage(org.tenantId), Buffer.from(p.rows), c.traceId, {
          'Cs-Rows': String(p.accepted),
          'Cs-Names': p.names.join(','),
        });
      }
      metrics.events(p.accepted, p.errors.length);
      send(c, 202, {
        accepted: p.accepted,
        rejected: p.errors.length,
        errors: p.errors,
        message:
          p.errors.length === 0
            ? `${p.accepted} events accepted`
            : `${p.accepted} events accepted, ${p.errors.length} rejected`,
      });
    } else {
      const { events } = parse(head, body, billingBatch) as { events: BillingEvent[] };
      const p = await prepareBilling(events, {
        tenantId: org.tenantId,
        batchId: c.traceId,
        now,
        resolver: deps.resolver,
      });
      await deps.publisher.publish(subjects.billing(org.tenantId), Buffer.from(p.rows), c.traceId, {
        'Cs-Rows': String(p.accepted),
      });
      metrics.events(p.accepted, 0);
      send(c, 202, { accepted: p.accepted, skipped: 0, message: `${p.accepted} billing events accepted` });
    }
  }

  const endpoint = (kind: Kind) => (res: HttpResponse, req: HttpRequest) => {
    if (traffic.closed) {
      res.close();
      return;
    }
    traffic.lastRequestAt = Date.now();
    const c: Ctx = { res, state: { aborted: false }, traceId: uuidv7(), started: performance.now(), kind };
    res.onAborted(() => {
      c.state.aborted = true;
    });
    const head = readHeadFast(req);
    if (head.framing) {
      const framing = head.framing;
      // The answer closes the connection: the body is read first, or the close would reset it.
      afterBody(res, () => respond(c, answer('invalid_framing', framing), true));
      return;
    }
    traffic.inflight++;
    readBody(res, head, opts.maxBodyBytes, c.state, (err, body) => {
      c.close = err?.close;
      const release = err ? undefined : admitBody(traffic, body.length);
      const run = err
        ? Promise.reject(
            err.kind === 'too_large'
              ? new IngestError('payload_too_large', err.message, [
                  {
                    type: 'payload_too_large',
                    loc: ['body'],
                    msg: `Request body exceeds ${opts.maxBodyBytes} bytes`,
                    input: null,
                  },
                ])
              : bodyProblem('content_encoding_invalid', err.message, ['header', 'content-encoding']),
          )
        : release
          ? handle(c, head, body)
          : Promise.reject(new IngestError('service_unavailable', 'The server is busy', [], 1));
      run
        .catch((e: unknown) => fail(c, e))
        .finally(() => {
          release?.();
          traffic.inflight--;
        });
    });
  };

  const notAllowed = (res: HttpResponse, req: HttpRequest) => {
    if (deps.unknownPath?.(res, req)) return;
    const traceId = uuidv7();
    const url = req.getUrl();
    const found = url === '/v1/ingest/events' || url === '/v1/ingest/billing-events';
    const a = found ? answer('method_not_allowed', 'Method Not Allowed') : answer('not_found', 'Not Found');
    const headers: Array<[string, string]> = [
      ['Content-Type', 'application/json'],
      ['X-Trace-Id', traceId],
      ...a.headers,
    ];
    if (found) headers.push(['Allow', 'POST']);
    refuseUnread(res, req, methodOf(req) === 'HEAD', STATUS_TEXT[a.status], headers, JSON.stringify(a.body));
  };

  return probeRoutes(
    app.post('/v1/ingest/events', endpoint('usage')).post('/v1/ingest/billing-events', endpoint('billing')),
    { ready: deps.ready, metrics },
  ).any('/*', notAllowed);
}

const WANTED = new Set(['x-api-key', 'content-type', 'content-length', 'content-encoding', 'transfer-encoding']);

/** Only the headers the ingest path reads, copied before the request object dies; one pass. */
function readHeadFast(req: HttpRequest): RequestHead {
  const headers: Record<string, string> = {};
  let framing: string | undefined;
  req.forEach((k, v) => {
    if (!WANTED.has(k)) return;
    framing ??= framingProblem(headers, k, v);
    if (k !== 'content-length' || headers[k] === undefined) headers[k] = v;
  });
  return { method: 'POST', url: req.getUrl(), query: '', headers, remoteAddress: '', framing };
}
