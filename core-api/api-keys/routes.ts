import {
  ApiKeyCreate,
  ApiKeyCreated,
  ApiKeyList,
  IngestionKeyCreated,
  IngestionKeyInfo,
} from '../../schemas/core/credentials.js';
import { IdParams } from '../../schemas/core/common.js';
import type { Role } from '../../schemas/core/scopes.js';
import { parseCidr } from '../../lib/credentials/ip.js';
import { allowedFor } from '../../lib/credentials/scopes.js';
import { newApiKey, newIngestionKey, sha256 } from '../../lib/credentials/secrets.js';
import { json, noContent, type Ctx, type Reply } from '../http/context.js';
import { ApiError, invalid, notFound, type FieldError } from '../../lib/problem.js';
import type { Route } from '../http/router.js';
import type { Deps } from '../deps.js';

interface KeyRow {
  id: string;
  name: string;
  prefix: string;
  last4: string;
  scopes: string[];
  role: Role;
  ip_allowlist: string[];
  expires_at: Date | null;
  revoked_at: Date | null;
  created_at: Date;
}
const KEY_COLUMNS =
  'id::text, name, prefix, last4, scopes, role, ip_allowlist::text[] AS ip_allowlist, expires_at, revoked_at, ' +
  'created_at';

const toKey = (r: KeyRow) => ({
  id: r.id,
  name: r.name,
  prefix: r.prefix,
  last4: r.last4,
  scopes: r.scopes,
  role: r.role,
  ip_allowlist: r.ip_allowlist,
  expires_at: r.expires_at?.toISOString() ?? null,
  revoked_at: r.revoked_at?.toISOString() ?? null,
  created_at: r.created_at.toISOString(),
  status: r.revoked_at ? 'revoked' : r.expires_at && r.expires_at.getTime() <= Date.now() ? 'expired' : 'active',
});

export function apiKeyRoutes(d: Deps): Route[] {
  const { sql } = d;

  async function create(c: Ctx): Promise<Reply> {
    const b = c.body as {
      name: string;
      scopes: string[];
      mode: 'live' | 'test';
      role: Role;
      ip_allowlist?: string[];
      expires_at?: string;
    };
    const errors: FieldError[] = [];
    const cidrs: string[] = [];
    (b.ip_allowlist ?? []).forEach((text, i) => {
      const p = parseCidr(text);
      if (!p)
        errors.push({
          field: `ip_allowlist[${i}]`,
          code: 'invalid_cidr',
          message: `"${text}" is not an IPv4 or IPv6 address or CIDR range`,
        });
      else cidrs.push(`${p.address}/${p.prefix}`);
    });
    const denied = b.scopes.filter((s) => !allowedFor(b.role, [s]).length);
    if (denied.length)
      errors.push({
        field: 'scopes',
        code: 'not_allowed_for_role',
        message: `a key with role ${b.role} cannot hold ${denied.join(', ')}`,
      });
    if (errors.length) throw invalid(errors);
    if (b.expires_at !== undefined && Date.parse(b.expires_at) <= Date.now()) {
      throw new ApiError('unprocessable', 'expires_at must be in the future.', [
        { field: 'expires_at', code: 'in_past', message: 'expires_at must be in the future' },
      ]);
    }
    const key = newApiKey(b.mode);
    const creator = c.principal.kind === 'user' ? c.principal.actorId : null;
    const [row] = await sql<KeyRow[]>`
      INSERT INTO api_keys
        (tenant_id, name, key_hash, prefix, last4, scopes, role, ip_allowlist, expires_at, created_by)
      VALUES (
        ${c.principal.tenantId}, ${b.name}, ${sha256(key)}, ${`svc_sk_${b.mode}_`}, ${key.slice(-4)}, ${b.scopes},
        ${b.role}, (SELECT coalesce(array_agg(network(x::inet)), '{}') FROM unnest(${cidrs}::text[]) x),
        ${b.expires_at ?? null}, ${creator}
      )
      RETURNING ${sql.unsafe(KEY_COLUMNS)}`;
    return json(201, { ...toKey(row), key }, [['Location', `/v1/api-keys/${row.id}`]]);
  }

  async function list(c: Ctx): Promise<Reply> {
    const rows = await sql<KeyRow[]>`
      SELECT ${sql.unsafe(KEY_COLUMNS)} FROM api_keys WHERE ${c.tenant} ORDER BY created_at, id`;
    return json(200, { data: rows.map(toKey) });
  }

  async function revoke(c: Ctx): Promise<Reply> {
    const [row] = await sql<{ id: string }[]>`
      UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
      WHERE ${c.tenant} AND id = ${c.params.id} RETURNING id::text`;
    if (!row) throw notFound('API key');
    await d.notify.apiKeyRevoked(row.id);
    return noContent();
  }

  async function getIngestionKey(c: Ctx): Promise<Reply> {
    const [row] = await sql<
      { last4: string; created_at: Date }[]
    >`SELECT last4, created_at FROM ingestion_keys WHERE ${c.tenant}`;
    return json(200, { last4: row?.last4 ?? null, created_at: row?.created_at.toISOString() ?? null });
  }

  async function regenerate(c: Ctx): Promise<Reply> {
    const key = newIngestionKey();
    const [row] = await sql<{ created_at: Date }[]>`
      INSERT INTO ingestion_keys (tenant_id, key_hash, last4)
      VALUES (${c.principal.tenantId}, ${sha256(key)}, ${key.slice(-4)})
      ON CONFLICT (tenant_id) DO UPDATE SET key_hash = EXCLUDED.key_hash, last4 = EXCLUDED.last4, created_at = now()
      RETURNING created_at`;
    await d.notify.ingestionKeyChanged(c.principal.tenantId);
    return json(201, { key, last4: key.slice(-4), created_at: row.created_at.toISOString() });
  }

  const admin = { auth: 'bearer' as const, scope: 'admin:*' as const };
  return [
    {
      ...admin,
      tag: 'API keys',
      method: 'POST',
      path: '/v1/api-keys',
      summary: 'Create an API key (the value is shown once)',
      body: ApiKeyCreate,
      handler: create,
      bodyExample: {
        name: 'CRM sync',
        scopes: ['customers:read', 'customers:write'],
        mode: 'live',
        role: 'csm',
        ip_allowlist: ['203.0.113.0/24', '2001:db8::/32'],
        expires_at: '2027-03-01T00:00:00Z',
      },
      errors: [413, 415, 422],
      responses: { 201: { description: 'The key, with its value in `key` (shown only here).', schema: ApiKeyCreated } },
    },
    {
      ...admin,
      tag: 'API keys',
      method: 'GET',
      path: '/v1/api-keys',
      summary: 'List API keys (never their values)',
      handler: list,
      responses: { 200: { description: 'All keys of the workspace.', schema: ApiKeyList } },
    },
    {
      ...admin,
      tag: 'API keys',
      method: 'DELETE',
      path: '/v1/api-keys/{id}',
      summary: 'Revoke an API key (effective at once in every process)',
      params: IdParams,
      handler: revoke,
      errors: [404],
      responses: { 204: { description: 'Revoked; further use answers 401 token_revoked.' } },
    },
    {
      ...admin,
      tag: 'Settings',
      method: 'GET',
      path: '/v1/settings/ingestion-key',
      summary: "The ingestion key's last 4 characters",
      handler: getIngestionKey,
      responses: { 200: { description: 'Last 4 characters and creation time.', schema: IngestionKeyInfo } },
    },
    {
      ...admin,
      tag: 'Settings',
      method: 'POST',
      path: '/v1/settings/ingestion-key',
      summary: 'Regenerate the ingestion key (the old one stops working at once)',
      handler: regenerate,
      responses: { 201: { description: 'The new key, shown only here.', schema: IngestionKeyCreated } },
    },
  ] satisfies Route[];
}
