-- Outbound webhooks (docs/webhooks.md): subscriptions, the outbox of webhook events, and the
-- delivery queue with its attempt log.

CREATE TABLE webhook_subscriptions (
  id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id              uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  url                    text NOT NULL,
  events                 text[] NOT NULL,
  description            text,
  enabled                boolean NOT NULL DEFAULT true,
  -- `whsec_…`: the HMAC key must be usable, so it is stored as such (like the signing secrets of
  -- every webhook provider); it is shown once, at creation and rotation.
  secret                 text NOT NULL,
  -- After a rotation the previous secret signs too (a second signature), until previous_until.
  previous_secret        text,
  previous_until         timestamptz,
  -- Why the service disabled it: 'gone' (the endpoint answered 410) or 'failing' (every attempt
  -- failed for WEBHOOK_DISABLE_AFTER_MS); null when enabled, or disabled by a client.
  disabled_reason        text CHECK (disabled_reason IN ('gone', 'failing')),
  -- The first failed attempt since the last success; null while deliveries succeed.
  failing_since          timestamptz,
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_subscriptions_page ON webhook_subscriptions (tenant_id, created_at, id);

-- UUIDv7 (48-bit unix milliseconds, version 7, random rest), as lib/ids.ts makes them: webhook
-- message ids sort by time.
CREATE FUNCTION gen_uuid_v7() RETURNS uuid LANGUAGE sql VOLATILE AS $$
  SELECT encode(set_byte(overlay(uuid_send(gen_random_uuid()) PLACING
    substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6),
    6, (get_byte(uuid_send(gen_random_uuid()), 6) & 15) | 112), 'hex')::uuid
$$;

-- Webhook events, written in the transaction of the change they report (by the triggers below, or
-- by the code that makes the change), relayed to JetStream (stream WEBHOOKS, subject
-- wh.<tenant>) by processors/outbox/ with the id as Nats-Msg-Id, and fanned out to the
-- subscriptions by processors/webhooks/. The id is the message id (`webhook-id`).
CREATE TABLE webhook_outbox (
  id            uuid PRIMARY KEY DEFAULT gen_uuid_v7(),
  tenant_id     uuid NOT NULL,
  type          text NOT NULL,
  data          jsonb NOT NULL,
  occurred_at   timestamptz NOT NULL DEFAULT now(),
  published_at  timestamptz
);
CREATE INDEX webhook_outbox_unpublished ON webhook_outbox (occurred_at) WHERE published_at IS NULL;
CREATE INDEX webhook_outbox_published ON webhook_outbox (published_at) WHERE published_at IS NOT NULL;

-- One row per (subscription, message): the queue of the dispatcher. `body` is the exact JSON sent
-- (signed as is). A row is `pending` until it succeeded or ran out of attempts; next_attempt_at is
-- when it is due, and while an attempt is in flight it is pushed past the attempt's timeout, so a
-- dispatcher that dies mid-attempt leaves it due again (at least once, same webhook-id).
CREATE TABLE webhook_deliveries (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id        uuid NOT NULL,
  subscription_id  uuid NOT NULL REFERENCES webhook_subscriptions ON DELETE CASCADE,
  message_id       uuid NOT NULL,
  event_type       text NOT NULL,
  body             text NOT NULL,
  status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (subscription_id, message_id)
);
-- The dispatcher's queue per subscription: due rows of one subscription, oldest first.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (subscription_id, next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_done ON webhook_deliveries (updated_at) WHERE status <> 'pending';

-- Every attempt, as GET /v1/webhook-subscriptions/{id}/deliveries lists them.
CREATE TABLE webhook_attempts (
  id               uuid PRIMARY KEY DEFAULT gen_uuid_v7(),
  tenant_id        uuid NOT NULL,
  subscription_id  uuid NOT NULL REFERENCES webhook_subscriptions ON DELETE CASCADE,
  delivery_id      uuid NOT NULL,
  message_id       uuid NOT NULL,
  event_type       text NOT NULL,
  attempt          integer NOT NULL,
  status           text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
  response_status  integer,
  duration_ms      integer,
  error            text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  next_attempt_at  timestamptz
);
CREATE INDEX webhook_attempts_page ON webhook_attempts (subscription_id, created_at DESC, id DESC);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id) WHERE status = 'pending';

-- ---------------------------------------------------------------------------------------------
-- Webhook events written by triggers, so every write path (API, bulk import, restore, the
-- playbook runner, the job runner) reports its changes without having to remember it, in the
-- same transaction. Statement-level with transition tables: a bulk write is one INSERT … SELECT.
-- Nothing is written for a workspace without an enabled subscription (a subscription receives the
-- events that occur while it exists). The JSON is the resource as its GET shows it; test/webhooks
-- compares the two.

CREATE FUNCTION webhook_ts(t timestamptz) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

CREATE FUNCTION webhook_subscribed(t uuid) RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE tenant_id = t AND enabled)
$$;

-- core-api/customers/repo.ts toCustomer.
CREATE FUNCTION webhook_customer(c customers) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', c.id, 'tenant_id', c.tenant_id, 'name', c.name, 'email_domain', c.email_domain, 'arr', c.arr::float8,
    'owner_email', c.owner_email, 'status', c.status, 'renewal_date', c.renewal_date::text,
    'custom_fields', c.custom_fields, 'external_id', c.external_id, 'external_source', c.external_source,
    'health_status', (SELECT h.status FROM customer_health h WHERE h.customer_id = c.id),
    'created_at', webhook_ts(c.created_at), 'updated_at', webhook_ts(c.updated_at))
$$;

CREATE FUNCTION webhook_customers_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_outbox (tenant_id, type, data)
  SELECT n.tenant_id, 'customer.created', webhook_customer(n) FROM new_rows n
  WHERE n.deleted_at IS NULL AND webhook_subscribed(n.tenant_id);
  RETURN NULL;
END
$$;

-- A soft delete is customer.deleted; a restore and any change of what GET shows is customer.updated.
CREATE FUNCTION webhook_customers_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_outbox (tenant_id, type, data)
  SELECT n.tenant_id,
    CASE WHEN n.deleted_at IS NOT NULL THEN 'customer.deleted' ELSE 'customer.updated' END,
    webhook_customer(n) || CASE WHEN n.deleted_at IS NOT NULL
                                THEN jsonb_build_object('deleted_at', webhook_ts(n.deleted_at)) ELSE '{}' END
  FROM new_rows n JOIN old_rows o ON o.id = n.id
  -- CASE fixes the order: the JSON of both versions is built only for subscribed workspaces.
  WHERE CASE WHEN NOT webhook_subscribed(n.tenant_id) THEN false
             WHEN o.deleted_at IS NULL AND n.deleted_at IS NOT NULL THEN true
             WHEN n.deleted_at IS NOT NULL THEN false
             ELSE o.deleted_at IS NOT NULL
               OR webhook_customer(o) - 'updated_at' IS DISTINCT FROM webhook_customer(n) - 'updated_at' END;
  RETURN NULL;
END
$$;

-- A permanent delete of a customer that was not in the trash is a deletion too.
CREATE FUNCTION webhook_customers_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_outbox (tenant_id, type, data)
  SELECT o.tenant_id, 'customer.deleted', jsonb_build_object('id', o.id, 'tenant_id', o.tenant_id, 'name', o.name,
    'deleted_at', webhook_ts(now()), 'permanent', true)
  FROM old_rows o WHERE o.deleted_at IS NULL AND webhook_subscribed(o.tenant_id);
  RETURN NULL;
END
$$;

CREATE TRIGGER customers_webhook_inserted AFTER INSERT ON customers
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_customers_inserted();
CREATE TRIGGER customers_webhook_updated AFTER UPDATE ON customers
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_customers_updated();
CREATE TRIGGER customers_webhook_deleted AFTER DELETE ON customers
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_customers_deleted();

-- core-api/tasks/repo.ts toTask.
CREATE FUNCTION webhook_task(t tasks) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object(
    'id', t.id, 'customer_id', t.customer_id, 'playbook_id', t.playbook_id, 'run_id', t.run_id, 'title', t.title,
    'description', t.description, 'status', t.status, 'assignee_id', t.assignee_id, 'owner_id', t.owner_id,
    'due_date', t.due_date::text, 'outcome', t.outcome, 'notes', t.notes, 'created_at', webhook_ts(t.created_at),
    'updated_at', webhook_ts(t.updated_at), 'completed_at', webhook_ts(t.completed_at))
$$;

CREATE FUNCTION webhook_tasks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_outbox (tenant_id, type, data)
  SELECT n.tenant_id, 'task.created', webhook_task(n) FROM new_rows n WHERE webhook_subscribed(n.tenant_id);
  RETURN NULL;
END
$$;

CREATE FUNCTION webhook_tasks_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_outbox (tenant_id, type, data)
  SELECT n.tenant_id, 'task.completed', webhook_task(n)
  FROM new_rows n JOIN old_rows o ON o.id = n.id
  WHERE n.status = 'completed' AND o.status <> 'completed' AND webhook_subscribed(n.tenant_id);
  RETURN NULL;
END
$$;

CREATE TRIGGER tasks_webhook_inserted AFTER INSERT ON tasks
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_tasks_inserted();
CREATE TRIGGER tasks_webhook_updated AFTER UPDATE ON tasks
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_tasks_updated();

-- core-api/playbooks/routes.ts toRun; dry runs change nothing and are not reported.
CREATE FUNCTION webhook_runs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_outbox (tenant_id, type, data)
  SELECT n.tenant_id, 'playbook.run.completed', jsonb_build_object(
    'id', n.id, 'playbook_id', n.playbook_id, 'trigger_source', n.trigger_source, 'dry_run', n.dry_run,
    'started_at', webhook_ts(n.started_at), 'finished_at', webhook_ts(n.finished_at), 'evaluated', n.evaluated,
    'matched', to_jsonb(n.matched), 'matched_count', n.matched_count, 'actions', n.actions,
    'actions_count', n.actions_count)
  FROM new_rows n WHERE NOT n.dry_run AND webhook_subscribed(n.tenant_id);
  RETURN NULL;
END
$$;

CREATE TRIGGER playbook_runs_webhook_inserted AFTER INSERT ON playbook_runs
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_runs_inserted();

-- core-api/jobs/routes.ts GET /v1/jobs/{id}, when a job ends (succeeded or failed).
CREATE FUNCTION webhook_jobs_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_outbox (tenant_id, type, data)
  SELECT n.tenant_id, 'job.completed', jsonb_build_object(
    'id', n.id, 'type', n.type, 'status', n.status,
    'progress', jsonb_build_object('total', n.total, 'processed', n.processed,
      'percent', CASE WHEN n.total > 0 THEN (100 * n.processed) / n.total ELSE 100 END),
    'counts', CASE WHEN n.type = 'events.backfill'
                   THEN '{"accepted": 0, "rejected": 0, "duplicates": 0, "stored": 0}'::jsonb || n.counts
                   ELSE jsonb_build_object('created', coalesce(n.counts -> 'created', '0'),
                     'updated', coalesce(n.counts -> 'updated', '0'), 'skipped', coalesce(n.counts -> 'skipped', '0'),
                     'failed', coalesce(n.counts -> 'failed', '0')) END,
    'errors', n.errors, 'error', n.error, 'params', n.params, 'created_at', webhook_ts(n.created_at),
    'started_at', webhook_ts(n.started_at), 'finished_at', webhook_ts(n.finished_at))
  FROM new_rows n JOIN old_rows o ON o.id = n.id
  WHERE n.status IN ('succeeded', 'failed') AND o.status NOT IN ('succeeded', 'failed')
    AND webhook_subscribed(n.tenant_id);
  RETURN NULL;
END
$$;

CREATE TRIGGER jobs_webhook_updated AFTER UPDATE ON jobs
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_jobs_updated();

-- health.changed from the generated health_changed events (processors/health/store.ts writes them
-- in the statement that stores the new scores).
CREATE FUNCTION webhook_health_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_outbox (tenant_id, type, data, occurred_at)
  SELECT n.tenant_id, 'health.changed', jsonb_build_object('customer_id', n.customer_id,
    'from_status', n.properties -> 'from_status', 'to_status', n.properties -> 'to_status',
    'score', n.properties -> 'score', 'previous_score', n.properties -> 'previous_score'), n.occurred_at
  FROM new_rows n WHERE n.event_name = 'health_changed' AND webhook_subscribed(n.tenant_id);
  RETURN NULL;
END
$$;

CREATE TRIGGER event_outbox_webhook_inserted AFTER INSERT ON event_outbox
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_health_changed();
