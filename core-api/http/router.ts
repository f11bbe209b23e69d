import type { TSchema } from '#typebox';
import type { ScopeRequirement } from '../../lib/credentials/scopes.js';
import type { Role } from '../../schemas/core/scopes.js';
import type { ApiError } from '../../lib/problem.js';
import type { Ctx, Reply } from './context.js';

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
export type Bucket = 'read' | 'write' | 'bulk';

export interface ResponseDoc {
  description: string;
  schema?: TSchema;
  example?: unknown;
  contentType?: string;
}

export interface Route {
  method: Method;
  /** OpenAPI-style template: `/v1/customers/{id}`. */
  path: string;
  summary: string;
  description?: string;
  tag: string;
  /** `bearer`: API key or access token; `none`: public (OAuth endpoints, the OpenAPI document). */
  auth: 'bearer' | 'none';
  /**
   * The scopes the route accepts, any one of them (`admin:*` satisfies every scope); `null` means any
   * valid credential. The server checks it before anything else of the request is read or looked up,
   * and the OpenAPI document states it (one security requirement object per scope): both from here.
   */
  scope?: ScopeRequirement | null;
  /**
   * The scopes that replace `scope` when the query string has these values (DELETE
   * /v1/customers/{id}?hard=true needs admin:*), checked in its place; the document says it in
   * `x-security-when`.
   */
  scopeWhen?: { query: Record<string, string | number | boolean>; scope: ScopeRequirement };
  /** Required role of the actor, on top of the scope. */
  role?: Role;
  bucket?: Bucket;
  params?: TSchema;
  query?: TSchema;
  body?: TSchema;
  bodyType?: 'json' | 'form';
  bodyExample?: unknown;
  maxBodyBytes?: number;
  headers?: Array<{ name: string; description: string }>;
  responses: Record<number, ResponseDoc>;
  /** Error statuses this route can answer besides the common ones (400, 401, 403, 429, 500). */
  errors?: number[];
  /** No body (zero bytes, any or no Content-Type) is taken as `{}`: every field of the body is optional. */
  bodyOptional?: boolean;
  /**
   * Runs on the raw body before it is parsed (a signature over the exact bytes, checked before
   * anything else of the body is looked at); throws an ApiError to refuse the request.
   */
  preParse?: (req: { headers: Record<string, string>; params: Record<string, string> }, raw: Buffer) => void;
  handler: (ctx: Ctx) => Promise<Reply>;
  /**
   * Every error answer of the route in its own dialect too, from the reading of the request on
   * (framing, body size, encoding): the token endpoint adds RFC 6749's `error` members.
   */
  shapeError?: (e: ApiError) => ApiError;
}

interface Compiled {
  route: Route;
  segments: Array<string | { param: string }>;
}

export type Match = { route: Route; params: Record<string, string> } | { allowed: Method[] } | null;

/** Path templates split into segments; a static segment wins over a parameter at the same place. */
export class Router {
  private compiled: Compiled[] = [];

  constructor(readonly routes: Route[]) {
    for (const route of routes) {
      const segments = route.path
        .split('/')
        .slice(1)
        .map((s) => (s.startsWith('{') ? { param: s.slice(1, -1) } : s));
      this.compiled.push({ route, segments });
    }
    // More static segments first, so /v1/customers/trash beats /v1/customers/{id}.
    const weight = (c: Compiled) => c.segments.map((s) => (typeof s === 'string' ? '0' : '1')).join('');
    this.compiled.sort((a, b) => (weight(a) < weight(b) ? -1 : weight(a) > weight(b) ? 1 : 0));
  }

  match(method: string, path: string): Match {
    const parts = path.split('/').slice(1);
    if (parts.length > 1 && parts[parts.length - 1] === '') parts.pop();
    const allowed: Method[] = [];
    for (const c of this.compiled) {
      if (c.segments.length !== parts.length) continue;
      const params: Record<string, string> = {};
      let ok = true;
      for (let i = 0; i < parts.length; i++) {
        const s = c.segments[i];
        if (typeof s === 'string') {
          if (s !== parts[i]) {
            ok = false;
            break;
          }
        } else {
          let v: string;
          try {
            v = decodeURIComponent(parts[i]);
          } catch {
            ok = false;
            break;
          }
          if (v === '') {
            ok = false;
            break;
          }
          params[s.param] = v;
        }
      }
      if (!ok) continue;
      if (c.route.method === method) return { route: c.route, params };
      if (!allowed.includes(c.route.method)) allowed.push(c.route.method);
    }
    return allowed.length ? { allowed } : null;
  }
}
