import { randomUUID } from 'node:crypto';
import t from '#tap';
import { createLogger } from '../../lib/logger.js';
import { ClickHouse } from '../../processors/clickhouse.js';
import { HistoryRetention } from '../../processors/health/retention.js';
import { ch, urls } from '../helpers/stack.js';

// History retention against the test ClickHouse: months older than 25 are dropped whole, the last
// two years stay.
t.test('history partitions older than 25 months are dropped, two years are kept', async (t) => {
  const tenant = randomUUID();
  const monthsAgo = (m: number) => {
    const d = new Date();
    d.setUTCDate(15);
    d.setUTCMonth(d.getUTCMonth() - m);
    return d.toISOString().slice(0, 10);
  };
  const days = [monthsAgo(26), monthsAgo(24), monthsAgo(0)];
  const body = days
    .map((day) =>
      JSON.stringify({
        tenant_id: tenant,
        customer_id: randomUUID(),
        day,
        score: 50,
        status: 'neutral',
        calculated_at: `${day} 12:00:00`,
      }),
    )
    .join('\n');
  const q = encodeURIComponent('INSERT INTO csp.health_history FORMAT JSONEachRow');
  const res = await fetch(`${urls.CLICKHOUSE_URL}/?query=${q}`, { method: 'POST', body });
  t.ok(res.ok, await res.text());

  const client = new ClickHouse(urls.CLICKHOUSE_URL, 'csp', 30_000);
  t.teardown(() => client.close());
  const dropped = await new HistoryRetention(client, createLogger('test', 'silent')).run();
  t.ok(dropped.includes(days[0].slice(0, 7).replace('-', '')), `the month 26 months ago is dropped (${dropped})`);
  const left = await ch<{ day: string }>(
    `SELECT toString(day) AS day FROM health_history WHERE tenant_id = '${tenant}' ORDER BY day`,
  );
  t.same(
    left.map((r) => r.day),
    days.slice(1),
    '24 months ago and this month remain',
  );
});
