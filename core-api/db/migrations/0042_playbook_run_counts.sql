-- A run record keeps the first 1000 matched customer ids and action entries (what the API shows)
-- and the totals as counts: a first evaluation that fires a third of a large workspace must not
-- build and store megabytes of JSON per run.
ALTER TABLE playbook_runs ADD COLUMN actions_count integer;
UPDATE playbook_runs SET actions_count = jsonb_array_length(actions),
  matched = matched[1:1000],
  actions = CASE WHEN jsonb_array_length(actions) <= 1000 THEN actions
                 ELSE (SELECT jsonb_agg(e ORDER BY i) FROM jsonb_array_elements(actions) WITH ORDINALITY AS x (e, i)
                       WHERE i <= 1000) END;
ALTER TABLE playbook_runs ALTER COLUMN actions_count SET NOT NULL, ALTER COLUMN actions_count SET DEFAULT 0;
