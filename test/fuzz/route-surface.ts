import type { ValidateFunction } from 'ajv';
import fc from 'fast-check';
import { createAjv } from '../../schemas/ajv.js';
import type { Tier } from '../helpers/stack.js';
import { build, envelope, jsonDoc, oddUuid, oddValue, otherMethod, params, SHRINK, type J } from './arbitraries.js';
import { header, type Answered, type Req } from './http.js';
import { CORE_STATUSES, type Contract, type Ledger, type Rules } from './properties.js';
import type { Test } from '#tap';
import { fuzz, type Settings, stillReady, type Surface } from './support.js';
import { TARGETS } from './targets.js';

/**
 * A surface made of several routes of one resource, each described by its seed: the path
 * parameters (ids of the fuzz workspace, and ids of another workspace, which must be refused as
 * unknown), the query parameters and the body as arbitraries around valid examples, and the shape
 * of a success. Every case is one route's request with the same mutations as the hand-written
 * surfaces (arbitraries.ts: the envelope, other methods, broken bodies and query strings).
 */
export interface RouteSeed {
  /** Per path parameter: values that exist in the fuzz workspace, and values of another workspace. */
  params?: Record<string, { own: string[]; foreign?: string[] }>;
  query?: Record<string, fc.Arbitrary<string>>;
  /** The JSON body; routes without one are sent no body, or now and then one they must ignore or refuse. */
  body?: fc.Arbitrary<J>;
  /** A body that is not JSON (a form), with its content type. */
  raw?: { body: fc.Arbitrary<Buffer>; contentType: string; padChar?: string };
  maxBytes?: number;
  /** Headers that depend on the body sent (a signature over it). */
  sign?: (body: Buffer) => Array<[string, string]>;
  /** Besides the documented shape of the answer (the OpenAPI document's 2xx responses). */
  success?: (a: Answered, r: Req) => string | undefined;
}

export interface OpenApiDoc {
  paths: Record<string, Record<string, { responses: Record<string, ResponseDoc> }>>;
}
interface ResponseDoc {
  content?: Record<string, { schema?: object }>;
}

export interface RouteContext {
  doc: OpenApiDoc;
  port: number;
  auth: fc.Arbitrary<Array<[string, string]>>;
  tiers: Tier[];
  ledger?: Ledger<unknown>;
  /** Ids of another workspace: a request naming one, in its path or body, must be refused as if it did not exist. */
  foreignIds: readonly string[];
  contract?: Contract;
  statuses?: ReadonlySet<number>;
  redirect?: Rules['redirect'];
}

/** A path segment from any string (a lone surrogate cannot go through encodeURIComponent). */
export const segment = (s: string): string =>
  s.isWellFormed() ? encodeURIComponent(s) : encodeURIComponent(s.toWellFormed()).replace(/%EF%BF%BD/g, '%ED%A0%80');

interface Built {
  path: string;
  foreign: boolean;
  /** A parameter left empty: the router reads the path as its parent's (`/v1/customers/` is the list). */
  empty: boolean;
}

function pathOf(template: string, spec: RouteSeed['params'] = {}): fc.Arbitrary<Built> {
  const names = [...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
  for (const n of names) if (!spec[n]?.own.length) throw new Error(`${template}: no value for {${n}}`);
  const value = (n: string) =>
    fc.oneof(
      SHRINK,
      { weight: 14, arbitrary: fc.constantFrom(...spec[n].own).map((v) => ({ v: segment(v), foreign: false })) },
      {
        weight: spec[n].foreign?.length ? 3 : 0,
        arbitrary: fc.constantFrom(...(spec[n].foreign ?? ['-'])).map((v) => ({ v: segment(v), foreign: true })),
      },
      { weight: 1, arbitrary: oddUuid.map((v) => ({ v: segment(v), foreign: false })) },
      { weight: 1, arbitrary: fc.uuid().map((v) => ({ v, foreign: false })) },
    );
  if (names.length === 0) return fc.constant({ path: template, foreign: false, empty: false });
  return fc.tuple(...names.map(value)).map((vs) => {
    let path = template;
    names.forEach((n, i) => {
      path = path.replace(`{${n}}`, vs[i].v);
    });
    return { path, foreign: vs.some((x) => x.foreign), empty: vs.some((x) => x.v === '') };
  });
}

/** The surface `surface` of `file` in targets.ts, from the seeds of its routes (every one needs a seed). */
export function routeSurface(
  file: string,
  surface: string,
  seeds: Record<string, RouteSeed>,
  ctx: RouteContext,
): Surface {
  const target = TARGETS.find((x) => x.file === file && x.surface === surface);
  if (!target) throw new Error(`targets.ts has no surface ${surface} in ${file}`);
  const missing = target.routes.filter((r) => !seeds[r]);
  if (missing.length) throw new Error(`${surface}: no seed for ${missing.join(', ')}`);
  const meta = new WeakMap<Req, { method: string; foreign: boolean; check: Check }>();
  const cases = target.routes.map((route) => {
    const [method, template] = route.split(' ');
    const seed = seeds[route];
    const noise = fc.oneof(SHRINK, fc.constant(''), fc.constantFrom('a=1', '__proto__=1', '%zz', 'limit=-1'));
    const query = seed.query
      ? fc.oneof(SHRINK, { weight: 1, arbitrary: fc.constant('') }, { weight: 6, arbitrary: params(seed.query, 2) })
      : fc.oneof(SHRINK, { weight: 12, arbitrary: fc.constant('') }, { weight: 1, arbitrary: noise });
    const contentType = seed.raw?.contentType ?? 'application/json';
    const body: fc.Arbitrary<Buffer | undefined> = seed.raw
      ? seed.raw.body
      : seed.body
        ? jsonDoc(seed.body)
        : method === 'GET' || method === 'DELETE'
          ? fc.constant(undefined)
          : fc.oneof(
              SHRINK,
              { weight: 6, arbitrary: fc.constant(undefined) },
              { weight: 1, arbitrary: jsonDoc(oddValue) },
            );
    return fc
      .record({
        method: otherMethod(method),
        path: pathOf(template, seed.params),
        query,
        auth: ctx.auth,
        env: envelope(contentType),
        body,
      })
      .map((x) => {
        const signed = seed.sign && x.body ? seed.sign(x.body) : [];
        const r = build(
          {
            method: x.method,
            path: x.query ? `${x.path.path}?${x.query}` : x.path.path,
            auth: x.auth,
            headers: signed,
          },
          x.env,
          x.body,
          seed.maxBytes ?? 256 * 1024,
          seed.raw?.padChar,
        );
        meta.set(r, {
          method: x.path.empty ? '' : method,
          foreign: x.path.foreign,
          check: documented(ctx.doc, route, seed.success),
        });
        return r;
      });
  });
  return {
    name: surface,
    methods: [...new Set(target.routes.map((r) => r.split(' ')[0]))],
    cases: fc.oneof(...cases),
    port: ctx.port,
    rules: {
      contract: ctx.contract ?? 'problem',
      statuses: ctx.statuses ?? CORE_STATUSES,
      // Another method on the same path reaches another route: its own shape is checked by its own cases.
      success: (a, r) => {
        const m = meta.get(r);
        return m && m.method === r.method ? m.check(a, r) : undefined;
      },
      // A query string may name another workspace's id as a filter: an empty page is the right answer there.
      foreign: (r) => {
        const path = r.path.split('?')[0];
        if (meta.get(r)?.foreign || ctx.foreignIds.some((id) => path.includes(id))) return 'path';
        // Under another method the request reaches a route that reads no body (HEAD on a list).
        if (meta.get(r)?.method !== r.method) return undefined;
        const text = r.body?.toString('latin1') ?? '';
        return ctx.foreignIds.some((id) => text.includes(id)) ? 'body' : undefined;
      },
      revealed: (a, r) => {
        const asked = r.path + (r.body?.toString('latin1') ?? '');
        return ctx.foreignIds.filter((id) => a.text.includes(id) && !asked.includes(id));
      },
      redirect: ctx.redirect,
    },
    ledger: ctx.ledger,
    tiers: ctx.tiers,
  };
}

type Check = (a: Answered, r: Req) => string | undefined;
const ajv = createAjv({ useDefaults: false });
const compiled = new Map<string, Check>();

/**
 * A 2xx answer as the document describes the route's: one of its 2xx statuses, the content type,
 * and the body valid against the response schema (Ajv), or no content where none is documented.
 */
function documented(doc: OpenApiDoc, route: string, extra?: Check): Check {
  const cached = compiled.get(route);
  if (cached && !extra) return cached;
  const [method, path] = route.split(' ');
  const op = doc.paths[path]?.[method.toLowerCase()];
  if (!op) throw new Error(`${route} is not in the OpenAPI document`);
  const validators = new Map<string, { type?: string; validate?: ValidateFunction }>();
  for (const [status, r] of Object.entries(op.responses)) {
    if (!status.startsWith('2')) continue;
    const [type, media] = Object.entries(r.content ?? {})[0] ?? [];
    validators.set(status, { type, validate: media?.schema ? ajv.compile(media.schema) : undefined });
  }
  const check: Check = (a, r) => {
    const v = validators.get(String(a.status));
    if (!v) return `${a.status} is not a status ${route} documents: ${a.text.slice(0, 200)}`;
    if (!v.type) return a.body.length === 0 ? undefined : `${a.status} has content: ${a.text.slice(0, 200)}`;
    const ct = header(a, 'content-type') ?? '';
    if (!ct.toLowerCase().startsWith(v.type)) return `Content-Type ${ct} is not ${v.type}`;
    if (v.validate && !v.validate(a.json)) {
      const e = v.validate.errors?.[0];
      return `body does not match the documented schema (${e?.instancePath || '/'} ${e?.message}): ${a.text.slice(0, 300)}`;
    }
    return extra?.(a, r);
  };
  if (!extra) compiled.set(route, check);
  return check;
}

/** Every surface `file` has in targets.ts, in its order. */
export const surfacesOf = (file: string): string[] => TARGETS.filter((x) => x.file === file).map((x) => x.surface);

/**
 * One test per surface of a fuzz file (targets.ts): every answer documented, nothing stored when
 * refused, no other workspace reached, and the tiers still ready afterwards.
 */
export function fuzzRoutes(
  t: Test,
  file: string,
  seeds: Record<string, RouteSeed>,
  ctx: RouteContext,
  o: Settings,
): void {
  for (const name of surfacesOf(file))
    t.test(`${name}: every answer documented, nothing stored when refused, no other workspace reached`, async (t) => {
      await fuzz(t, routeSurface(file, name, seeds, ctx), o);
      await stillReady(t, ctx.tiers);
    });
}
