import { randomBytes } from 'node:crypto';
import {
  Me,
  RoleChange,
  User,
  UserInvite,
  UserInvited,
  UserList,
  UsersQuery,
  InviteAccept,
} from '../../schemas/core/users.js';
import { IdParams } from '../../schemas/core/common.js';
import { hashPassword, sha256 } from '../../lib/credentials/secrets.js';
import { json, type Ctx, type Reply } from '../http/context.js';
import { decodeCursor, page } from '../../lib/cursor.js';
import { ApiError, invalid, notFound } from '../../lib/problem.js';
import type { Route } from '../http/router.js';
import { isUniqueViolation, type Deps } from '../deps.js';

const INVITE_TTL_DAYS = 7;

interface UserRow {
  id: string;
  tenant_id: string;
  email: string;
  role: string;
  locale: string | null;
  timezone: string | null;
  initial_territory_ids: string[];
  password_hash: string | null;
  created_at: Date;
  cursor_ts: string;
}
const USER_COLUMNS =
  'id::text, tenant_id::text, email, role, locale, timezone, initial_territory_ids, password_hash, created_at, ' +
  'created_at::text AS cursor_ts';

const toUser = (r: UserRow) => ({
  id: r.id,
  tenant_id: r.tenant_id,
  email: r.email,
  role: r.role,
  locale: r.locale,
  timezone: r.timezone,
  initial_territory_ids: r.initial_territory_ids,
  status: r.password_hash ? 'active' : 'invited',
  created_at: r.created_at.toISOString(),
});

function validTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

export function userRoutes(d: Deps): Route[] {
  const { sql } = d;

  async function list(c: Ctx): Promise<Reply> {
    const limit = c.query.limit ?? 50;
    const after = decodeCursor(c.query.cursor);
    const rows = await sql<UserRow[]>`
      SELECT ${sql.unsafe(USER_COLUMNS)} FROM users WHERE ${c.tenant}
        ${c.query.role ? sql`AND role = ${c.query.role}` : sql``}
        ${after ? sql`AND (created_at, id) > (${after.t}::text::timestamptz, ${after.id}::uuid)` : sql``}
      ORDER BY created_at, id LIMIT ${limit + 1}`;
    return json(200, page(rows, limit, toUser));
  }

  async function me(c: Ctx): Promise<Reply> {
    const p = c.principal;
    const scopes = [...p.scopes].sort();
    if (p.kind === 'api_key') {
      const [k] = await sql<
        { name: string; expires_at: Date | null }[]
      >`SELECT name, expires_at FROM api_keys WHERE ${c.tenant} AND id = ${p.actorId}`;
      return json(200, {
        kind: 'api_key',
        id: p.actorId,
        tenant_id: p.tenantId,
        role: p.role,
        scopes,
        name: k?.name,
        expires_at: k?.expires_at?.toISOString() ?? null,
      });
    }
    const [u] = await sql<
      UserRow[]
    >`SELECT ${sql.unsafe(USER_COLUMNS)} FROM users WHERE ${c.tenant} AND id = ${p.actorId}`;
    if (!u) throw new ApiError('token_revoked', 'The user of this access token no longer exists.');
    return json(200, {
      kind: 'user',
      id: u.id,
      tenant_id: u.tenant_id,
      role: u.role,
      scopes,
      email: u.email,
      locale: u.locale,
      timezone: u.timezone,
      client_id: p.clientId,
    });
  }

  async function invite(c: Ctx): Promise<Reply> {
    const b = c.body as {
      email: string;
      role: string;
      locale?: string;
      timezone?: string;
      initial_territory_ids?: string[];
    };
    if (b.timezone !== undefined && !validTimeZone(b.timezone))
      throw invalid([
        {
          field: 'timezone',
          code: 'invalid_timezone',
          message: 'timezone must be an IANA time-zone name such as Europe/Berlin',
        },
      ]);
    const token = `inv_${randomBytes(32).toString('base64url')}`;
    const expires = new Date(Date.now() + INVITE_TTL_DAYS * 86_400_000);
    try {
      const row = await sql.begin(async (tx) => {
        const [u] = await tx<UserRow[]>`
          INSERT INTO users (tenant_id, email, role, locale, timezone, initial_territory_ids)
          VALUES (
            ${c.principal.tenantId}, ${b.email}, ${b.role}, ${b.locale ?? null}, ${b.timezone ?? null},
            ${b.initial_territory_ids ?? []}
          )
          RETURNING ${tx.unsafe(USER_COLUMNS)}`;
        await tx`
          INSERT INTO user_invites (token_hash, tenant_id, user_id, expires_at)
          VALUES (${sha256(token)}, ${c.principal.tenantId}, ${u.id}, ${expires})`;
        return u;
      });
      return json(
        201,
        {
          ...toUser(row),
          invite: { token, accept_url: `${d.baseUrl}/v1/invites/accept`, expires_at: expires.toISOString() },
        },
        [['Location', `/v1/users/${row.id}`]],
      );
    } catch (err) {
      if (isUniqueViolation(err, 'users_tenant_email'))
        throw new ApiError('conflict', 'A user with this e-mail already exists in this workspace.', [
          { field: 'email', code: 'duplicate', message: 'email is already used in this workspace' },
        ]);
      throw err;
    }
  }

  async function changeRole(c: Ctx): Promise<Reply> {
    const row = await sql.begin(async (tx) => {
      // Serializes role changes of a workspace so two demotions cannot both pass the last-admin check.
      await tx`SELECT id FROM tenants WHERE id = ${c.principal.tenantId} FOR UPDATE`;
      const [u] = await tx<
        UserRow[]
      >`SELECT ${tx.unsafe(USER_COLUMNS)} FROM users WHERE ${c.tenant} AND id = ${c.params.id}`;
      if (!u) throw notFound('User');
      if (u.role === 'admin' && c.body.role !== 'admin') {
        const [{ n }] = await tx<
          { n: number }[]
        >`SELECT count(*)::int AS n FROM users WHERE ${c.tenant} AND role = 'admin'`;
        if (n <= 1)
          throw new ApiError(
            'last_admin',
            'This user is the only admin of the workspace; make another user admin first.',
          );
      }
      const [updated] = await tx<UserRow[]>`
        UPDATE users SET role = ${c.body.role} WHERE ${c.tenant} AND id = ${c.params.id}
        RETURNING ${tx.unsafe(USER_COLUMNS)}`;
      return updated;
    });
    return json(200, toUser(row));
  }

  async function accept(c: Ctx): Promise<Reply> {
    const hash = await hashPassword(c.body.password);
    const row = await sql.begin(async (tx) => {
      const [inv] = await tx<{ user_id: string; tenant_id: string }[]>`
        UPDATE user_invites SET used_at = now()
        WHERE token_hash = ${sha256(c.body.token)} AND used_at IS NULL AND expires_at > now()
        RETURNING user_id::text, tenant_id::text`;
      if (!inv) throw new ApiError('not_found', 'This invite token is unknown, used or expired.');
      const [u] = await tx<
        UserRow[]
      >`UPDATE users SET password_hash = ${hash} WHERE id = ${inv.user_id} RETURNING ${tx.unsafe(USER_COLUMNS)}`;
      return u;
    });
    return json(200, toUser(row));
  }

  const common = { tag: 'Users', auth: 'bearer' as const };
  return [
    {
      ...common,
      method: 'GET',
      path: '/v1/users',
      summary: 'List users (admin only)',
      scope: 'users:read',
      role: 'admin',
      query: UsersQuery,
      handler: list,
      responses: { 200: { description: 'A page of users.', schema: UserList } },
    },
    {
      ...common,
      method: 'GET',
      path: '/v1/users/me',
      summary: 'Profile of the current actor (a user or an API key)',
      scope: null,
      handler: me,
      responses: { 200: { description: 'The actor.', schema: Me } },
    },
    {
      ...common,
      method: 'POST',
      path: '/v1/users',
      summary: 'Invite a user (admin only)',
      scope: 'users:write',
      role: 'admin',
      body: UserInvite,
      bodyExample: {
        email: 'sam@yourco.com',
        role: 'csm',
        locale: 'en',
        timezone: 'Europe/Berlin',
        initial_territory_ids: ['emea'],
      },
      handler: invite,
      errors: [409, 413, 415],
      responses: {
        201: { description: 'The invited user with a one-time invite token (valid 7 days).', schema: UserInvited },
      },
    },
    {
      ...common,
      method: 'PATCH',
      path: '/v1/users/{id}/role',
      summary: "Change a user's role (admin only)",
      scope: 'users:write',
      role: 'admin',
      params: IdParams,
      body: RoleChange,
      bodyExample: { role: 'viewer' },
      handler: changeRole,
      errors: [404, 409, 413, 415],
      description:
        'Body `{"role": "admin" | "csm" | "viewer"}`. Demoting the last admin answers 409 `last_admin`. Access ' +
        'tokens already issued keep their scopes until they expire (at most 1 hour); the next refresh applies the ' +
        'new role.',
      responses: { 200: { description: 'The user.', schema: User } },
    },
    {
      tag: 'Users',
      auth: 'none',
      method: 'POST',
      path: '/v1/invites/accept',
      summary: 'Set the password of an invited user',
      body: InviteAccept,
      bucket: 'write',
      bodyExample: { token: 'inv_…', password: 'correct horse battery staple' },
      handler: accept,
      errors: [404, 413, 415],
      responses: { 200: { description: 'The user, now active.', schema: User } },
    },
  ] satisfies Route[];
}
