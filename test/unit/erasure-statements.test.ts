import { randomUUID } from 'node:crypto';
import t from '#tap';
import { chunks, customersCondition, IDS_PER_STATEMENT } from '../../processors/erasure/clickhouse.js';

// The erasure's counts, mutations and sweeps name the customers in `IN (…)` lists; ClickHouse
// refuses a statement above max_query_size (262,144 bytes by default). A month of purges of a large
// workspace must not make a statement that ClickHouse refuses (it stalled every erasure: the sweep
// runs before new work is claimed).
const MAX_QUERY_SIZE = 262_144;
/** What a statement adds around the condition (the longest: a count through a Distributed table). */
const AROUND = 300;

t.test('slices keep every id once, in order, at most `size` each', async (t) => {
  t.same(chunks([], 3), []);
  t.same(chunks([1, 2, 3, 4, 5, 6, 7], 3), [[1, 2, 3], [4, 5, 6], [7]]);
  t.same(chunks([1, 2], 1000), [[1, 2]]);
  t.throws(() => chunks([1], 0));
});

t.test('10,000 erased customers: every statement stays under max_query_size', async (t) => {
  const tenant = randomUUID();
  const ids = Array.from({ length: 10_000 }, () => randomUUID());
  t.ok(customersCondition(tenant, ids).length > MAX_QUERY_SIZE, 'in one list, ClickHouse would refuse it');
  const slices = chunks(ids, IDS_PER_STATEMENT);
  t.equal(slices.length, 10);
  t.same(slices.flat(), ids, 'every customer named once');
  for (const s of slices) t.ok(customersCondition(tenant, s).length + AROUND < MAX_QUERY_SIZE / 4);
});

t.test('only UUIDs reach the SQL', async (t) => {
  t.throws(() => customersCondition(randomUUID(), ["x') OR 1 = 1 --"]), /not a UUID/);
});
