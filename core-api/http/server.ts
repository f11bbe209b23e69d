import type { AuditLog } from '../../lib/credentials/audit.js';
import type { Authenticator } from '../../lib/credentials/authenticate.js';
import { clientIp, type Allowlist } from '../../lib/credentials/ip.js';
import { requireRole, requireScope } from '../../lib/credentials/scopes.js';
import { BODY_METHODS, endpoint, type Dialect, type Exchange } from '../../lib/http/kernel.js';
import { probeRoutes } from '../../lib/http/probes.js';
import type { Traffic } from '../../lib/http/traffic.js';
import { reply, STATUS_TEXT, type TemplatedApp } from '../../lib/http/uws.js';
import type { Logger } from '../../lib/logger.js';
import { inTenant, isPgUnavailable, STORE_RETRY_AFTER_S } from '../../lib/pg.js';
import { ApiError, ERRORS, fieldErrors, invalid, notFound, problemBody, type ErrorCode } from '../../lib/problem.js';
import type { Decision } from '../../lib/rate-limit.js';
import { compileBody, compileQuery, type Validator } from '../../schemas/core/validate.js';
import type { Ctx, Principal, Reply } from './context.js';
import { rateHeaders, type Limits } from './limits.js';
import type { ApiMetrics } from './metrics.js';
import { parseForm, parseJson, parseQuery } from './parse.js';
import type { Match, Route, Router } from './router.js';

export interface ServerDeps {
  router: Router;
  auth: Authenticator;
  limits: Limits;
  audit: AuditLog;
  metrics: ApiMetrics;
  log: Logger;
  baseUrl: string;
  trustedProxies: Allowlist;
  maxBodyBytes: number;
  traffic: Traffic;
  ready: () => boolean;
}

export interface Compiled {
  params?: Validator<unknown>;
  query?: Validator<unknown>;
  body?: Validator<unknown>;
}

const JSON_TYPE: Array<[string, string]> = [['Content-Type', 'application/json']];

/** One core-API request: the exchange, its matched route, and who is asking once that is known. */
interface ApiExchange extends Exchange {
  match: Match;
  route?: Route;
  rate?: Decision;
  principal?: Principal;
  ip?: string;
}

/** A route's validators (compiled on first use: schemas/ajv.ts lazyCompile). */
export function compileRoute(r: Route): Compiled {
  return {
    params: r.params ? compileQuery(r.params) : undefined,
    query: r.query ? compileQuery(r.query) : undefined,
    body: r.body && r.bodyType !== 'form' ? compileBody(r.body) : undefined,
  };
}

/**
 * The core API on the request kernel (lib/http/kernel.ts). Its steps per request: match → authenticate
 * → rate limit → authorize (the route's scopes, or those of its `scopeWhen`, and its role) → parse and
 * validate → handler; every error becomes problem+json.
 */
export function mount(app: TemplatedApp, deps: ServerDeps): TemplatedApp {
  const { router, log, metrics } = deps;
  const compiled = new Map<Route, Compiled>(router.routes.map((r) => [r, compileRoute(r)]));

  const dialect: Dialect<ApiExchange, Reply> = {
    traffic: deps.traffic,
    refusal: (r) =>
      r.kind === 'framing'
        ? new ApiError('invalid_request', r.message)
        : r.kind === 'too_large'
          ? new ApiError('payload_too_large', `The request body exceeds ${r.maxBytes} bytes.`)
          : r.kind === 'bad_encoding'
            ? new ApiError('unsupported_media_type', r.message)
            : new ApiError('service_unavailable', 'The server is busy; retry shortly.', undefined, [
                ['Retry-After', '1'],
              ]),
    render(x, err) {
      const { head, traceId } = x;
      if (isPgUnavailable(err)) {
        log.error({ err, trace_id: traceId, method: head.method, path: head.url }, 'PostgreSQL unavailable');
        err = new ApiError('service_unavailable', 'The database is unavailable; retry shortly.', undefined, [
          ['Retry-After', String(STORE_RETRY_AFTER_S)],
        ]);
      } else if (!(err instanceof ApiError)) {
        log.error({ err, trace_id: traceId, method: head.method, path: head.url }, 'request failed');
        err = new ApiError(
          'internal_error',
          'An unexpected error occurred. Quote the trace_id when contacting support.',
        );
      } else if ((err as ApiError).status >= 500) {
        log.error({ err, trace_id: traceId, method: head.method, path: head.url }, 'request failed');
      } else {
        log.debug(
          { trace_id: traceId, code: (err as ApiError).code, method: head.method, path: head.url },
          'request refused',
        );
      }
      const e = x.route?.shapeError ? x.route.shapeError(err as ApiError) : (err as ApiError);
      return {
        status: e.status,
        json: problemBody(deps.baseUrl, e, head.url, traceId),
        contentType: 'application/problem+json',
        headers: e.headers,
      };
    },
    send(x, out, close) {
      const headers: Array<[string, string]> = [
        ['X-Trace-Id', x.traceId],
        ...(x.rate ? rateHeaders(x.rate) : []),
        ...(out.headers ?? []),
      ];
      let body = '';
      if (out.status !== 204 && out.status !== 304) {
        if (out.text !== undefined) {
          body = out.text;
          headers.push(['Content-Type', out.contentType ?? 'text/plain; charset=utf-8']);
        } else if (out.json !== undefined) {
          body = JSON.stringify(out.json);
          headers.push(['Content-Type', out.contentType ?? 'application/json']);
        }
      }
      if (!headers.some(([k]) => k === 'Cache-Control')) headers.push(['Cache-Control', 'no-store']);
      reply(x.res, x.state, STATUS_TEXT[out.status] ?? `${out.status} Unknown`, headers, body, close);
      metrics.observe(x.head.method, x.route?.path ?? 'unmatched', out.status, performance.now() - x.started);
      if (x.principal)
        deps.audit.record({
          tenant_id: x.principal.tenantId,
          actor_kind: x.principal.kind,
          actor_id: x.principal.actorId,
          trace_id: x.traceId,
          method: x.head.method,
          endpoint: x.route!.path,
          status: out.status,
          ip: x.ip ?? '',
          at: new Date(),
        });
    },
    lost: (x, err) => log.error({ err, trace_id: x.traceId }, 'reply failed'),
  };

  async function steps(x: ApiExchange, body: Buffer | undefined, refused?: unknown): Promise<Reply> {
    const { head, match: m } = x;
    if (!m) throw new ApiError('not_found', `No endpoint ${head.method} ${head.url}.`);
    if (!('route' in m)) {
      const allowed = m.allowed.join(', ');
      throw new ApiError(
        'method_not_allowed',
        `${head.method} is not allowed on ${head.url}; allowed: ${allowed}.`,
        undefined,
        [['Allow', allowed]],
      );
    }
    const { route, params } = m;
    const ip = clientIp(head.remoteAddress, head.headers['x-forwarded-for'], deps.trustedProxies);
    x.ip = ip;
    let principal: Principal | undefined;
    if (route.auth === 'bearer') {
      principal = await deps.auth.authenticate(head.headers.authorization, ip);
      x.principal = principal;
      const bucket = route.bucket ?? (route.method === 'GET' ? 'read' : 'write');
      if (bucket === 'bulk') {
        // A bulk import is also a write; the tighter hourly bucket is the one reported.
        const w = await deps.limits.take(principal.tenantId, 'write');
        if (!w.ok) {
          x.rate = w;
          throw rateLimited(w);
        }
      }
      const d = await deps.limits.take(principal.tenantId, bucket);
      x.rate = d;
      if (!d.ok) throw rateLimited(d);
      const when = route.scopeWhen;
      if (when && queryHas(head.query, when.query))
        requireScope(principal, when.scope, `With ${queryText(when.query)} this endpoint`);
      else if (route.scope) requireScope(principal, route.scope);
      if (route.role) requireRole(principal, route.role);
    }
    const c = compiled.get(route)!;
    if (c.params && !c.params(params)) throw notFound();
    let query: Record<string, unknown> = {};
    if (route.query || head.query) {
      query = parseQuery(head.query);
      if (c.query && !c.query(query))
        throw invalid(fieldErrors(c.query.errors), 'The query string is invalid; see errors.');
    }
    let parsed: unknown;
    if (route.body) {
      if (refused !== undefined) throw refused;
      const raw = body ?? Buffer.alloc(0);
      route.preParse?.({ headers: head.headers, params }, raw);
      // A route whose every body field is optional takes no body at all as `{}`.
      parsed =
        route.bodyOptional && raw.length === 0
          ? {}
          : route.bodyType === 'form'
            ? parseForm(head, raw)
            : parseJson(head, raw);
      if (c.body && !c.body(parsed)) throw invalid(fieldErrors(c.body.errors));
    }
    const ctx: Ctx = {
      traceId: x.traceId,
      method: head.method,
      path: head.url,
      headers: head.headers,
      ip,
      params,
      query,
      body: parsed,
      principal: principal!,
      tenant: (principal && inTenant(principal.tenantId))!,
      log,
    };
    return route.handler(ctx);
  }

  const dispatch = endpoint(dialect, {
    open(base) {
      const x = base as ApiExchange;
      // HEAD is GET without the content: same route, same checks, same header fields.
      x.match = router.match(x.state.head ? 'GET' : x.head.method, x.head.url);
      x.route = x.match && 'route' in x.match ? x.match.route : undefined;
      return x;
    },
    maxBodyBytes: (x) =>
      x.route?.body && BODY_METHODS.has(x.head.method) ? (x.route.maxBodyBytes ?? deps.maxBodyBytes) : undefined,
    // Who is asking comes first: a refused body is answered after authentication, like any other bad body.
    refusalsToSteps: true,
    steps,
  });

  return probeRoutes(app, { ready: deps.ready, metrics })
    .get('/errors/:code', (res, req) => {
      const code = req.getParameter(0) as ErrorCode;
      const known = Object.hasOwn(ERRORS, code);
      const body = known
        ? { code, status: ERRORS[code].status, title: ERRORS[code].title, description: ERRORS[code].docs }
        : { detail: 'Unknown error code' };
      reply(res, { aborted: false }, STATUS_TEXT[known ? 200 : 404], JSON_TYPE, JSON.stringify(body));
    })
    .any('/*', dispatch);
}

/** `{ hard: true }` → `hard=true`, as the request says it. */
const queryText = (q: Record<string, unknown>): string =>
  Object.entries(q)
    .map(([k, v]) => `${k}=${v}`)
    .join('&');

/**
 * Whether the query string has these values, read before the query is validated (a scope is checked
 * first): the first value of a name, as parseQuery takes it, and written as the validated value
 * would be (only `true` becomes true).
 */
function queryHas(raw: string, want: Record<string, unknown>): boolean {
  if (!raw) return false;
  const q = new URLSearchParams(raw);
  return Object.entries(want).every(([k, v]) => q.get(k) === String(v));
}

function rateLimited(d: Decision): ApiError {
  return new ApiError(
    'rate_limited',
    `Rate limit of ${d.limit} requests exceeded for this workspace; retry in ${d.retryAfter} s.`,
    undefined,
    [['Retry-After', String(d.retryAfter)]],
  );
}
