import type { TransactionSql } from 'postgres';
import { inTenant } from '../../lib/pg.js';
import { compileCondition, type ConditionEnv, type SegmentDef } from '../../lib/playbooks/condition-sql.js';
import type { SqlParams } from '../../lib/sql-params.js';
import type { ClickHouse } from '../clickhouse.js';
import type { ConditionTrigger, Playbook } from './definition.js';
import { latestValues } from './reads.js';

/**
 * A condition trigger as a predicate over c / h: the expression parsed and compiled to SQL by
 * lib/playbooks/ against the workspace's segments and live metrics as they are now, and the
 * latest materialized values of the metrics it names (pb.metric_ids, resolved when it was saved)
 * read from ClickHouse in one query into `metric_latest (metric_id, customer_id, value)`, a
 * temporary table of the transaction with a primary key: the compiled condition looks values up
 * by (metric, customer), and an unindexed relation would make that quadratic.
 */
export async function conditionPredicate(
  tx: TransactionSql,
  ch: ClickHouse,
  pb: Playbook,
  t: ConditionTrigger,
  p: SqlParams,
): Promise<string> {
  const [segments, metrics] = await Promise.all([
    tx<Array<SegmentDef & { name: string }>>`
      SELECT id::text, name, rules, match FROM segments WHERE ${inTenant(pb.tenant_id)}`,
    tx<Array<{ id: string; slug: string }>>`
      SELECT id::text, slug FROM metrics WHERE ${inTenant(pb.tenant_id)} AND status = 'active'`,
  ]);
  const env: ConditionEnv = {
    segments: new Map(segments.map((s) => [s.name.toLowerCase(), { id: s.id, rules: s.rules, match: s.match }])),
    metrics: new Map(metrics.map((m) => [m.slug, m.id])),
  };
  const values = await latestValues(ch, pb.tenant_id, pb.metric_ids);
  await tx`
    CREATE TEMPORARY TABLE metric_latest (
      metric_id uuid, customer_id uuid, value float8, PRIMARY KEY (metric_id, customer_id)
    ) ON COMMIT DROP`;
  if (values.metricIds.length)
    await tx`
      INSERT INTO metric_latest
      SELECT * FROM unnest(${values.metricIds}::uuid[], ${values.customerIds}::uuid[], ${values.values}::float8[])`;
  await tx`ANALYZE metric_latest`;
  return compileCondition(t.expression, env, p);
}
