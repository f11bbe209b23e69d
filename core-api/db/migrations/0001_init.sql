-- Workspaces (tenants), the per-organization ingestion key, users, API keys, customers, products,
-- the event catalog and the shared rate-limit counters.

CREATE TABLE tenants (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name        text NOT NULL,
  plan        text NOT NULL DEFAULT 'starter' CHECK (plan IN ('starter', 'growth', 'scale', 'enterprise')),
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- One ingestion key per organization: only its SHA-256 and last 4 characters are kept.
CREATE TABLE ingestion_keys (
  tenant_id   uuid PRIMARY KEY REFERENCES tenants ON DELETE CASCADE,
  key_hash    bytea NOT NULL UNIQUE,
  last4       text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
  id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id             uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  email                 text NOT NULL,
  password_hash         text,
  role                  text NOT NULL CHECK (role IN ('admin', 'csm', 'viewer')),
  locale                text,
  timezone              text,
  initial_territory_ids text[] NOT NULL DEFAULT '{}',
  created_at            timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_tenant_email ON users (tenant_id, lower(email));

CREATE TABLE api_keys (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id     uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  name          text NOT NULL,
  key_hash      bytea NOT NULL UNIQUE,
  prefix        text NOT NULL CHECK (prefix IN ('svc_sk_live_', 'svc_sk_test_')),
  last4         text NOT NULL,
  scopes        text[] NOT NULL,
  role          text NOT NULL DEFAULT 'admin' CHECK (role IN ('admin', 'csm', 'viewer')),
  ip_allowlist  cidr[] NOT NULL DEFAULT '{}',
  expires_at    timestamptz,
  revoked_at    timestamptz,
  created_by    uuid REFERENCES users ON DELETE SET NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_at);

CREATE TABLE customers (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id        uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  name             text NOT NULL,
  email_domain     text,
  arr              numeric(16, 2) CHECK (arr > 0),
  owner_email      text,
  status           text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'trial', 'churned', 'paused')),
  renewal_date     date,
  custom_fields    jsonb NOT NULL DEFAULT '{}',
  external_id      text,
  external_source  text NOT NULL DEFAULT 'internal',
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  deleted_at       timestamptz,
  search           tsvector GENERATED ALWAYS AS (
                     to_tsvector('simple', coalesce(name, '') || ' ' || coalesce(email_domain, '') || ' ' || replace(coalesce(email_domain, ''), '.', ' '))
                   ) STORED
);
-- Each source keeps its own id space; a customer without an external id is not constrained.
CREATE UNIQUE INDEX customers_external ON customers (tenant_id, external_source, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX customers_page ON customers (tenant_id, created_at, id);
CREATE INDEX customers_search ON customers USING gin (search);

CREATE TABLE products (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id   uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  code        text NOT NULL,
  name        text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, code)
);

-- Event names seen per workspace; a name appears here on its first ingestion.
CREATE TABLE event_catalog (
  tenant_id      uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  event_name     text NOT NULL,
  first_seen_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, event_name)
);

-- Shared counters behind the per-organization limits: processes lease tokens in chunks.
CREATE TABLE rate_windows (
  tenant_id     uuid NOT NULL,
  bucket        text NOT NULL,
  window_start  timestamptz NOT NULL,
  used          bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant_id, bucket, window_start)
);
