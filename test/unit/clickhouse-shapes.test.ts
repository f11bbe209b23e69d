import t from '#tap';
import { withSettings } from '../clickhouse-current/check.js';
import { insertHead, kindOf, shapeOf, takeStrings } from '../clickhouse-current/shapes.js';
import { isOrdered, sameValue } from '../clickhouse-current/twin.js';

// The pure parts of test/clickhouse-current/: statement shapes (the values of a statement taken
// out, so that the statements of a suite run fold into what the code can build), the twin's
// comparison of answers, and the SETTINGS clause a recorded statement is run with.

t.test('string literals, with their escapes, become ?', async (t) => {
  t.same(takeStrings("SELECT 'a', 'it''s', 'b\\'c', 'd\\\\' FROM t"), {
    text: 'SELECT ?, ?, ?, ? FROM t',
    strings: ['a', "it''s", "b\\'c", 'd\\\\'],
  });
});

t.test('numbers become ?, names keep their digits', async (t) => {
  t.equal(
    shapeOf('SELECT cityHash64(x), toYYYYMM(ts), prop_values[2] FROM csp.t WHERE n > 10 AND f < 1.5e-9'),
    'SELECT cityHash64(x),toYYYYMM(ts),prop_values[?] FROM csp.t WHERE n > ? AND f < ?',
  );
});

t.test('two statements that differ only in their values have one shape', async (t) => {
  const a =
    "SELECT count() FROM csp.events WHERE tenant_id = '8f7c2e4a-0000-4000-8000-000000000001' AND x IN (1, 2, 3)";
  const b = "SELECT count()\n  FROM csp.events\n  WHERE tenant_id = 'other' AND x IN (7)";
  t.equal(shapeOf(a), 'SELECT count() FROM csp.events WHERE tenant_id = ? AND x IN(?,…)');
  t.not(shapeOf(a), shapeOf(b), 'one value is not a list');
  t.equal(shapeOf(a), shapeOf(a.replace('1, 2, 3', '4, 5, 6, 7, 8')), 'lists of any length');
  t.equal(shapeOf('INSERT INTO t VALUES (1, 2), (3, 4), (5, 6)'), 'INSERT INTO t VALUES(?,…),…');
  t.equal(shapeOf("SELECT has(['a', 'b'], x)"), 'SELECT has([?,…],x)');
});

t.test('kinds and INSERT heads', async (t) => {
  t.equal(kindOf('INSERT INTO csp.events (a, b) FORMAT RowBinary'), 'insert-data');
  t.same(insertHead('INSERT INTO csp.events (a, b) FORMAT RowBinary'), {
    table: 'csp.events',
    columns: ['a', 'b'],
    format: 'RowBinary',
  });
  t.same(insertHead('INSERT INTO csp.t FORMAT JSONEachRow'), {
    table: 'csp.t',
    columns: undefined,
    format: 'JSONEachRow',
  });
  t.equal(kindOf('INSERT INTO csp.t SELECT * FROM csp.u'), 'write');
  t.equal(kindOf('  WITH x AS (SELECT 1) SELECT * FROM x'), 'read');
  t.equal(kindOf("ALTER TABLE csp.events DELETE WHERE tenant_id = 'x'"), 'write');
  t.equal(kindOf('ALTER TABLE csp_local.events ON CLUSTER c DROP PARTITION 202601'), 'write');
  t.equal(kindOf('ALTER TABLE csp.events ADD COLUMN a String'), 'schema');
  t.equal(kindOf('SYSTEM FLUSH LOGS'), 'system');
  t.equal(kindOf('CREATE TABLE IF NOT EXISTS csp.t (a UInt8) ENGINE = Memory'), 'schema');
});

t.test('the twin compares numbers within 1e-9 relative, and orders only what the query orders', async (t) => {
  t.ok(sameValue(1, 1 + 1e-12));
  t.notOk(sameValue(1, 1 + 1e-6));
  t.ok(sameValue('0.30000000000000004', '0.3'), 'numeric text compares as numbers');
  t.notOk(sameValue('3', 3), 'a quoted number is not a number');
  t.ok(sameValue(['nan', 'x'], ['nan', 'x']));
  t.ok(sameValue({ a: [1, 'b'] }, { a: [1, 'b'] }));
  t.notOk(sameValue({ a: 1, b: 2 }, { b: 2, a: 1 }), 'columns in the same order');
  t.notOk(sameValue('2026-01-01 00:00:00', '2026-01-01 00:00:01'));
  t.ok(sameValue('2026-01-01 00:00:00', '2026-01-01 00:00:01', true), 'within 2 s where the statement read now()');
  t.ok(isOrdered('SELECT a FROM t ORDER BY a LIMIT 3 FORMAT JSONEachRow'));
  t.notOk(isOrdered('SELECT a FROM (SELECT a FROM t ORDER BY a) GROUP BY a'));
  t.notOk(isOrdered('SELECT 1 UNION ALL SELECT a FROM (SELECT a FROM t ORDER BY a LIMIT 2 BY a)'));
});

t.test('settings go into a SETTINGS clause, before the FORMAT, after one the statement has', async (t) => {
  t.equal(withSettings('SELECT 1', {}), 'SELECT 1');
  t.equal(
    withSettings('SELECT 1\nFORMAT JSONEachRow', { readonly: '2', x: 'a b' }),
    "SELECT 1 SETTINGS readonly = 2, x = 'a b'\nFORMAT JSONEachRow",
  );
  t.equal(
    withSettings('SELECT 1 SETTINGS skip_unavailable_shards = 1 FORMAT JSONEachRow', { readonly: '2' }),
    'SELECT 1 SETTINGS skip_unavailable_shards = 1, readonly = 2 FORMAT JSONEachRow',
  );
});
