import t from '#tap';
import { LOCAL_DB, clickhouseStatements, clusterStatements } from '../../infra/apply.js';

// The cluster's DDL is derived from schema.sql (infra/apply.ts): every table the single-server
// DDL creates exists on the cluster as a replicated storage table plus a Distributed table of the
// same name, so the tiers' SQL reads and writes the same names in both layouts.
const single = clickhouseStatements();
const cluster = clusterStatements(single, 'csp');
const created = (stmts: string[], re: RegExp) => stmts.flatMap((s) => re.exec(s)?.slice(1, 3).join('.') ?? []);

t.test('every table becomes a Replicated table in csp_local and a Distributed table in csp', async (t) => {
  const tables = created(single, /^CREATE TABLE IF NOT EXISTS (\w+)\.(\w+)\s*\(/);
  t.ok(tables.length >= 10, `${tables.length} tables in schema.sql`);
  for (const name of tables.map((n) => n.split('.')[1])) {
    const local = cluster.find((s) => s.startsWith(`CREATE TABLE IF NOT EXISTS ${LOCAL_DB}.${name} ON CLUSTER csp `));
    t.match(local, /ENGINE = Replicated\w*MergeTree\('\/clickhouse\/tables\/\{shard\}\/csp\//, `${name}: replicated`);
    const dist = cluster.find((s) =>
      s.startsWith(`CREATE TABLE IF NOT EXISTS csp.${name} ON CLUSTER csp AS ${LOCAL_DB}.`),
    );
    t.ok(dist, `${name}: Distributed table`);
    if (name !== 'batch_ledger')
      t.match(
        dist,
        /Distributed\(csp, csp_local, \w+, cityHash64\(toString\(tenant_id\)\)\)$/,
        `${name}: by workspace`,
      );
  }
});

t.test("an engine's own arguments follow the replication path", async (t) => {
  const keysets = cluster.find((s) => s.includes(`${LOCAL_DB}.event_property_keysets ON CLUSTER`));
  t.match(
    keysets,
    /ReplicatedSummingMergeTree\('\/clickhouse\/tables\/\{shard\}\/csp\/event_property_keysets', '\{replica\}', events\)/,
  );
  const history = cluster.find((s) => s.includes(`${LOCAL_DB}.health_history ON CLUSTER`));
  t.match(history, /ReplicatedReplacingMergeTree\([^)]*'\{replica\}', calculated_at\)/);
  t.match(history, /PARTITION BY toYYYYMM\(day\)/, 'partitioning and order kept');
});

t.test('views read and write storage tables only; Distributed tables come after every column is added', async (t) => {
  const views = cluster.filter((s) => s.startsWith('CREATE MATERIALIZED VIEW'));
  t.equal(views.length, single.filter((s) => s.startsWith('CREATE MATERIALIZED VIEW')).length);
  for (const v of views) t.notMatch(v, /\bcsp\./, v.slice(0, 80));
  const lastAlter = cluster.findLastIndex((s) => s.startsWith('ALTER TABLE'));
  const firstDistributed = cluster.findIndex((s) => /ENGINE = Distributed\(csp,/.test(s));
  t.ok(lastAlter < firstDistributed, 'ALTERs first');
  t.ok(
    cluster.every((s) => / ON CLUSTER csp\b/.test(s)),
    'every statement ON CLUSTER',
  );
});

t.test('views over system tables read every server', async (t) => {
  t.ok(
    cluster.includes(
      'CREATE TABLE IF NOT EXISTS csp.processes ON CLUSTER csp AS system.processes ENGINE = Distributed(csp_nodes, system, processes)',
    ),
  );
});

t.test('a statement with no cluster form is refused, not passed through', async (t) => {
  t.throws(() => clusterStatements(['OPTIMIZE TABLE csp.events FINAL'], 'csp'), /no cluster form/);
});
