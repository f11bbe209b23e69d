import postgres from 'postgres';

export type Sql = postgres.Sql;

/**
 * Workspace scoping, written once (DESIGN.md section 6: another workspace's resource answers 404): a
 * statement that reads, updates or deletes a table with tenant_id nests `inTenant` or `inTenants`, or
 * is counted global on purpose in test/architecture.test.ts. An INSERT writes the tenant id: no filter.
 * Text built with SqlParams has `p.inTenant`, ClickHouse `chTenant` (lib/metrics/literal.ts); core-api
 * builds `c.tenant` once per request. A fragment is bound to no pool: this one, never connected, builds them.
 */
const fragments = postgres({ max: 1 });
export type Scope = postgres.PendingQuery<postgres.Row[]>;

/** `[alias.]tenant_id = $n`. */
export const inTenant = (tenantId: string, alias?: string): Scope =>
  alias ? fragments`${fragments(alias)}.tenant_id = ${tenantId}` : fragments`tenant_id = ${tenantId}`;

/** The workspaces a process serves (a *_TENANTS setting); an empty list serves every one: `true`. */
export function inTenants(tenantIds: readonly string[], alias?: string): Scope {
  const column = alias ? fragments`${fragments(alias)}.tenant_id` : fragments`tenant_id`;
  return tenantIds.length ? fragments`${column} = ANY(${tenantIds as string[]}::uuid[])` : fragments`true`;
}

/**
 * A pool. `maxBackoffS` (default 1 s) bounds the wait before connecting again after failed attempts:
 * postgres.js's own waits 3^n / 100 s after n failures, up to 20 s, so after PostgreSQL was down for
 * a few seconds a pool (and the LISTEN connection of `sql.listen`, which counts the same failures)
 * came back up to 20 s after PostgreSQL did, and every tier answered 503 that long.
 */
export function connectPg(url: string, max = 10, o: { maxBackoffS?: number } = {}): Sql {
  const { maxBackoffS = 1 } = o;
  return postgres(url, {
    max,
    idle_timeout: 30,
    connect_timeout: 10,
    onnotice: () => {},
    backoff: (n: number) => Math.min(0.05 * 2 ** n, maxBackoffS) * (0.5 + Math.random() / 2),
  });
}

/** Seconds a client is asked to wait when PostgreSQL is away. */
export const STORE_RETRY_AFTER_S = 2;

/** postgres.js's own codes for a connection that could not be made or was lost. */
const CONNECTION_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
]);

/**
 * Whether PostgreSQL was away rather than the request wrong: no connection, a connection lost, or
 * a server shutting down or starting up (SQLSTATE class 08, 57P01-57P03). Such a request is
 * answered 503 with Retry-After: retried a little later, it will be served.
 */
export function isPgUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  return (
    CONNECTION_CODES.has(code) || code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03'
  );
}
