-- Workspaces that just received events named by an enabled `event` playbook trigger
-- (processors/playbooks/event-marks.ts writes them from the event stream). Their event playbooks
-- are evaluated every few seconds while the mark is recent: the events may reach ClickHouse a
-- little after the mark, so one evaluation right away would not be enough.
CREATE TABLE playbook_event_marks (
  tenant_id     uuid PRIMARY KEY REFERENCES tenants ON DELETE CASCADE,
  marked_at     timestamptz NOT NULL,
  evaluated_at  timestamptz
);
