import { ch } from '../helpers/stack.js';

/**
 * The daily rollups of a workspace next to the same figures aggregated straight from csp.events,
 * as sorted lines: equal arrays mean the views counted every stored row exactly once.
 */
export async function rollupsAndDirect(tenant: string): Promise<{ rollup: string[]; direct: string[] }> {
  const lines = (rows: Array<Record<string, unknown>>) => rows.map((r) => Object.values(r).join(' '));
  const [dailyR, dailyD, namesR, namesD] = await Promise.all([
    ch(`SELECT toString(customer_id) AS c, toString(day) AS d, countMerge(events) AS n, uniqMerge(names) AS k,
          uniqMerge(users) AS u
        FROM usage_daily WHERE tenant_id = '${tenant}' GROUP BY c, d ORDER BY c, d`),
    ch(`SELECT toString(customer_id) AS c, toString(toDate(ts)) AS d, count() AS n, uniq(event_name) AS k,
          uniqIf(user_id, user_id != '') AS u
        FROM events WHERE tenant_id = '${tenant}' AND surface != 'system' GROUP BY c, d ORDER BY c, d`),
    ch(`SELECT toString(customer_id) AS c, toString(day) AS d, event_name AS e, sum(events) AS n
        FROM usage_daily_names WHERE tenant_id = '${tenant}' GROUP BY c, d, e ORDER BY c, d, e`),
    ch(`SELECT toString(customer_id) AS c, toString(toDate(ts)) AS d, event_name AS e, count() AS n
        FROM events WHERE tenant_id = '${tenant}' AND surface != 'system' GROUP BY c, d, e ORDER BY c, d, e`),
  ]);
  return {
    rollup: [...lines(dailyR), ...lines(namesR).map((l) => `name ${l}`)],
    direct: [...lines(dailyD), ...lines(namesD).map((l) => `name ${l}`)],
  };
}
