-- Segments, playbooks and tasks (core-api/segments/, core-api/playbooks/, core-api/tasks/ serve them;
-- processors/playbooks/ evaluates playbooks and creates tasks). docs/playbooks.md tells the rules.

-- A named set of customers defined by rules over customer fields; membership is evaluated in SQL
-- (lib/segments/) whenever it is needed, never stored per customer.
CREATE TABLE segments (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id    uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  name         text NOT NULL,
  description  text,
  rules        jsonb NOT NULL,
  match        text NOT NULL CHECK (match IN ('all', 'any')),
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now()
);
-- Conditions name segments (`segment == "Enterprise"`), so a name is unique in its workspace.
CREATE UNIQUE INDEX segments_tenant_name ON segments (tenant_id, lower(name));
CREATE INDEX segments_page ON segments (tenant_id, created_at, id);

CREATE TABLE playbooks (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id    uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  name         text NOT NULL,
  trigger      jsonb NOT NULL,
  actions      jsonb NOT NULL,
  enabled      boolean NOT NULL DEFAULT true,
  -- What the trigger refers to, resolved when it is saved: a segment or metric in use cannot be
  -- deleted from under an enabled playbook, and the runner knows what to read without parsing.
  segment_ids  uuid[] NOT NULL DEFAULT '{}',
  metric_ids   uuid[] NOT NULL DEFAULT '{}',
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX playbooks_page ON playbooks (tenant_id, created_at, id);
CREATE INDEX playbooks_enabled ON playbooks (tenant_id) WHERE enabled;

-- One row per evaluation (scheduled, after health or metrics, on events, manual, dry run).
CREATE TABLE playbook_runs (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id       uuid NOT NULL,
  playbook_id     uuid NOT NULL REFERENCES playbooks ON DELETE CASCADE,
  trigger_source  text NOT NULL CHECK (trigger_source IN ('schedule', 'health', 'metrics', 'event', 'manual')),
  dry_run         boolean NOT NULL DEFAULT false,
  started_at      timestamptz NOT NULL,
  finished_at     timestamptz,
  evaluated       integer NOT NULL DEFAULT 0,
  matched_count   integer NOT NULL DEFAULT 0,
  matched         uuid[] NOT NULL DEFAULT '{}',
  actions         jsonb NOT NULL DEFAULT '[]'
);
CREATE INDEX playbook_runs_page ON playbook_runs (playbook_id, started_at DESC, id DESC);

-- Edge triggering: a row while the customer matches the playbook's trigger. A customer fires
-- when its row is inserted (in the transaction that creates the actions' tasks and the run) and
-- re-arms when the row is deleted because it stopped matching.
CREATE TABLE playbook_firing (
  playbook_id  uuid NOT NULL REFERENCES playbooks ON DELETE CASCADE,
  customer_id  uuid NOT NULL REFERENCES customers ON DELETE CASCADE,
  tenant_id    uuid NOT NULL,
  run_id       uuid NOT NULL,
  fired_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (playbook_id, customer_id)
);

CREATE TABLE tasks (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id     uuid NOT NULL REFERENCES tenants ON DELETE CASCADE,
  customer_id   uuid NOT NULL REFERENCES customers ON DELETE CASCADE,
  -- Kept after the playbook or its run is deleted: a task's origin is history.
  playbook_id   uuid,
  run_id        uuid,
  title         text NOT NULL,
  description   text,
  status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'in_progress', 'completed', 'skipped')),
  assignee_id   uuid REFERENCES users ON DELETE SET NULL,
  owner_id      uuid REFERENCES users ON DELETE SET NULL,
  due_date      date,
  outcome       text CHECK (outcome IN ('successful', 'unsuccessful', 'no_response', 'not_needed')),
  notes         text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  completed_at  timestamptz
);
CREATE INDEX tasks_page ON tasks (tenant_id, created_at, id);
CREATE INDEX tasks_customer_open ON tasks (customer_id, due_date) WHERE status IN ('pending', 'in_progress');
CREATE INDEX tasks_playbook ON tasks (playbook_id) WHERE playbook_id IS NOT NULL;
