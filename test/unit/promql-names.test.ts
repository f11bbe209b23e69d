import t from '#tap';
import { metricNames } from '../helpers/promql.js';

t.test('the metric names of the expressions the rules and the dashboard use', async (t) => {
  t.same(
    metricNames(
      'sum by (endpoint) (rate(ingest_request_duration_seconds_count{status=~"5.."}[5m]))\n' +
        '/ sum by (endpoint) (rate(ingest_request_duration_seconds_count[5m]))',
    ),
    ['ingest_request_duration_seconds_count'],
  );
  t.same(
    metricNames(
      'max by (connector) (integration_sync_oldest_success_age_seconds)\n' +
        '  > on () group_left () (3 * max(schedule_interval_seconds{schedule="integration_sync"}))',
    ),
    ['integration_sync_oldest_success_age_seconds', 'schedule_interval_seconds'],
  );
  t.same(
    metricNames('histogram_quantile(0.99, sum by (job, pool, le) (rate(pg_pool_wait_seconds_bucket[10m]))) > 0.25'),
    ['pg_pool_wait_seconds_bucket'],
  );
  t.same(metricNames('endpoint:ingest_request_errors:ratio_rate1h > (14.4 * 0.001) and up{job=~"a|b"} == 0'), [
    'endpoint:ingest_request_errors:ratio_rate1h',
    'up',
  ]);
  t.same(metricNames('sum(rate(x_total[$__rate_interval])) offset 5m / 1e3 + y unless z'), ['x_total', 'y', 'z']);
  t.same(metricNames('label_replace(a, "dst", "$1", "src", "(.*)") or group_left b'), ['a', 'b']);
});
