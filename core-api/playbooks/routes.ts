import { decodeCursor, page } from '../../lib/cursor.js';
import type { Sql } from '../../lib/pg.js';
import { notFound } from '../../lib/problem.js';
import { IdParams, Page, PageQuery } from '../../schemas/core/common.js';
import {
  Playbook,
  PlaybookCreate,
  PlaybookPatch,
  PlaybookRun,
  RunBody,
  RunListQuery,
} from '../../schemas/core/playbooks.js';
import type { Deps } from '../deps.js';
import { type Ctx, json, noContent, type Reply } from '../http/context.js';
import type { Route } from '../http/router.js';
import {
  deletePlaybook,
  getPlaybook,
  getRun,
  insertPlaybook,
  listPlaybooks,
  listRuns,
  type PlaybookRow,
  type RunRow,
  updatePlaybook,
} from './repo.js';
import { disabled, type PlaybookRunClient } from './run-client.js';
import { checkAssignees, resolveTrigger } from './validate.js';

export interface PlaybookDeps extends Deps {
  playbookRunClient: PlaybookRunClient;
}

const toPlaybook = (r: PlaybookRow) => ({
  id: r.id,
  name: r.name,
  trigger: r.trigger,
  actions: r.actions,
  enabled: r.enabled,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

const toRun = (r: RunRow) => ({
  id: r.id,
  playbook_id: r.playbook_id,
  trigger_source: r.trigger_source,
  dry_run: r.dry_run,
  started_at: r.started_at.toISOString(),
  finished_at: r.finished_at ? r.finished_at.toISOString() : null,
  evaluated: r.evaluated,
  matched: r.matched,
  matched_count: r.matched_count,
  actions: r.actions,
  actions_count: r.actions_count,
});

export function playbookRoutes(d: PlaybookDeps): Route[] {
  const sql: Sql = d.sql;

  async function create(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const b = c.body as PlaybookCreate;
    const row = await sql.begin(async (tx) => {
      const t = tx as unknown as Sql;
      const refs = await resolveTrigger(t, tenantId, b.trigger);
      await checkAssignees(t, tenantId, b.actions);
      return insertPlaybook(t, tenantId, {
        name: b.name.trim(),
        trigger: b.trigger,
        actions: b.actions,
        enabled: b.enabled ?? true,
        ...refs,
      });
    });
    return json(201, toPlaybook(row), [['Location', `${d.baseUrl}/v1/playbooks/${row.id}`]]);
  }

  async function list(c: Ctx): Promise<Reply> {
    const limit = c.query.limit ?? 50;
    const rows = await listPlaybooks(sql, c.principal.tenantId, { after: decodeCursor(c.query.cursor), limit });
    return json(200, page(rows, limit, toPlaybook));
  }

  async function get(c: Ctx): Promise<Reply> {
    const row = await getPlaybook(sql, c.principal.tenantId, c.params.id);
    if (!row) throw notFound('Playbook');
    return json(200, toPlaybook(row));
  }

  /**
   * The trigger's references are resolved again when the trigger changes or the playbook is
   * enabled (a metric deleted while it was disabled must not come back into use); a rename of a
   * disabled playbook keeps what it had.
   */
  async function patch(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const b = c.body as PlaybookPatch;
    const row = await sql.begin(async (tx) => {
      const t = tx as unknown as Sql;
      const cur = await getPlaybook(t, tenantId, c.params.id, true);
      if (!cur) throw notFound('Playbook');
      const next = {
        name: b.name?.trim() ?? cur.name,
        trigger: b.trigger ?? cur.trigger,
        actions: b.actions ?? cur.actions,
        enabled: b.enabled ?? cur.enabled,
      };
      const recheck = b.trigger !== undefined || (next.enabled && !cur.enabled);
      const refs = recheck
        ? await resolveTrigger(t, tenantId, next.trigger)
        : { segment_ids: cur.segment_ids, metric_ids: cur.metric_ids };
      if (b.actions) await checkAssignees(t, tenantId, b.actions);
      return updatePlaybook(t, tenantId, c.params.id, { ...next, ...refs });
    });
    if (!row) throw notFound('Playbook');
    return json(200, toPlaybook(row));
  }

  async function remove(c: Ctx): Promise<Reply> {
    if (!(await deletePlaybook(sql, c.principal.tenantId, c.params.id))) throw notFound('Playbook');
    return noContent();
  }

  async function runs(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const limit = c.query.limit ?? 20;
    const after = decodeCursor(c.query.cursor);
    if (!(await getPlaybook(sql, tenantId, c.params.id))) throw notFound('Playbook');
    const rows = await listRuns(sql, tenantId, c.params.id, { after, limit });
    return json(200, page(rows, limit, toRun));
  }

  async function run(c: Ctx): Promise<Reply> {
    const tenantId = c.principal.tenantId;
    const dryRun = (c.body as { dry_run?: boolean } | undefined)?.dry_run === true;
    const pb = await getPlaybook(sql, tenantId, c.params.id);
    if (!pb) throw notFound('Playbook');
    if (!pb.enabled && !dryRun) throw disabled();
    const runId = await d.playbookRunClient.run({ tenant_id: tenantId, playbook_id: pb.id, dry_run: dryRun });
    const row = await getRun(sql, tenantId, runId);
    // Deleted (with its runs) between the run and this read.
    if (!row) throw notFound('Playbook');
    return json(200, toRun(row));
  }

  const common = { tag: 'Playbooks', auth: 'bearer' as const };
  const read = { ...common, scope: 'playbooks:read' as const };
  const write = { ...common, scope: 'playbooks:write' as const };
  const example = {
    name: 'At-risk enterprise accounts',
    trigger: { type: 'condition', expression: 'health_score < 40 and segment == "Enterprise"' },
    actions: [
      { type: 'create_task', title: 'Call the account', assignee: 'owner', due_in_days: 3 },
      { type: 'notify', channel: 'slack', target: '#cs-alerts', message: 'An enterprise account is at risk' },
    ],
  };
  const rules = [
    'Rules, each a problem+json naming the field: schema errors (an unknown trigger or action type, a missing',
    'field, no action) → 400 `validation_failed`; a condition that does not parse or compares a variable with',
    'a value of the wrong kind → 400 `invalid_expression` with the 1-based `position`; an unknown variable,',
    'segment or metric (`metric.<slug>`) → 400 `unknown_variable`; a create_task assignee that is neither',
    '`owner` nor the id or e-mail of a user of the workspace → 400 (`unknown_user`); a metric_threshold on a',
    'metric that is unknown or deleted → 422 `unknown_metric`. The condition language: docs/playbooks.md.',
  ].join(' ');
  return [
    {
      ...read,
      method: 'GET',
      path: '/v1/playbooks',
      summary: 'List playbooks',
      description: 'Oldest first, cursor-paginated.',
      query: PageQuery,
      handler: list,
      responses: { 200: { description: 'A page of playbooks.', schema: Page(Playbook) } },
    },
    {
      ...write,
      method: 'POST',
      path: '/v1/playbooks',
      summary: 'Create a playbook',
      description: `${rules} \`enabled\` defaults to true.`,
      body: PlaybookCreate,
      bodyExample: example,
      handler: create,
      errors: [413, 415, 422],
      responses: { 201: { description: 'The playbook (Location: its URL).', schema: Playbook } },
    },
    {
      ...read,
      method: 'GET',
      path: '/v1/playbooks/{id}',
      summary: 'A playbook',
      params: IdParams,
      handler: get,
      errors: [404],
      responses: { 200: { description: 'The playbook.', schema: Playbook } },
    },
    {
      ...write,
      method: 'PATCH',
      path: '/v1/playbooks/{id}',
      summary: 'Change a playbook',
      description:
        'Any of `name`, `trigger` (replaced whole), `actions` (replaced whole), `enabled`. A customer already ' +
        `fired stays fired under a changed trigger until it stops matching. ${rules}`,
      params: IdParams,
      body: PlaybookPatch,
      bodyExample: { enabled: false },
      handler: patch,
      errors: [404, 413, 415, 422],
      responses: { 200: { description: 'The playbook.', schema: Playbook } },
    },
    {
      ...write,
      method: 'DELETE',
      path: '/v1/playbooks/{id}',
      summary: 'Delete a playbook',
      description: 'Deletes the playbook with its runs and firing state; its tasks stay (their playbook_id too).',
      params: IdParams,
      handler: remove,
      errors: [404],
      responses: { 204: { description: 'Deleted.' } },
    },
    {
      ...read,
      method: 'GET',
      path: '/v1/playbooks/{id}/runs',
      summary: 'Run history of a playbook',
      description:
        'Newest first, cursor-paginated (default 20, at most 100 a page). `matched` and `actions` carry the first ' +
        '1000 entries; `matched_count` and `actions_count` are the totals.',
      params: IdParams,
      query: RunListQuery,
      handler: runs,
      errors: [404],
      responses: { 200: { description: 'A page of run records.', schema: Page(PlaybookRun) } },
    },
    {
      ...write,
      method: 'POST',
      path: '/v1/playbooks/{id}/run',
      summary: 'Evaluate a playbook now',
      description:
        'Evaluates the trigger now for every live customer (trigger_source `manual`) and answers the run record ' +
        'once it is stored: customers that start matching fire, with their actions. `{"dry_run": true}` lists ' +
        'the matches and fires nothing; a disabled playbook runs only dry (otherwise 409 `playbook_disabled`). ' +
        'No playbook runner answering in time (30 s by default) → 503 `runner_unavailable` with Retry-After.',
      params: IdParams,
      body: RunBody,
      bodyOptional: true,
      bodyExample: { dry_run: true },
      handler: run,
      errors: [404, 409, 413, 415, 503],
      responses: { 200: { description: 'The run record.', schema: PlaybookRun } },
    },
  ] satisfies Route[];
}
