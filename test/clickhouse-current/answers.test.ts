import t, { type Test } from '#tap';
import { ClickHouseReader } from '../../core-api/clickhouse.js';
import { HealthHistory } from '../../core-api/health/history.js';
import { seenInClickHouse } from '../../core-api/metrics/catalog.js';
import { storedValues } from '../../core-api/metrics/values.js';
import { widgetValue } from '../../core-api/metrics/widgets.js';
import { stackProfile, stackUrls } from '../../infra/stack.js';
import { EventQuery } from '../../ingest/surface-b/query.js';
import { compileMetric } from '../../lib/metrics/compile.js';
import { compileMetricGroup, groupable } from '../../lib/metrics/group.js';
import { createLogger } from '../../lib/logger.js';
import { connectPg } from '../../lib/pg.js';
import { evaluateUsageDrops } from '../../processors/alerts/alerts.js';
import { ClickHouse, chErrorCode } from '../../processors/clickhouse.js';
import { KeysStore } from '../../processors/dedup/keys-store.js';
import { ClickHouseErasure } from '../../processors/erasure/clickhouse.js';
import { aggregate } from '../../processors/health/queries.js';
import { eventMatches, latestValues, thresholdMatches } from '../../processors/playbooks/reads.js';
import type { MetricDefinition, MetricFilter } from '../../schemas/core/metrics.js';
import { CALCULATIONS } from '../../schemas/core/metrics.js';
import { DEFAULT_HEALTH_MODEL, type HealthModel } from '../../schemas/health.js';
import { Chdb, errorCode } from '../helpers/chdb.js';
import { withSettings } from './check.js';
import { GENERATED, loadFixture, NAMES } from './fixture.js';
import { SEMANTIC_CASES } from './semantics.js';
import { sameValue, Twin } from './twin.js';

// The same answers on ClickHouse 18.16 and 26: one workspace stored on both through the product's
// write paths, then every read the product makes, through the product's own code and clients,
// compared row by row (twin.ts). Then the known semantic differences between the two, one case
// each (semantics.ts). docs/clickhouse.md.

const profile = stackProfile(process.env.TEST_STACK_PROFILE ?? 'test');
const upstream = stackUrls(profile).CLICKHOUSE_URL.split(',')[0];
const log = createLogger('clickhouse-current', 'silent');
const chdb = new Chdb();
t.teardown(() => chdb.close());
await chdb.applySchema();
const twin = new Twin(chdb, upstream);
const url = await twin.start();
t.teardown(() => twin.close());
const ch = new ClickHouse(url, 'csp', 30_000);
t.teardown(() => ch.close());
const reader = new ClickHouseReader(url, 'csp', 10_000, log);
const pg = connectPg(stackUrls(profile).DATABASE_URL, 2);
t.teardown(() => pg.end());

twin.label = 'fixture';
const f = await loadFixture(ch, log);
const today = f.now.toISOString().slice(0, 10);
const step = async <T>(label: string, fn: () => Promise<T>): Promise<T> => {
  twin.label = label;
  return fn();
};

/** Every read a label made: the twin compared each; a test fails on the first difference it lists. */
function verdict(t: Test, prefix: string, atLeast = 1): void {
  const mine = twin.exchanges.filter((e) => e.label.startsWith(prefix));
  const compared = mine.filter((e) => e.kind === 'read' && e.result !== 'not compared');
  for (const d of mine.filter((e) => e.result === 'different'))
    t.fail(`${d.label}: 18.16 and 26 differ`, {
      statement: d.sql.slice(0, 1200),
      settings: d.settings,
      detail: d.detail,
    });
  t.ok(compared.length >= atLeast, `${compared.length} reads compared (${mine.length} statements)`);
  t.equal(
    mine.filter((e) => e.result === 'different').length,
    0,
    `${compared.reduce((n, e) => n + (e.rows ?? 0), 0)} rows the same on both`,
  );
}

/** What the fixture left in each table, read so that merges (which run whenever each engine likes) change nothing. */
const STORED = (tenant: string) => [
  `SELECT toString(event_id) AS e, event_name, ts, ts_ms, prop_keys, prop_values, prop_kinds, properties, surface,
     user_id, external_id, user_email FROM csp.events WHERE tenant_id = '${tenant}' ORDER BY e`,
  `SELECT toString(event_id) AS e, event_type, amount, currency, status, ts FROM csp.billing_events
     WHERE tenant_id = '${tenant}' ORDER BY e`,
  `SELECT toString(customer_id) AS c, day, countMerge(events) AS n, uniqMerge(names) AS u, uniqMerge(users) AS us
     FROM csp.usage_daily WHERE tenant_id = '${tenant}' GROUP BY c, day ORDER BY c, day`,
  `SELECT toString(customer_id) AS c, day, event_name, sum(events) AS n FROM csp.usage_daily_names
     WHERE tenant_id = '${tenant}' GROUP BY c, day, event_name ORDER BY c, day, event_name`,
  `SELECT toString(customer_id) AS c, day, event_type, status, countMerge(events) AS n,
     toUInt32(minMerge(first_ts)) AS f,
     toUInt32(maxMerge(last_ts)) AS l FROM csp.billing_daily WHERE tenant_id = '${tenant}'
     GROUP BY c, day, event_type, status ORDER BY c, day, event_type, status`,
  `SELECT event_name, toUInt32(minMerge(first_ts)) AS f, toUInt32(maxMerge(last_ts)) AS l FROM csp.event_names
     WHERE tenant_id = '${tenant}' GROUP BY event_name ORDER BY event_name`,
  `SELECT event_name, keys_hash, any(keys) AS k, sum(events) AS n FROM csp.event_property_keysets
     WHERE tenant_id = '${tenant}' GROUP BY event_name, keys_hash ORDER BY event_name, keys_hash`,
  `SELECT DISTINCT toString(customer_id) AS c, external_id FROM csp.event_keys WHERE tenant_id = '${tenant}'
     ORDER BY c, external_id`,
  `SELECT toString(customer_id) AS c, day, argMax(score, calculated_at) AS s, argMax(status, calculated_at) AS st
     FROM csp.health_history WHERE tenant_id = '${tenant}' GROUP BY c, day ORDER BY c, day`,
  `SELECT toString(metric_id) AS m, toString(customer_id) AS c, period_start,
     argMax(ifNull(value, nan), computed_at) AS v
     FROM csp.metric_values WHERE tenant_id = '${tenant}' GROUP BY m, c, period_start ORDER BY m, c, period_start`,
  `SELECT toString(batch_id) AS b, tbl, sum(rows) AS n FROM csp.batch_ledger WHERE batch_id IN
     (SELECT batch_id FROM csp.events WHERE tenant_id = '${tenant}') GROUP BY b, tbl ORDER BY b, tbl`,
];

t.test('the fixture is stored alike on both engines', async (t) => {
  await step('stored', async () => {
    for (const sql of STORED(f.tenantId)) await ch.rows(sql);
  });
  verdict(t, 'stored', STORED('').length);
});

const model: HealthModel = {
  ...DEFAULT_HEALTH_MODEL,
  key_events: { positive: ['report_exported', 'seat_added'], negative: ['search', 'unknown_name'] },
  drivers: f.metricIds.map((id, i) => ({
    metric_id: id,
    slug: `m${i}`,
    unit: null,
    weight: 0.1,
    target: 10,
    direction: 'higher_is_better' as const,
  })),
};

t.test('health: every dimension and driver, for the workspace and for some customers', async (t) => {
  await step('health', async () => {
    await aggregate(ch, { tenantId: f.tenantId, today }, model, f.customers);
    await aggregate(ch, { tenantId: f.tenantId, today, customerIds: f.customers.slice(0, 4) }, model, f.customers);
  });
  verdict(t, 'health', 8);
});

const FILTERS: Array<MetricFilter[]> = [
  [],
  [{ field: 'properties.plan', op: 'eq', value: 'pro' }],
  [{ field: 'properties.seats', op: 'eq', value: 7 }],
  [{ field: 'properties.seats', op: 'neq', value: 7 }],
  [{ field: 'properties.amount', op: 'gt', value: 0 }],
  [{ field: 'properties.amount', op: 'gte', value: 12.5 }],
  [{ field: 'properties.ratio', op: 'lt', value: 0.5 }],
  [{ field: 'properties.ratio', op: 'lte', value: 0.25 }],
  [{ field: 'properties.quote', op: 'contains', value: "it's" }],
  [{ field: 'properties.format', op: 'in', value: ['pdf', 'csv'] }],
  [{ field: 'properties.missing', op: 'neq', value: 'x' }],
  [
    { field: 'user_id', op: 'in', value: ['u1', 'u2', 'u3'] },
    { field: 'external_source', op: 'eq', value: 'salesforce' },
    { field: 'product_id', op: 'neq', value: '' },
  ],
];
const WINDOWS: MetricDefinition['window'][] = [
  { type: 'rolling', days: 7 },
  { type: 'rolling', days: 90 },
  { type: 'calendar', unit: 'day' },
  { type: 'calendar', unit: 'week' },
  { type: 'calendar', unit: 'month' },
  { type: 'calendar', unit: 'quarter' },
];
const TARGET: Record<string, string | null> = {
  count: null,
  exists: null,
  sum: 'amount',
  avg: 'ratio',
  max: 'seats',
  distinct_count: 'plan',
  last_value: 'amount',
};

t.test('metrics: all seven calculations, with filters and windows, both grains, some customers', async (t) => {
  await step('metrics', async () => {
    const defs: MetricDefinition[] = [];
    for (const calculation of CALCULATIONS)
      for (const [w, window] of WINDOWS.entries())
        for (const [k, filter] of FILTERS.entries()) {
          if ((k + w) % 3 !== 0 && k !== 0) continue; // every filter with two windows, every window unfiltered
          defs.push({
            source_event: NAMES[(k + w) % NAMES.length],
            calculation,
            target_property: TARGET[calculation],
            filter,
            window,
            grain: 'customer',
          });
        }
    defs.push({ source_event: GENERATED, calculation: 'count', filter: [], window: WINDOWS[1], grain: 'customer' });
    defs.push({ source_event: NAMES[0], calculation: 'last_value', filter: [], window: WINDOWS[1], grain: 'customer' });
    defs.push({
      source_event: NAMES[1],
      calculation: 'avg',
      target_property: 'seats',
      window: WINDOWS[4],
      grain: 'portfolio',
    });
    defs.push({ source_event: NAMES[0], calculation: 'count', window: WINDOWS[4], grain: 'portfolio' });
    for (const def of defs) {
      await reader.rows(compileMetric(def, { tenantId: f.tenantId, now: f.now }).sql, 'metric');
      await ch.rows(compileMetric(def, { tenantId: f.tenantId, now: f.now, customerIds: f.customers.slice(3, 9) }).sql);
    }
    const group = defs.filter((d) => d.source_event === NAMES[0] && d.grain === 'customer' && groupable(d, f.now));
    if (group.length > 1) await ch.rows(compileMetricGroup(group, { tenantId: f.tenantId, now: f.now }).sql);
    t.comment(`${defs.length} definitions, ${group.length} of them also as one group`);
  });
  verdict(t, 'metrics', 100);
});

t.test('the event catalog, usage widgets, stored metric values and the health history', async (t) => {
  await step('catalog', () => seenInClickHouse(reader, f.tenantId, [...NAMES, GENERATED, 'never_sent']));
  await step('widgets', async () => {
    for (const aggregation of ['count', 'unique_users', 'trend_pct', 'frequency'] as const)
      for (const period of ['7d', '30d', '90d'] as const)
        for (const event_name of [NAMES[0], null])
          await widgetValue(reader, f.tenantId, f.customers[7], { event_name, aggregation, period }, f.now);
  });
  await step('values', async () => {
    const q = { tenantId: f.tenantId, metricIds: f.metricIds, limit: 1000 };
    await storedValues(reader, q);
    await storedValues(reader, q, true);
    await storedValues(reader, {
      ...q,
      customerIds: f.customers.slice(0, 5),
      from: new Date(f.now.getTime() - 2 * 86_400_000),
      to: f.now,
    });
  });
  await step('history', async () => {
    const h = new HealthHistory(reader);
    const range = { from: new Date(f.now.getTime() - 30 * 86_400_000).toISOString().slice(0, 10), to: today };
    for (const c of f.customers.slice(0, 3)) {
      await h.points(f.tenantId, c, range, 'daily');
      await h.points(f.tenantId, c, range, 'weekly');
    }
  });
  verdict(t, 'catalog');
  verdict(t, 'widgets', 24);
  verdict(t, 'values', 3);
  verdict(t, 'history', 6);
});

t.test("surface B's debug query (GET /v1/events), paged by its cursor", async (t) => {
  await step('surface-b', async () => {
    const q = new EventQuery(url, 'csp', 10_000);
    const base = { tenantId: f.tenantId, fromMs: f.now.getTime() - 91 * 86_400_000, toMs: f.now.getTime() + 1000 };
    let cursor: string | undefined;
    for (let i = 0; i < 3; i++) {
      const page = await q.page({ ...base, limit: 200, cursor });
      cursor = page.next_cursor ?? undefined;
    }
    await q.page({ ...base, customerId: f.customers[2], limit: 50 });
    await q.page({ ...base, eventName: NAMES[1], limit: 50 });
  });
  verdict(t, 'surface-b', 5);
});

t.test('alerts, playbook reads and the deduplication keys', async (t) => {
  await step('alerts', () =>
    evaluateUsageDrops(pg, ch, f.tenantId, {
      keySpikeFactor: 10,
      keySpikeFloor: 100,
      dropRatio: 0.5,
      dropMinWeekly: 3,
    }),
  );
  await step('playbooks', async () => {
    await latestValues(ch, f.tenantId, f.metricIds);
    for (const operator of ['gt', 'gte', 'lt', 'lte'] as const)
      await thresholdMatches(ch, f.tenantId, {
        type: 'metric_threshold',
        metric_id: f.metricIds[0],
        operator,
        value: 10,
      } as never);
    await eventMatches(
      ch,
      f.tenantId,
      { type: 'event', event_name: NAMES[0], count: 3, within_days: 30 } as never,
      f.now,
    );
  });
  await step('dedup-keys', () => new KeysStore(ch, log).of(f.tenantId));
  verdict(t, 'alerts', 1);
  verdict(t, 'playbooks', 6);
  verdict(t, 'dedup-keys', 2);
});

t.test('erasure: rows counted, mutations, rows counted again, and the reads after it', async (t) => {
  const gone = f.customers.slice(0, 2);
  await step('erasure', async () => {
    const e = new ClickHouseErasure(ch, log, 50);
    const tables = await e.tables();
    t.ok(tables.includes('events') && tables.includes('health_history'), `${tables.length} tables with customer rows`);
    const before = await e.count(tables, f.tenantId, gone);
    t.ok(before.size > 0, 'the customers had rows');
    for (const table of tables) await e.mutate(table, f.tenantId, gone);
    await e.settle(tables, f.tenantId, () => false);
    await e.issued(tables, f.tenantId);
    const after = await e.count(tables, f.tenantId, gone);
    t.equal(after.size, 0, 'no row of theirs is left on 18.16');
  });
  await step('erasure-after', async () => {
    await aggregate(ch, { tenantId: f.tenantId, today }, model, f.customers);
    await seenInClickHouse(reader, f.tenantId, NAMES);
    await reader.rows(
      compileMetric(
        { source_event: NAMES[0], calculation: 'count', window: WINDOWS[1], grain: 'customer' },
        { tenantId: f.tenantId, now: f.now },
      ).sql,
      'metric',
    );
  });
  verdict(t, 'erasure', 4);
  verdict(t, 'erasure-after', 4);
});

t.test('known semantic differences between 18.16 and 26, one case each', async (t) => {
  const run18 = async (sql: string, settings: Record<string, string> = {}) => {
    const res = await fetch(`${upstream}/?${new URLSearchParams(settings)}`, {
      method: 'POST',
      body: `${sql} FORMAT JSONEachRow`,
    });
    const text = await res.text();
    return res.ok ? text.trim() : new Error(text);
  };
  const run26 = (sql: string, settings: Record<string, string> = {}) => {
    try {
      return chdb.run(withSettings(sql, settings), 'JSONEachRow').trim();
    } catch (err) {
      return err as Error;
    }
  };
  const same = (a: string | Error, b: string | Error) =>
    a instanceof Error || b instanceof Error
      ? a instanceof Error && b instanceof Error && errorCode(a) === errorCode(b)
      : sameValue(JSON.parse(a), JSON.parse(b));
  for (const c of SEMANTIC_CASES) {
    const [a, b] = [await run18(c.sql), run26(c.sql)];
    const show = (x: string | Error) => (x instanceof Error ? `error ${errorCode(x)}` : x);
    if (c.differs) t.notOk(same(a, b), `${c.name}: differs at the defaults (${c.differs}): ${show(a)} | ${show(b)}`);
    else if (!c.pinned) t.ok(same(a, b), `${c.name}: the same: ${show(a)} | ${show(b)}`);
    if (c.pinned) {
      const [pa, pb] = [await run18(c.sql, c.pinned), run26(c.sql, c.pinned)];
      t.ok(same(pa, pb), `${c.name}: the same with ${JSON.stringify(c.pinned)}: ${show(pa)} | ${show(pb)}`);
    }
  }
});

t.test('unknown fields in a JSONEachRow insert fail on both, as the processors send it', async (t) => {
  const row = `{"tenant_id":"${f.tenantId}","event_name":"x","key":"k","events":1,"no_such_column":1}\n`;
  await step('unknown-field', () =>
    ch.insert('event_property_keys', Buffer.from(row), 'unknown-field').then(
      () => t.fail('the insert passed'),
      (err: Error) => t.equal(chErrorCode(err), 117, 'refused on 18.16 (117, INCORRECT_DATA)'),
    ),
  );
  const mine = twin.exchanges.filter((e) => e.label === 'unknown-field');
  t.same(
    mine.map((e) => [e.result, e.why]),
    [['not compared', 'failed on both']],
    '26 refuses it too, under the processors pinned settings',
  );
  t.doesNotThrow(
    () => chdb.run(`INSERT INTO csp.event_property_keys FORMAT JSONEachRow ${row}`),
    "while 26's default would have stored the row without the field",
  );
});

t.test('every statement the twin saw', async (t) => {
  const by = (r: string) => twin.exchanges.filter((e) => e.result === r).length;
  t.comment(
    `${twin.exchanges.length} statements: ${by('same')} the same, ${by('not compared')} not compared ` +
      `(system tables, or failed on both), ${by('different')} different`,
  );
  t.equal(twin.differences().length, 0, 'no statement answered differently');
});
