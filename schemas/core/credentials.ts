import Type from '#typebox';
import { Nullable, StringEnum, Timestamp, Uuid } from './common.js';
import { ROLES, SCOPES } from './scopes.js';

const scopes = Type.Array(StringEnum(SCOPES), { minItems: 1, uniqueItems: true });

export const ApiKeyCreate = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100, pattern: '\\S' }),
    scopes,
    mode: Type.Optional(
      StringEnum(['live', 'test'] as const, {
        default: 'live',
        description: '`live` → `svc_sk_live_…`, `test` → `svc_sk_test_…`.',
      }),
    ),
    role: Type.Optional(
      StringEnum(ROLES, {
        default: 'admin',
        description: 'Role the key acts with; its scopes must be allowed for that role.',
      }),
    ),
    ip_allowlist: Type.Optional(
      Type.Array(
        Type.String({
          minLength: 2,
          maxLength: 64,
          description:
            'IPv4 or IPv6 CIDR range, e.g. `203.0.113.0/24` or `2001:db8::/32`; a bare address means /32 or /128.',
        }),
        { maxItems: 100 },
      ),
    ),
    expires_at: Type.Optional(
      Type.String({ format: 'date-time', description: 'Must be in the future; 90 days is recommended.' }),
    ),
  },
  { additionalProperties: false },
);

export const ApiKey = Type.Object({
  id: Uuid,
  name: Type.String(),
  prefix: Type.String(),
  last4: Type.String(),
  scopes: Type.Array(Type.String()),
  role: StringEnum(ROLES),
  ip_allowlist: Type.Array(Type.String()),
  expires_at: Nullable(Timestamp),
  revoked_at: Nullable(Timestamp),
  created_at: Timestamp,
  status: StringEnum(['active', 'expired', 'revoked'] as const),
});
export const ApiKeyCreated = Type.Intersect([
  ApiKey,
  Type.Object({ key: Type.String({ description: 'Shown once; stored only hashed.' }) }),
]);
export const ApiKeyList = Type.Object({ data: Type.Array(ApiKey) });

export const OAuthAppCreate = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100, pattern: '\\S' }),
    redirect_uris: Type.Array(Type.String({ format: 'uri', maxLength: 2000 }), {
      minItems: 1,
      maxItems: 10,
      uniqueItems: true,
      description: 'https URIs, or http on localhost/127.0.0.1/[::1]; compared exactly.',
    }),
    scopes,
  },
  { additionalProperties: false },
);
export const OAuthApp = Type.Object({
  id: Uuid,
  name: Type.String(),
  client_id: Type.String(),
  redirect_uris: Type.Array(Type.String()),
  scopes: Type.Array(Type.String()),
  created_at: Timestamp,
});
export const OAuthAppCreated = Type.Intersect([
  OAuthApp,
  Type.Object({ client_secret: Type.String({ description: 'Shown once; stored only hashed.' }) }),
]);
export const OAuthAppList = Type.Object({ data: Type.Array(OAuthApp) });

export const AuthorizeQuery = Type.Object({
  response_type: Type.String({ enum: ['code'] }),
  client_id: Type.String(),
  redirect_uri: Type.String({ format: 'uri' }),
  scope: Type.String({ description: "Space-separated scopes; must be among the app's scopes." }),
  state: Type.String({ description: 'Echoed on the redirect.' }),
  code_challenge: Type.String({ pattern: '^[A-Za-z0-9_-]{43}$', description: 'BASE64URL(SHA256(code_verifier)).' }),
  code_challenge_method: Type.String({ enum: ['S256'] }),
});

export const TokenRequest = Type.Object({
  grant_type: Type.String({ enum: ['authorization_code', 'refresh_token'] }),
  code: Type.Optional(Type.String()),
  redirect_uri: Type.Optional(Type.String()),
  client_id: Type.String(),
  client_secret: Type.String(),
  code_verifier: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9._~-]{43,128}$' })),
  refresh_token: Type.Optional(Type.String()),
  scope: Type.Optional(Type.String({ description: 'Refresh only: a subset of the granted scopes.' })),
});

export const TokenResponse = Type.Object({
  access_token: Type.String({ description: 'JWT (EdDSA), 1 hour.' }),
  refresh_token: Type.String({ description: 'Opaque, 90 days, rotated on every use.' }),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer({ description: 'Seconds (3600).' }),
  scope: Type.String({ description: 'Space-separated granted scopes.' }),
  tenant_id: Uuid,
});

export const OAuthError = Type.Object(
  {
    error: StringEnum([
      'invalid_request',
      'invalid_client',
      'invalid_grant',
      'unauthorized_client',
      'unsupported_grant_type',
      'invalid_scope',
    ] as const),
    error_description: Type.String(),
  },
  { additionalProperties: true, description: 'RFC 6749 §5.2 fields, carried inside a problem document.' },
);

export const IngestionKeyInfo = Type.Object({
  last4: Nullable(Type.String()),
  created_at: Nullable(Timestamp),
});
export const IngestionKeyCreated = Type.Object({
  key: Type.String({ description: '`sk_live_` + 64 hex; shown once. The previous key stops working at once.' }),
  last4: Type.String(),
  created_at: Timestamp,
});
