import { randomBytes } from 'node:crypto';
import { OAuthAppCreate, OAuthAppCreated, OAuthAppList } from '../../schemas/core/credentials.js';
import { sha256 } from '../../lib/credentials/secrets.js';
import { invalid, type FieldError } from '../../lib/problem.js';
import type { Sql } from '../../lib/pg.js';
import { json, type Ctx, type Reply } from '../http/context.js';
import type { Route } from '../http/router.js';
import type { Deps } from '../deps.js';

/** An oauth_apps row: the client of the authorize and token endpoints. */
export interface AppRow {
  id: string;
  tenant_id: string;
  name: string;
  client_id: string;
  client_secret_hash: Buffer;
  redirect_uris: string[];
  scopes: string[];
  created_at: Date;
}

const toApp = (r: AppRow) => ({
  id: r.id,
  name: r.name,
  client_id: r.client_id,
  redirect_uris: r.redirect_uris,
  scopes: r.scopes,
  created_at: r.created_at.toISOString(),
});

/** The app a client_id names, in any workspace; undefined for none (or an id no app can have). */
export async function appByClientId(sql: Sql, clientId: string | undefined): Promise<AppRow | undefined> {
  if (!clientId || clientId.length > 100) return undefined;
  const [row] = await sql<AppRow[]>`
    SELECT id::text, tenant_id::text, name, client_id, client_secret_hash, redirect_uris, scopes, created_at
    FROM oauth_apps WHERE client_id = ${clientId}`;
  return row;
}

function redirectUriProblem(uri: string): string | null {
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return 'is not an absolute URI';
  }
  if (u.hash) return 'must not contain a fragment';
  if (u.protocol === 'https:') return null;
  if (u.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(u.hostname)) return null;
  return 'must use https (http only for localhost, 127.0.0.1 or [::1])';
}

/** POST and GET /v1/oauth/apps: a workspace's admins register the OAuth apps its users may authorize. */
export function appRoutes(d: Deps): Route[] {
  const { sql } = d;

  async function createApp(c: Ctx): Promise<Reply> {
    const b = c.body as { name: string; redirect_uris: string[]; scopes: string[] };
    const errors: FieldError[] = [];
    b.redirect_uris.forEach((u, i) => {
      const p = redirectUriProblem(u);
      if (p) errors.push({ field: `redirect_uris[${i}]`, code: 'invalid_redirect_uri', message: `redirect URI ${p}` });
    });
    if (errors.length) throw invalid(errors);
    const clientId = `cli_${randomBytes(16).toString('hex')}`;
    const secret = `cs_${randomBytes(32).toString('base64url')}`;
    const createdBy = c.principal.kind === 'user' ? c.principal.actorId : null;
    const [row] = await sql<AppRow[]>`
      INSERT INTO oauth_apps (tenant_id, name, client_id, client_secret_hash, redirect_uris, scopes, created_by)
      VALUES (
        ${c.principal.tenantId}, ${b.name}, ${clientId}, ${sha256(secret)}, ${b.redirect_uris}, ${b.scopes},
        ${createdBy}
      )
      RETURNING id::text, tenant_id::text, name, client_id, client_secret_hash, redirect_uris, scopes, created_at`;
    return json(201, { ...toApp(row), client_secret: secret }, [['Location', `/v1/oauth/apps/${row.id}`]]);
  }

  async function listApps(c: Ctx): Promise<Reply> {
    const rows = await sql<AppRow[]>`
      SELECT id::text, tenant_id::text, name, client_id, client_secret_hash, redirect_uris, scopes, created_at
      FROM oauth_apps
      WHERE ${c.tenant} ORDER BY created_at, id`;
    return json(200, { data: rows.map(toApp) });
  }

  return [
    {
      tag: 'OAuth',
      auth: 'bearer',
      scope: 'admin:*',
      method: 'POST',
      path: '/v1/oauth/apps',
      summary: 'Register an OAuth app (client_secret shown once)',
      body: OAuthAppCreate,
      bodyExample: {
        name: 'Slack bot',
        redirect_uris: ['https://bot.example.com/oauth/callback'],
        scopes: ['customers:read', 'tasks:write'],
      },
      handler: createApp,
      errors: [413, 415],
      responses: { 201: { description: 'The app with client_id and client_secret.', schema: OAuthAppCreated } },
    },
    {
      tag: 'OAuth',
      auth: 'bearer',
      scope: 'admin:*',
      method: 'GET',
      path: '/v1/oauth/apps',
      summary: 'List OAuth apps',
      handler: listApps,
      responses: { 200: { description: 'Apps of the workspace (no secrets).', schema: OAuthAppList } },
    },
  ] satisfies Route[];
}
