import { isUuid } from '../../lib/ids.js';
import { type ConditionEnv, compileCondition, conditionRefs } from '../../lib/playbooks/condition-sql.js';
import { ExpressionError, namesIn, parseExpression } from '../../lib/playbooks/expression.js';
import type { Sql } from '../../lib/pg.js';
import { ApiError, invalid } from '../../lib/problem.js';
import { SqlParams } from '../../lib/sql-params.js';
import type { Action, Trigger } from '../../schemas/core/playbooks.js';
import { knownUsers, liveMetrics, type Refs, segmentsByName } from './repo.js';

/**
 * The rules of a playbook beyond its schema, checked when it is saved so that the runner only
 * meets playbooks it can evaluate: the condition parses and compiles against the workspace's
 * segments and metrics (400 invalid_expression / unknown_variable), a metric_threshold names a
 * live metric (422 unknown_metric), each create_task assignee is `owner` or a user of the
 * workspace (400). Run inside the saving transaction: the segments and metrics referred to are
 * share-locked until it commits, so none is deleted between this check and the save.
 */
export async function resolveTrigger(sql: Sql, tenantId: string, trigger: Trigger): Promise<Refs> {
  switch (trigger.type) {
    case 'condition':
      return conditionRefsOf(sql, tenantId, trigger.expression);
    case 'metric_threshold': {
      const [m] = await liveMetrics(sql, tenantId, { ids: [trigger.metric_id] });
      if (!m)
        throw new ApiError('unknown_metric', 'The metric is not in this workspace or is deleted.', [
          {
            field: 'trigger.metric_id',
            code: 'unknown_metric',
            message: 'trigger.metric_id must be a live metric of the workspace (GET /v1/metrics)',
          },
        ]);
      return { segment_ids: [], metric_ids: [m.id] };
    }
    case 'event':
      return { segment_ids: [], metric_ids: [] };
  }
}

async function conditionRefsOf(sql: Sql, tenantId: string, expression: string): Promise<Refs> {
  try {
    const expr = parseExpression(expression);
    const names = namesIn(expr);
    const [segments, metrics] = await Promise.all([
      segmentsByName(sql, tenantId, [...names.segments.keys()]),
      names.metrics.size ? liveMetrics(sql, tenantId, { slugs: [...names.metrics.keys()] }) : [],
    ]);
    const env: ConditionEnv = {
      segments: new Map(segments.map((s) => [s.lname, { id: s.id, rules: s.rules, match: s.match }])),
      metrics: new Map(metrics.map((m) => [m.slug, m.id])),
    };
    // Compiled once here so that whatever the runner will compile is known to compile.
    compileCondition(expr, env, new SqlParams());
    return conditionRefs(expr, env);
  } catch (err) {
    if (err instanceof ExpressionError)
      throw new ApiError(
        err.code,
        err.message,
        [{ field: 'trigger.expression', code: err.code, message: err.message }],
        [],
        { position: err.position },
      );
    throw err;
  }
}

/** Every create_task assignee that is neither `owner` nor a user of the workspace → 400, all at once. */
export async function checkAssignees(sql: Sql, tenantId: string, actions: Action[]): Promise<void> {
  const named = actions.flatMap((a, i) =>
    a.type === 'create_task' && a.assignee !== 'owner' ? [{ i, key: a.assignee.toLowerCase() }] : [],
  );
  if (!named.length) return;
  const ids = named.filter((n) => isUuid(n.key)).map((n) => n.key);
  const emails = named.filter((n) => !isUuid(n.key)).map((n) => n.key);
  const users = await knownUsers(sql, tenantId, ids, emails);
  const known = new Set(users.flatMap((u) => [u.id, u.email]));
  const errors = named
    .filter((n) => !known.has(n.key))
    .map((n) => ({
      field: `actions[${n.i}].assignee`,
      code: 'unknown_user',
      message: `actions[${n.i}].assignee must be "owner", or the id or e-mail of a user of the workspace`,
    }));
  if (errors.length) throw invalid(errors, 'An assignee is not a user of this workspace; see errors.');
}
