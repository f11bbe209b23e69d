import t from '#tap';
import { clickhouseStatements, clusterStatements, regranulate } from '../../infra/apply.js';
import { CLUSTER_NAME } from '../../infra/stack.js';
import { Chdb } from '../helpers/chdb.js';
import { KIND_ORDER, runShape } from './check.js';
import { recordedStatements, suiteStarted } from './recorded.js';

// Every statement the product sends runs on ClickHouse 26 (chDB), against schema.sql as
// infra/apply.ts applies it: the DDL of one server and the cluster's DDL derived from it, then
// every statement shape the stack suite sent, read back from the test stacks' query log
// (docs/clickhouse.md). Run after the stack suite: `npm run test:clickhouse-current`.

/** Fewer shapes than this means the log did not see a suite run (a full one records about 300). */
const MIN_SHAPES = 50;

const chdb = new Chdb();
t.teardown(() => chdb.close());
t.comment(`ClickHouse ${chdb.version()} (chDB)`);

t.test('schema.sql runs on ClickHouse 26 as infra/apply.ts applies it, and again over itself', async (t) => {
  await chdb.applySchema();
  const tables = chdb.run("SELECT name FROM system.tables WHERE database = 'csp' ORDER BY name").trim().split('\n');
  await chdb.applySchema();
  t.same(
    chdb.run("SELECT name FROM system.tables WHERE database = 'csp' ORDER BY name").trim().split('\n'),
    tables,
    'a second apply changes nothing (the ADD COLUMNs find their columns and are taken as done)',
  );
  const created = clickhouseStatements().filter((s) => /^CREATE (TABLE|VIEW|MATERIALIZED VIEW) /i.test(s)).length;
  t.equal(tables.length, created, `${created} tables and views of schema.sql in csp`);
  const columns = chdb.run("SELECT name FROM system.columns WHERE database = 'csp' AND table = 'events'");
  for (const c of ['user_email', 'user_external_id', 'prop_kinds']) t.match(columns, c, `csp.events has ${c}`);
});

t.test(
  'infra/apply.ts rebuilds a table whose declared granularity changed (regranulate) on ClickHouse 26',
  async (t) => {
    const run = async (sql: string) => chdb.run(sql);
    const table = (granularity: number) =>
      `CREATE TABLE IF NOT EXISTS regran.daily (k UInt32, day Date, n AggregateFunction(count))
     ENGINE = AggregatingMergeTree() PARTITION BY toYYYYMM(day) ORDER BY (k, day)
     SETTINGS index_granularity = ${granularity}`;
    chdb.run('CREATE DATABASE IF NOT EXISTS regran');
    chdb.run('CREATE TABLE regran.src (k UInt32, day Date) ENGINE = MergeTree() ORDER BY k');
    chdb.run(table(8192));
    chdb.run(
      'CREATE MATERIALIZED VIEW regran.daily_mv TO regran.daily AS ' +
        'SELECT k, day, countState() AS n FROM regran.src GROUP BY k, day',
    );
    for (const month of [0, 31, 62])
      chdb.run(`INSERT INTO regran.src SELECT number % 500, toDate('2026-01-15') + ${month} FROM numbers(1000)`);
    const counts = () => chdb.run('SELECT toYYYYMM(day) AS m, countMerge(n) FROM regran.daily GROUP BY m ORDER BY m');
    const before = counts();
    await regranulate(run, table(256));
    t.match(
      chdb.run("SELECT engine_full FROM system.tables WHERE database = 'regran' AND name = 'daily'"),
      /index_granularity = 256/,
    );
    t.equal(counts(), before, 'every partition copied, none twice');
    chdb.run(`INSERT INTO regran.src SELECT number % 500, toDate('2026-01-15') FROM numbers(1000)`);
    t.match(counts(), /^202601\t2000$/m, 'the view writes into the rebuilt table');
    t.equal(
      chdb.run("SELECT name FROM system.tables WHERE database = 'regran' ORDER BY name"),
      'daily\ndaily_mv\nsrc\n',
    );
    chdb.run('DROP DATABASE regran');
  },
);

t.test("the cluster profile's DDL (clusterStatements) parses on ClickHouse 26", async (t) => {
  const statements = clusterStatements(clickhouseStatements(), CLUSTER_NAME);
  let parsed = 0;
  for (const s of statements) {
    try {
      chdb.parse(s);
      parsed++;
    } catch (err) {
      t.fail(`does not parse: ${s.slice(0, 300)}\n${(err as Error).message.slice(0, 300)}`);
    }
  }
  t.equal(parsed, statements.length, `${parsed} of ${statements.length} statements parse`);
});

t.test('every statement shape the stack suite sent runs on ClickHouse 26', async (t) => {
  const since = suiteStarted();
  t.comment(
    since
      ? `statements logged since the stack suite last started, ${new Date(since * 1000).toISOString()}`
      : 'no stack suite run noted (.data/test/suite-started): every statement the logs hold',
  );
  const { shapes, logs } = await recordedStatements(undefined, since);
  for (const l of logs)
    t.comment(
      l.unread
        ? `${l.stack} stack: not read: ${l.unread}`
        : `${l.stack} stack: ${l.statements} statements logged, ` +
            `${l.failed} distinct ones failed on 18.16 (not checked), ` +
            `${l.ownDatabases} on databases tests made for themselves (left out)`,
    );
  for (const l of logs) for (const c of l.cut) t.fail(`${l.stack}: the query log cut a statement: ${c}…`);
  const byKind = KIND_ORDER.map((k) => `${shapes.filter((s) => s.kind === k).length} ${k}`).join(', ');
  t.comment(`${shapes.length} distinct shapes: ${byKind}`);
  t.ok(
    shapes.length >= MIN_SHAPES,
    `at least ${MIN_SHAPES} shapes recorded (${shapes.length}): fewer means the stacks did not serve the suite ` +
      '(run npm test first) or their ClickHouse logs no queries',
  );
  // In the order the log first saw each shape: a file's statements on a database of its own
  // (infra/regranulate rebuilds tables there with infra/apply.ts) find what its earlier ones made.
  let failed = 0;
  const expected = new Map<string, number>();
  for (const r of shapes) {
    chdb.run('USE csp');
    const outcome = runShape(chdb, r);
    if (outcome.ok) {
      if (outcome.expected) expected.set(outcome.expected, (expected.get(outcome.expected) ?? 0) + 1);
      continue;
    }
    failed++;
    t.fail(`${r.kind} statement (${r.count} sent, first ${r.first} on ${r.stack}) fails on 26`, {
      statement: r.example.slice(0, 1500),
      settings: r.settings,
      error: outcome.error,
    });
  }
  for (const [why, n] of expected) t.comment(`${n} shapes failed on 26 as expected: ${why}`);
  t.equal(failed, 0, `${shapes.length - failed} of ${shapes.length} shapes run on ClickHouse 26`);
});
