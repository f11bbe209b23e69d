import type { Logger } from '../../lib/logger.js';
import { uuidv7 } from '../../lib/ids.js';
import { decodeJson, isJsonContentType, pathText } from '../../lib/json.js';
import {
  isUtf8,
  probeRoutes,
  readHead,
  reply,
  STATUS_TEXT,
  type HttpRequest,
  type HttpResponse,
  type ReplyState,
  type RequestHead,
  type TemplatedApp,
} from '../../lib/uws.js';
import { afterBody, readBody } from '../../lib/uws-body.js';
import type { Decision } from '../../lib/rate-limit.js';
import { compileBody, compileQuery, type Validator } from '../../schemas/core/validate.js';
import type { AuditLog } from '../../lib/credentials/audit.js';
import type { Authenticator } from '../../lib/credentials/authenticate.js';
import { clientIp, type Allowlist } from '../../lib/credentials/ip.js';
import { requireRole, requireScope } from '../../lib/credentials/scopes.js';
import type { Ctx, Principal, Reply } from './context.js';
import { ApiError, ERRORS, fieldErrors, invalid, notFound, problemBody, type ErrorCode } from '../../lib/problem.js';
import { rateHeaders, type Limits } from './limits.js';
import type { ApiMetrics } from './metrics.js';
import type { Route, Router } from './router.js';

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
  ready: () => boolean;
}

interface Compiled {
  params?: Validator<unknown>;
  query?: Validator<unknown>;
  body?: Validator<unknown>;
}

const FORM_TYPE = /^application\/x-www-form-urlencoded\s*(?:;|$)/i;
const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);
const BODY_METHODS = new Set(['POST', 'PATCH', 'PUT', 'DELETE']);
/**
 * How deep a JSON body may nest objects and arrays (the body itself is level 1). Far more than any
 * resource needs, and a bound for everything that walks a body recursively afterwards.
 */
export const MAX_JSON_DEPTH = 32;

type State = ReplyState;

/** The request pipeline: match → authenticate → rate limit → authorize → parse and validate → handler → reply. */
export function mount(app: TemplatedApp, deps: ServerDeps, inflight: { n: number }): TemplatedApp {
  const { router, log, metrics } = deps;
  const compiled = new Map<Route, Compiled>();
  for (const r of router.routes) {
    compiled.set(r, {
      params: r.params ? compileQuery(r.params) : undefined,
      query: r.query ? compileQuery(r.query) : undefined,
      body: r.body && r.bodyType !== 'form' ? compileBody(r.body) : undefined,
    });
  }

  const send = (
    res: HttpResponse,
    state: State,
    head: RequestHead,
    traceId: string,
    started: number,
    routeName: string,
    out: Reply,
    extra: Array<[string, string]>,
    closeAfter = false,
  ) => {
    const headers: Array<[string, string]> = [['X-Trace-Id', traceId], ...extra, ...(out.headers ?? [])];
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
    // A refused body was read and dropped first (lib/uws-body.ts): the connection stays unless it was not whole.
    const close = closeAfter || head.framing !== undefined;
    reply(res, state, STATUS_TEXT[out.status] ?? `${out.status} Unknown`, headers, body, close);
    metrics.observe(head.method, routeName, out.status, performance.now() - started);
  };

  const problem = (err: unknown, path: string, traceId: string, method: string, route?: Route): Reply => {
    if (!(err instanceof ApiError)) {
      log.error({ err, trace_id: traceId, method, path }, 'request failed');
      err = new ApiError('internal_error', 'An unexpected error occurred. Quote the trace_id when contacting support.');
    } else if ((err as ApiError).status >= 500) {
      log.error({ err, trace_id: traceId, method, path }, 'request failed');
    } else {
      log.debug({ trace_id: traceId, code: (err as ApiError).code, method, path }, 'request refused');
    }
    const e = route?.shapeError ? route.shapeError(err as ApiError) : (err as ApiError);
    return {
      status: e.status,
      json: problemBody(deps.baseUrl, e, path, traceId),
      contentType: 'application/problem+json',
      headers: e.headers,
    };
  };

  async function run(
    head: RequestHead,
    route: Route,
    params: Record<string, string>,
    body: Buffer | null,
    bodyErr: ApiError | null,
    traceId: string,
    rl: { d?: Decision },
    who: { p?: Principal; ip?: string },
  ): Promise<Reply> {
    const ip = clientIp(head.remoteAddress, head.headers['x-forwarded-for'], deps.trustedProxies);
    who.ip = ip;
    let principal: Principal | undefined;
    if (route.auth === 'bearer') {
      principal = await deps.auth.authenticate(head.headers.authorization, ip);
      who.p = principal;
      const bucket = route.bucket ?? (route.method === 'GET' ? 'read' : 'write');
      if (bucket === 'bulk') {
        // A bulk import is also a write; the tighter hourly bucket is the one reported.
        const w = await deps.limits.take(principal.tenantId, 'write');
        if (!w.ok) {
          rl.d = w;
          throw rateLimited(w);
        }
      }
      const d = await deps.limits.take(principal.tenantId, bucket);
      rl.d = d;
      if (!d.ok) throw rateLimited(d);
      if (route.scope) requireScope(principal, route.scope);
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
      if (bodyErr) throw bodyErr;
      route.preParse?.({ headers: head.headers, params }, body!);
      // A route whose every body field is optional takes no body at all as `{}`.
      parsed =
        route.bodyOptional && body!.length === 0
          ? {}
          : route.bodyType === 'form'
            ? parseForm(head, body!)
            : parseJson(head, body!);
      if (c.body && !c.body(parsed)) throw invalid(fieldErrors(c.body.errors));
    }
    const ctx: Ctx = {
      traceId,
      method: head.method,
      path: head.url,
      headers: head.headers,
      ip,
      params,
      query,
      body: parsed,
      principal: principal!,
      log,
    };
    return route.handler(ctx);
  }

  const dispatch = (res: HttpResponse, req: HttpRequest) => {
    const state: State = { aborted: false };
    res.onAborted(() => {
      state.aborted = true;
    });
    const started = performance.now();
    const head = readHead(req, res);
    // HEAD is GET without the content: same route, same checks, same header fields.
    state.head = head.method === 'HEAD';
    const traceId = uuidv7();
    const m = router.match(state.head ? 'GET' : head.method, head.url);
    if (head.framing) {
      const err = new ApiError('invalid_request', head.framing);
      const route = m && 'route' in m ? m.route : undefined;
      const out = problem(err, head.url, traceId, head.method, route);
      // The answer closes the connection: the body is read first, or the close would reset it.
      afterBody(res, () => send(res, state, head, traceId, started, 'unmatched', out, []));
      return;
    }
    if (!m || !('route' in m)) {
      const err = m
        ? new ApiError(
            'method_not_allowed',
            `${head.method} is not allowed on ${head.url}; allowed: ${m.allowed.join(', ')}.`,
            undefined,
            [['Allow', m.allowed.join(', ')]],
          )
        : new ApiError('not_found', `No endpoint ${head.method} ${head.url}.`);
      send(res, state, head, traceId, started, 'unmatched', problem(err, head.url, traceId, head.method), []);
      return;
    }
    const { route, params } = m;
    inflight.n++;
    const go = (body: Buffer | null, bodyErr: ApiError | null, closeAfter = false) => {
      const rl: { d?: Decision } = {};
      const who: { p?: Principal; ip?: string } = {};
      run(head, route, params, body, bodyErr, traceId, rl, who)
        .catch((err: unknown) => problem(err, head.url, traceId, head.method, route))
        .then((out) => {
          send(res, state, head, traceId, started, route.path, out, rl.d ? rateHeaders(rl.d) : [], closeAfter);
          if (who.p)
            deps.audit.record({
              tenant_id: who.p.tenantId,
              actor_kind: who.p.kind,
              actor_id: who.p.actorId,
              trace_id: traceId,
              method: head.method,
              endpoint: route.path,
              status: out.status,
              ip: who.ip ?? '',
              at: new Date(),
            });
        })
        .catch((err: unknown) => log.error({ err, trace_id: traceId }, 'reply failed'))
        .finally(() => {
          inflight.n--;
        });
    };
    if (!BODY_METHODS.has(head.method) || !route.body) {
      // Whatever body came is drained and ignored.
      if (BODY_METHODS.has(head.method)) res.onData(() => {});
      go(null, null);
      return;
    }
    const max = route.maxBodyBytes ?? deps.maxBodyBytes;
    readBody(res, head, max, state, (err, body) => {
      if (!err) return go(body, null);
      go(
        null,
        err.kind === 'too_large'
          ? new ApiError('payload_too_large', `The request body exceeds ${max} bytes.`)
          : new ApiError('unsupported_media_type', err.message),
        err.close,
      );
    });
  };

  return probeRoutes(app, { ready: deps.ready, metrics })
    .get('/errors/:code', (res, req) => {
      const code = req.getParameter(0) as ErrorCode;
      const known = Object.hasOwn(ERRORS, code);
      const body = known
        ? { code, status: ERRORS[code].status, title: ERRORS[code].title, description: ERRORS[code].docs }
        : { detail: 'Unknown error code' };
      res.cork(() =>
        res
          .writeStatus(known ? '200 OK' : '404 Not Found')
          .writeHeader('Content-Type', 'application/json')
          .end(JSON.stringify(body)),
      );
    })
    .any('/*', dispatch);
}

function rateLimited(d: Decision): ApiError {
  return new ApiError(
    'rate_limited',
    `Rate limit of ${d.limit} requests exceeded for this workspace; retry in ${d.retryAfter} s.`,
    undefined,
    [['Retry-After', String(d.retryAfter)]],
  );
}

/**
 * Query parameters, first value of each. URLSearchParams turns bad UTF-8 into U+FFFD and leaves a
 * bad %-escape as it is; the one thing it yields that the store cannot hold is U+0000.
 */
function parseQuery(qs: string): Record<string, unknown> {
  const out: Record<string, unknown> = Object.create(null);
  for (const [k, v] of new URLSearchParams(qs)) {
    if (k.includes('\u0000') || v.includes('\u0000')) {
      const field = k.replaceAll('\u0000', '\\u0000');
      throw invalid([{ field, code: 'invalid_unicode', message: `${field} contains a NUL character (%00).` }]);
    }
    if (!(k in out)) out[k] = v;
  }
  return out;
}

function parseJson(head: RequestHead, body: Buffer): unknown {
  const ct = head.headers['content-type'];
  if (!isJsonContentType(ct))
    throw new ApiError('unsupported_media_type', `Content-Type must be application/json${ct ? `, not ${ct}` : ''}.`);
  if (body.length === 0) throw new ApiError('malformed_json', 'The request body is empty; expected a JSON object.');
  const d = decodeJson(body, { maxDepth: MAX_JSON_DEPTH, forbiddenKeys: FORBIDDEN_KEYS });
  if (d.ok) return d.value;
  switch (d.reason) {
    case 'not_utf8':
      throw new ApiError('malformed_json', 'The request body is not valid UTF-8.');
    case 'syntax':
      throw new ApiError('malformed_json', `The request body is not valid JSON: ${d.message}.`);
    case 'forbidden_key': {
      const key = String(d.path[d.path.length - 1]);
      throw invalid([{ field: pathText(d.path), code: 'forbidden_key', message: `The key "${key}" is not allowed.` }]);
    }
    case 'too_deep': {
      const field = pathText(d.path);
      throw invalid([{ field, code: 'too_deep', message: `${field} ${d.message}` }]);
    }
    case 'unstorable_text': {
      const field = pathText(d.path) || 'body';
      throw invalid([{ field, code: 'invalid_unicode', message: `${field} ${d.message}` }]);
    }
  }
}

const oauthRequestError = (description: string) =>
  new ApiError('invalid_request', `${description}.`, undefined, [], {
    error: 'invalid_request',
    error_description: description,
  });

/**
 * An application/x-www-form-urlencoded body, strictly: UTF-8, every %-escape two hex digits
 * decoding to UTF-8, no NUL, no parameter twice (RFC 6749 §3.2). A body that breaks any of it is
 * an RFC 6749 invalid_request, never a half-decoded value handed on.
 */
function parseForm(head: RequestHead, body: Buffer): Record<string, string> {
  const ct = head.headers['content-type'];
  if (ct === undefined || !FORM_TYPE.test(ct)) {
    throw new ApiError(
      'unsupported_media_type',
      'Content-Type must be application/x-www-form-urlencoded.',
      undefined,
      [],
      { error: 'invalid_request', error_description: 'Content-Type must be application/x-www-form-urlencoded' },
    );
  }
  if (!isUtf8(body)) throw oauthRequestError('The form body is not valid UTF-8');
  const out: Record<string, string> = Object.create(null);
  for (const pair of body.toString('utf8').split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const k = formDecode(eq < 0 ? pair : pair.slice(0, eq));
    const v = formDecode(eq < 0 ? '' : pair.slice(eq + 1));
    if (k === undefined || v === undefined)
      throw oauthRequestError(
        'The form body has a malformed %-escape (each % must be followed by two hex digits of UTF-8)',
      );
    if (k.includes('\u0000') || v.includes('\u0000'))
      throw oauthRequestError(`The form parameter ${k.replaceAll('\u0000', '%00')} contains a NUL character`);
    if (k in out) throw oauthRequestError(`The parameter ${k} is repeated`);
    out[k] = v;
  }
  return out;
}

/** One form component: `+` is a space, %XX a byte of UTF-8; undefined when the escapes are malformed. */
export function formDecode(s: string): string | undefined {
  try {
    return decodeURIComponent(s.replaceAll('+', ' '));
  } catch {
    return undefined;
  }
}
