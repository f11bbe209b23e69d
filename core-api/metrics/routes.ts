import type { Deps } from '../deps.js';
import type { ClickHouseReader } from '../clickhouse.js';
import type { Route } from '../http/router.js';
import { catalogRoutes } from './catalog.js';
import { definitionRoutes } from './definitions.js';
import { proposalRoutes } from './proposals.js';
import { testQueryRoutes } from './test-query.js';
import { widgetRoutes } from './widgets.js';
import type { MaterializeClient } from './materialize.js';
import { objectiveRoutes } from './objectives.js';
import { valueRoutes } from './values.js';

export interface MetricsDeps extends Deps {
  clickhouse: ClickHouseReader;
  metricsQueryTimeoutMs: number;
  materializeClient: MaterializeClient;
}

/**
 * The metrics library: event catalog, definitions, test query, proposals, usage widgets, stored
 * values and materialize-now, objectives.
 */
export function metricsRoutes(d: MetricsDeps): Route[] {
  return [
    ...catalogRoutes(d.sql, d.clickhouse),
    ...definitionRoutes(d.sql),
    ...testQueryRoutes(d.sql, d.clickhouse, d.metricsQueryTimeoutMs),
    ...proposalRoutes(d.sql, d.clickhouse),
    ...widgetRoutes(d.sql, d.clickhouse),
    ...valueRoutes(d.sql, d.clickhouse, d.materializeClient),
    ...objectiveRoutes(d.sql, d.clickhouse),
  ];
}
