import { type TSchema, Type } from '#typebox';

/** What the builder needs of a route: the same schemas the server validates with. */
export interface OpenApiRoute {
  method: string;
  path: string;
  summary: string;
  description?: string;
  tag: string;
  /** bearer: API key or OAuth token; ingestionKey: the organization's X-API-Key (surface A). */
  auth: 'bearer' | 'none' | 'ingestionKey';
  /** false: the route answers errors in its own shapes (its `responses`), not problem+json. */
  problems?: boolean;
  /** Scopes of which any one will do (one security requirement object each); null: any credential. */
  scope?: string | readonly string[] | null;
  /** The scopes that replace `scope` when the query has these values (`x-security-when`). */
  scopeWhen?: { query: Record<string, string | number | boolean>; scope: string | readonly string[] };
  role?: string;
  bucket?: string;
  params?: TSchema;
  query?: TSchema;
  body?: TSchema;
  bodyType?: 'json' | 'form';
  bodyExample?: unknown;
  headers?: Array<{ name: string; description: string }>;
  responses: Record<number, { description: string; schema?: TSchema; example?: unknown; contentType?: string }>;
  errors?: number[];
}

export interface OpenApiOptions {
  title: string;
  version: string;
  description: string;
  baseUrl: string;
  scopes: Record<string, string>;
  /** The error catalogue: code → status, title, docs. */
  errorCodes: Record<string, { status: number; title: string; docs: string }>;
  problem: TSchema;
  tags: Array<{ name: string; description: string }>;
}

const STATUS_DESCRIPTIONS: Record<number, string> = {
  400: 'Validation error (`validation_failed` with `errors[]`, `malformed_json`, `invalid_cursor`).',
  401: 'Unauthenticated (`unauthenticated`, `token_expired`, `token_revoked`).',
  403: 'Forbidden (`insufficient_scope`, `insufficient_role`, `ip_not_allowed`).',
  404: 'Not found, including resources of another workspace (`not_found`).',
  409: 'Conflict (`conflict`, `last_admin`).',
  413: 'Body too large (`payload_too_large`).',
  415: 'Wrong Content-Type (`unsupported_media_type`).',
  422: 'Semantic error (`renewal_date_in_past`, `idempotency_key_reused`, `unprocessable`).',
  429: 'Rate limited (`rate_limited`); see Retry-After.',
  500: 'Server error (`internal_error`).',
  503: 'Service unavailable (`service_unavailable`); see Retry-After.',
};

const listOf = (s: string | readonly string[] | null | undefined): readonly string[] =>
  s == null ? [] : typeof s === 'string' ? [s] : s;

/**
 * A bearer operation's `security`: one requirement object per accepted scope and scheme, which
 * OpenAPI reads as "any of"; none (empty lists) when any valid credential will do.
 */
const bearerSecurity = (scopes: readonly string[]) =>
  scopes.length
    ? scopes.flatMap((s) => [{ oauth2: [s] }, { bearerApiKey: [s] }])
    : [{ oauth2: [] }, { bearerApiKey: [] }];

/** The scope note of an operation's description. */
function scopeNote(scopes: readonly string[], lead = 'Scope'): string {
  if (!scopes.length) return 'Any valid credential.';
  const named = scopes.map((s) => `\`${s}\``).join(' or ');
  return scopes.includes('admin:*') ? `${lead}: ${named}.` : `${lead}: ${named} (or \`admin:*\`).`;
}

/** Plain JSON of a TypeBox schema (its symbols dropped). */
const plain = (s: unknown): Record<string, unknown> => JSON.parse(JSON.stringify(s)) as Record<string, unknown>;

export function buildOpenApi(routes: readonly OpenApiRoute[], o: OpenApiOptions): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const rateHeaders = {
    'X-RateLimit-Limit': { $ref: '#/components/headers/X-RateLimit-Limit' },
    'X-RateLimit-Remaining': { $ref: '#/components/headers/X-RateLimit-Remaining' },
    'X-RateLimit-Reset': { $ref: '#/components/headers/X-RateLimit-Reset' },
    'X-Trace-Id': { $ref: '#/components/headers/X-Trace-Id' },
  };
  for (const r of routes) {
    const op: Record<string, unknown> = {
      operationId: `${r.method.toLowerCase()}${r.path
        .replace(/\/v1/, '')
        .replace(/\{(\w+)\}/g, 'By_$1')
        .split(/[/-]/)
        .filter(Boolean)
        .map((s) => s[0].toUpperCase() + s.slice(1))
        .join('')}`,
      summary: r.summary,
      tags: [r.tag],
    };
    const scopes = listOf(r.scope);
    const when = r.scopeWhen;
    const whenText = when
      ? Object.entries(when.query)
          .map(([k, v]) => `${k}=${v}`)
          .join('&')
      : '';
    const notes: string[] = [];
    if (r.description) notes.push(r.description);
    if (r.auth === 'bearer') notes.push(scopeNote(scopes));
    if (r.auth === 'bearer' && when) notes.push(scopeNote(listOf(when.scope), `With \`${whenText}\`, scope`));
    if (r.role) notes.push(`Role: ${r.role}.`);
    if (r.auth === 'bearer') notes.push(`Rate-limit bucket: ${r.bucket ?? (r.method === 'GET' ? 'read' : 'write')}.`);
    op.description = notes.join('\n\n');
    op.security =
      r.auth === 'bearer' ? bearerSecurity(scopes) : r.auth === 'ingestionKey' ? [{ ingestionKey: [] }] : [];
    if (scopes.length === 1) op['x-required-scope'] = scopes[0];
    // OpenAPI has no security that depends on the request; this extension says which query asks for which scopes.
    if (r.auth === 'bearer' && when)
      op['x-security-when'] = [{ query: when.query, security: bearerSecurity(listOf(when.scope)) }];
    if (r.role) op['x-required-role'] = r.role;
    const parameters: unknown[] = [];
    for (const m of r.path.matchAll(/\{(\w+)\}/g)) {
      const schema = (r.params as { properties?: Record<string, unknown> } | undefined)?.properties?.[m[1]] ?? {
        type: 'string',
      };
      parameters.push({ name: m[1], in: 'path', required: true, schema: plain(schema) });
    }
    const q = r.query as { properties?: Record<string, { description?: string }>; required?: string[] } | undefined;
    for (const [name, schema] of Object.entries(q?.properties ?? {})) {
      parameters.push({
        name,
        in: 'query',
        required: q?.required?.includes(name) ?? false,
        schema: plain(schema),
        ...(schema.description ? { description: schema.description } : {}),
      });
    }
    for (const h of r.headers ?? [])
      parameters.push({
        name: h.name,
        in: 'header',
        required: false,
        description: h.description,
        schema: { type: 'string' },
      });
    if (parameters.length) op.parameters = parameters;
    if (r.body) {
      const type = r.bodyType === 'form' ? 'application/x-www-form-urlencoded' : 'application/json';
      op.requestBody = {
        required: true,
        content: {
          [type]: { schema: plain(r.body), ...(r.bodyExample !== undefined ? { example: r.bodyExample } : {}) },
        },
      };
    }
    const responses: Record<string, unknown> = {};
    for (const [status, doc] of Object.entries(r.responses)) {
      const ct = doc.contentType ?? 'application/json';
      const resp: Record<string, unknown> = { description: doc.description };
      if (doc.schema)
        resp.content = {
          [ct]: { schema: plain(doc.schema), ...(doc.example !== undefined ? { example: doc.example } : {}) },
        };
      else if (doc.contentType) resp.content = { [ct]: { schema: { type: 'string' } } };
      if (r.auth === 'bearer') resp.headers = rateHeaders;
      else if (r.auth === 'ingestionKey')
        resp.headers = {
          'X-Trace-Id': rateHeaders['X-Trace-Id'],
          ...(Number(status) === 429 || Number(status) === 503
            ? { 'Retry-After': { description: 'Seconds to wait.', schema: { type: 'integer' } } }
            : {}),
        };
      else if (Number(status) === 303)
        resp.headers = {
          Location: {
            description: 'redirect_uri with code and state, or error and state.',
            schema: { type: 'string' },
          },
        };
      responses[status] = resp;
    }
    const errorStatuses = new Set<number>([
      ...(r.body || r.query ? [400] : []),
      ...(r.auth === 'bearer' ? [401, 403, 429] : []),
      ...(r.errors ?? []),
      500,
    ]);
    if (r.problems !== false)
      for (const s of [...errorStatuses].sort())
        if (!responses[s]) responses[s] = { $ref: `#/components/responses/Problem${s}` };
    op.responses = responses;
    const path = (paths[r.path] ??= {});
    path[r.method.toLowerCase()] = op;
  }

  const problemResponses: Record<string, unknown> = {};
  for (const [status, description] of Object.entries(STATUS_DESCRIPTIONS)) {
    const code = Object.entries(o.errorCodes).find(([, v]) => String(v.status) === status);
    problemResponses[`Problem${status}`] = {
      description,
      headers:
        Number(status) === 429
          ? { 'Retry-After': { description: 'Seconds to wait.', schema: { type: 'integer' } } }
          : undefined,
      content: {
        'application/problem+json': {
          schema: { $ref: '#/components/schemas/Problem' },
          example: code
            ? {
                type: `${o.baseUrl}/errors/${code[0]}`,
                title: code[1].title,
                status: Number(status),
                detail: code[1].docs,
                instance: '/v1/customers',
                trace_id: '0192f0c4-8a55-7b3e-9d1c-2b7f3c4d5e6f',
                ...(code[0] === 'validation_failed'
                  ? { errors: [{ field: 'arr', code: 'must_be_positive', message: 'arr must be positive' }] }
                  : {}),
              }
            : undefined,
        },
      },
    };
    if (!(problemResponses[`Problem${status}`] as { headers?: unknown }).headers)
      delete (problemResponses[`Problem${status}`] as { headers?: unknown }).headers;
  }

  return {
    openapi: '3.1.0',
    info: { title: o.title, version: o.version, description: o.description },
    servers: [{ url: o.baseUrl }],
    tags: o.tags,
    paths,
    components: {
      schemas: { Problem: plain(o.problem) },
      responses: problemResponses,
      headers: {
        'X-RateLimit-Limit': {
          description: 'Requests allowed in the current window for this workspace and bucket.',
          schema: { type: 'integer' },
        },
        'X-RateLimit-Remaining': { description: 'Requests left in the current window.', schema: { type: 'integer' } },
        'X-RateLimit-Reset': {
          description: 'Unix timestamp (seconds) when the window resets.',
          schema: { type: 'integer' },
        },
        'X-Trace-Id': { description: 'Identifier of this request; quote it to support.', schema: { type: 'string' } },
      },
      securitySchemes: {
        ingestionKey: {
          type: 'apiKey',
          in: 'header',
          name: 'X-API-Key',
          description:
            "The organization's ingestion key `sk_live_` + 64 hex (surface A only); the workspace is derived from it.",
        },
        bearerApiKey: {
          type: 'http',
          scheme: 'bearer',
          description:
            'API key `svc_sk_live_…` or `svc_sk_test_…` sent as `Authorization: Bearer <key>`. Scopes are fixed at ' +
            'creation.',
        },
        oauth2: {
          type: 'oauth2',
          description:
            'Authorization Code with PKCE (S256 only). Access tokens are EdDSA JWTs valid 1 hour; refresh tokens ' +
            'last 90 days and rotate on every use.',
          flows: {
            authorizationCode: {
              authorizationUrl: `${o.baseUrl}/v1/oauth/authorize`,
              tokenUrl: `${o.baseUrl}/v1/oauth/token`,
              refreshUrl: `${o.baseUrl}/v1/oauth/token`,
              scopes: o.scopes,
            },
          },
        },
      },
    },
    'x-error-codes': Object.fromEntries(
      Object.entries(o.errorCodes).map(([k, v]) => [
        k,
        { status: v.status, title: v.title, description: v.docs, type: `${o.baseUrl}/errors/${k}` },
      ]),
    ),
  };
}

/** The document itself, as GET /v1/openapi.json answers it. */
export const OpenApiDocument = Type.Object(
  {
    openapi: Type.String(),
    info: Type.Object({ title: Type.String(), version: Type.String() }),
    paths: Type.Record(Type.String(), Type.Object({})),
    components: Type.Optional(Type.Object({})),
  },
  { description: 'OpenAPI 3.1.' },
);
