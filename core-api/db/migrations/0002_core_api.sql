-- Core API: audit log of credential use, OAuth apps/codes/refresh tokens, JWT signing keys,
-- idempotency records, contacts, jobs, user invites, and customer columns filled by later tiers.

-- Written in batches off the request path; actor_id is the API key or user that acted.
CREATE TABLE credential_audit (
  id          bigserial PRIMARY KEY,
  tenant_id   uuid NOT NULL,
  actor_kind  text NOT NULL CHECK (actor_kind IN ('api_key', 'user')),
  actor_id    uuid NOT NULL,
  trace_id    text NOT NULL,
  method      text NOT NULL,
  endpoint    text NOT NULL,
  status      integer NOT NULL,
  ip          text,
  at          timestamptz NOT NULL
);
CREATE INDEX credential_audit_actor ON credential_audit (tenant_id, actor_id, at);

-- Shared by every core-api process so tokens signed by one verify in all.
CREATE TABLE signing_keys (
  kid          text PRIMARY KEY,
  alg          text NOT NULL,
  private_pem  text NOT NULL,
  public_pem   text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE oauth_apps (
  id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id           uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  name                text NOT NULL,
  client_id           text NOT NULL UNIQUE,
  client_secret_hash  bytea NOT NULL,
  redirect_uris       text[] NOT NULL,
  scopes              text[] NOT NULL,
  created_by          uuid,
  created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_apps_tenant ON oauth_apps (tenant_id, created_at);

CREATE TABLE oauth_codes (
  code_hash       bytea PRIMARY KEY,
  tenant_id       uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  app_id          uuid NOT NULL REFERENCES oauth_apps ON DELETE CASCADE,
  user_id         uuid NOT NULL REFERENCES users ON DELETE CASCADE,
  redirect_uri    text NOT NULL,
  scopes          text[] NOT NULL,
  code_challenge  text NOT NULL,
  family_id       uuid NOT NULL,
  expires_at      timestamptz NOT NULL,
  used_at         timestamptz
);

-- A family is every refresh token descended from one authorization code.
CREATE TABLE oauth_refresh_tokens (
  token_hash   bytea PRIMARY KEY,
  family_id    uuid NOT NULL,
  tenant_id    uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  app_id       uuid NOT NULL REFERENCES oauth_apps ON DELETE CASCADE,
  user_id      uuid NOT NULL REFERENCES users ON DELETE CASCADE,
  scopes       text[] NOT NULL,
  expires_at   timestamptz NOT NULL,
  rotated_at   timestamptz,
  revoked_at   timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_refresh_family ON oauth_refresh_tokens (family_id);

CREATE TABLE oauth_revoked_families (
  family_id   uuid PRIMARY KEY,
  revoked_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE idempotency_keys (
  tenant_id     uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  scope         text NOT NULL,
  key           text NOT NULL,
  request_hash  bytea NOT NULL,
  status        integer NOT NULL,
  body          jsonb NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, scope, key)
);

CREATE TABLE contacts (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id        uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  customer_id      uuid NOT NULL REFERENCES customers ON DELETE CASCADE,
  name             text NOT NULL,
  email            text,
  title            text,
  is_champion      boolean NOT NULL DEFAULT false,
  whatsapp_number  text,
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX contacts_page ON contacts (tenant_id, customer_id, created_at, id);
CREATE UNIQUE INDEX contacts_email ON contacts (customer_id, lower(email)) WHERE email IS NOT NULL;

CREATE TABLE jobs (
  id           uuid PRIMARY KEY,
  tenant_id    uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  type         text NOT NULL,
  status       text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
  params       jsonb NOT NULL,
  input        jsonb NOT NULL,
  total        integer NOT NULL,
  processed    integer NOT NULL DEFAULT 0,
  counts       jsonb NOT NULL DEFAULT '{}',
  errors       jsonb NOT NULL DEFAULT '[]',
  error        text,
  created_by   uuid,
  heartbeat_at timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now(),
  started_at   timestamptz,
  finished_at  timestamptz
);
CREATE INDEX jobs_queued ON jobs (created_at) WHERE status IN ('queued', 'running');

CREATE TABLE user_invites (
  token_hash  bytea PRIMARY KEY,
  tenant_id   uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  user_id     uuid NOT NULL REFERENCES users ON DELETE CASCADE,
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz,
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- Filled by the health scorer; filterable now.
ALTER TABLE customers ADD COLUMN health_status text CHECK (health_status IN ('healthy', 'neutral', 'at_risk'));
ALTER TABLE customers ADD COLUMN health_score numeric(5, 2);
CREATE INDEX customers_trash ON customers (tenant_id, deleted_at) WHERE deleted_at IS NOT NULL;
