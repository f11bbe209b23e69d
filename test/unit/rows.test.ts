import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { eventRow } from '../../ingest/event-rules.js';
import { NO_PROPERTIES } from '../../lib/event-properties.js';
import { ROOT } from '../../infra/stack.js';
import { SINK_TABLES } from '../../schemas/rows.js';

/** Columns of a csp table as the DDL creates and then alters it, in order. */
function ddlColumns(table: string): Array<[string, string]> {
  const sql = fs.readFileSync(path.join(ROOT, 'infra/clickhouse/schema.sql'), 'utf8');
  const create = new RegExp(`CREATE TABLE IF NOT EXISTS csp\\.${table} \\(([\\s\\S]*?)\\n\\) ENGINE`).exec(sql);
  if (!create) throw new Error(`no CREATE TABLE csp.${table}`);
  const cols = create[1]
    .split('\n')
    .map((l) => l.trim().replace(/,$/, ''))
    .filter(Boolean)
    .map((l) => /^(\w+)\s+(.+)$/.exec(l)!.slice(1, 3) as [string, string]);
  for (const m of sql.matchAll(new RegExp(`ALTER TABLE csp\\.${table} ADD COLUMN (\\w+) ([^;]+);`, 'g')))
    cols.push([m[1], m[2].trim()]);
  return cols;
}

for (const [table, columns] of Object.entries(SINK_TABLES)) {
  t.test(`the row contract of csp.${table} is the DDL's, column for column`, async (t) => {
    t.same(Object.entries(columns), ddlColumns(table));
  });
}

t.test('the ingest tier builds csp.events rows with exactly the contract keys, in order', async (t) => {
  const row = eventRow(
    {
      tenantId: '0190a000-0000-7000-8000-000000000001',
      batchId: '0190a000-0000-7000-8000-000000000002',
      now: 1,
      surface: 'a',
    },
    {
      customerId: '0190a000-0000-7000-8000-000000000003',
      eventName: 'login',
      ts: 1_700_000_000_123,
      externalCustomerId: '',
      externalSource: 'internal',
      userId: '',
      productId: '',
      productCode: '',
      externalId: '',
      userEmail: '',
      userExternalId: '',
      props: NO_PROPERTIES,
    },
  );
  t.same(Object.keys(row), Object.keys(SINK_TABLES.events));
  t.equal(row.ts, 1_700_000_000, 'DateTime as unix seconds');
  t.equal(row.ts_ms, 123);
});
