import Type from '#typebox';
import { Nullable, StringEnum, Timestamp, Uuid, Page } from './common.js';
import { ROLES, SCOPES } from './scopes.js';

const role = StringEnum(ROLES);
const locale = Type.String({
  pattern: '^[a-zA-Z]{2,3}(-[a-zA-Z0-9]{2,8})*$',
  maxLength: 35,
  description: 'BCP 47 language tag, e.g. `en` or `pt-BR`.',
});
const timezone = Type.String({
  minLength: 1,
  maxLength: 64,
  description: 'IANA time-zone name, e.g. `Europe/Berlin`.',
});

export const User = Type.Object({
  id: Uuid,
  tenant_id: Uuid,
  email: Type.String(),
  role,
  locale: Nullable(Type.String()),
  timezone: Nullable(Type.String()),
  initial_territory_ids: Type.Array(Type.String()),
  status: StringEnum(['active', 'invited'] as const, { description: '`invited` until the password is set.' }),
  created_at: Timestamp,
});
export const UserList = Page(User);

export const UserInvite = Type.Object(
  {
    email: Type.String({ format: 'email', maxLength: 320 }),
    role: Type.Optional({ ...role, default: 'viewer' }),
    locale: Type.Optional(locale),
    timezone: Type.Optional(timezone),
    initial_territory_ids: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { maxItems: 100, uniqueItems: true }),
    ),
  },
  { additionalProperties: false },
);

export const UserInvited = Type.Intersect([
  User,
  Type.Object({
    invite: Type.Object({
      token: Type.String({
        description: 'Shown once; the invitee sets a password with it at POST /v1/invites/accept.',
      }),
      accept_url: Type.String(),
      expires_at: Timestamp,
    }),
  }),
]);

export const RoleChange = Type.Object({ role }, { additionalProperties: false });

export const InviteAccept = Type.Object(
  {
    token: Type.String({ minLength: 1, maxLength: 200 }),
    password: Type.String({ minLength: 12, maxLength: 256, description: 'At least 12 characters.' }),
  },
  { additionalProperties: false },
);

export const Me = Type.Object({
  kind: StringEnum(['user', 'api_key'] as const),
  id: Uuid,
  tenant_id: Uuid,
  role,
  scopes: Type.Array(StringEnum(SCOPES)),
  email: Type.Optional(Type.String()),
  name: Type.Optional(Type.String()),
  locale: Type.Optional(Nullable(Type.String())),
  timezone: Type.Optional(Nullable(Type.String())),
  client_id: Type.Optional(Type.String({ description: 'For an OAuth access token: the app acting for the user.' })),
  expires_at: Type.Optional(Nullable(Timestamp)),
});

export const UsersQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
    role: Type.Optional(role),
  },
  { additionalProperties: false },
);
