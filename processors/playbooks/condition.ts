import type { TransactionSql } from 'postgres';
import type { SqlParams } from '../../lib/sql-params.js';
import type { ClickHouse } from '../clickhouse.js';
import type { ConditionTrigger, Playbook } from './definition.js';

/**
 * A condition trigger as a predicate over c / h: the expression parsed and compiled to SQL by
 * lib/playbooks/, its `metric.<slug>` values (pb.metric_ids) read from ClickHouse in one query
 * (reads.ts latestValues) into a `metric_latest (metric_id, customer_id, value)` relation of the
 * transaction. Not evaluated yet: such a playbook's evaluation fails and is logged.
 */
export async function conditionPredicate(
  _tx: TransactionSql,
  _ch: ClickHouse,
  _pb: Playbook,
  _t: ConditionTrigger,
  _p: SqlParams,
): Promise<string> {
  throw new Error('condition triggers are not evaluated yet');
}
