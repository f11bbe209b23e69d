import { randomBytes } from 'node:crypto';
import t from '#tap';
import { clickhouseDdl, regranulate } from '../../infra/apply.js';
import { urls } from '../helpers/stack.js';

/**
 * A rollup whose declared index_granularity changed is rebuilt at `infra:up` with every row it
 * held, and its materialized view keeps feeding it; a rebuild cut off halfway goes on from where
 * it stopped.
 */
const ch = clickhouseDdl(urls.CLICKHOUSE_URL);
const db = `regranulate_${randomBytes(4).toString('hex')}`;
const rollup = (granularity?: number) =>
  `CREATE TABLE IF NOT EXISTS ${db}.daily (k UInt32, day Date, n AggregateFunction(count))
ENGINE = AggregatingMergeTree() PARTITION BY toYYYYMM(day) ORDER BY (k, day)` +
  (granularity ? ` SETTINGS index_granularity = ${granularity}` : '');
const granularity = async () =>
  (await ch(`SELECT engine_full FROM system.tables WHERE database = '${db}' AND name = 'daily' FORMAT TSVRaw`)).match(
    /index_granularity = (\d+)/,
  )?.[1];
const totals = async () =>
  (await ch(`SELECT toYYYYMM(day) AS m, countMerge(n) FROM ${db}.daily GROUP BY m ORDER BY m FORMAT TSVRaw`)).trim();
const tables = async () =>
  (await ch(`SELECT name FROM system.tables WHERE database = '${db}' ORDER BY name FORMAT TSVRaw`)).trim().split('\n');
// Three months of source rows, in three inserts: several parts in several partitions.
const feed = async (from: number) => {
  for (const month of [0, 1, 2])
    await ch(
      `INSERT INTO ${db}.src SELECT number % 500, toDate('2026-01-15') + ${month * 31} FROM numbers(${from}, 1000)`,
    );
};

t.before(async () => {
  await ch(`CREATE DATABASE ${db}`);
  await ch(`CREATE TABLE ${db}.src (k UInt32, day Date) ENGINE = MergeTree() ORDER BY k`);
  await ch(rollup());
  await ch(`CREATE MATERIALIZED VIEW ${db}.daily_mv TO ${db}.daily AS
    SELECT k, day, countState() AS n FROM ${db}.src GROUP BY k, day`);
  await feed(0);
});
t.teardown(() => ch(`DROP DATABASE IF EXISTS ${db}`));

t.test(
  'a table created with the default granularity is rebuilt with the declared one, rows and view kept',
  async (t) => {
    t.equal(await granularity(), '8192');
    const before = await totals();
    t.equal(before, '202601\t1000\n202602\t1000\n202603\t1000');
    await regranulate(ch, rollup(256));
    t.equal(await granularity(), '256', 'the declared granularity');
    t.equal(await totals(), before, 'every aggregate as before');
    t.same(await tables(), ['daily', 'daily_mv', 'src'], 'no table left over');
    await feed(1000);
    t.equal(await totals(), '202601\t2000\n202602\t2000\n202603\t2000', 'the view feeds the rebuilt table');
    await regranulate(ch, rollup(256));
    t.equal(await totals(), '202601\t2000\n202602\t2000\n202603\t2000', 'a second run changes nothing');
  },
);

t.test('a rebuild cut off after one partition goes on with the others, none copied twice', async (t) => {
  const before = await totals();
  // The state a crash leaves: the new table in place, one partition of the old one copied and dropped.
  await ch(`CREATE TABLE ${db}.daily__new AS ${db}.daily`);
  await ch(`RENAME TABLE ${db}.daily TO ${db}.daily__old, ${db}.daily__new TO ${db}.daily`);
  await ch(`INSERT INTO ${db}.daily SELECT * FROM ${db}.daily__old WHERE _partition_id = '202601'`);
  await ch(`ALTER TABLE ${db}.daily__old DROP PARTITION 202601`);
  t.not(await totals(), before, 'halfway');
  await regranulate(ch, rollup(256));
  t.equal(await totals(), before, 'every aggregate once');
  t.same(await tables(), ['daily', 'daily_mv', 'src']);
});
