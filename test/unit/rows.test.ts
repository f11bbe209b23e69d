import fs from 'node:fs';
import path from 'node:path';
import t from '#tap';
import { rowStamp, writeEventRow } from '../../ingest/event-rules.js';
import { splitProperties } from '../../lib/event-properties.js';
import { decodeRows, EVENT_ROW_COLUMNS, RowBinaryWriter, uuidWire } from '../../lib/row-binary.js';
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

t.test('the ingest tier writes csp.events rows column for column as the contract names them', async (t) => {
  const w = new RowBinaryWriter(256);
  const stamp = rowStamp({
    tenantId: '0190a000-0000-7000-8000-000000000001',
    batchId: '0190A000-0000-7000-8000-00000000000B',
    now: 1_700_000_100_456,
    surface: 'a',
  });
  writeEventRow(w, stamp, {
    // The customer's UUID is copied from a slab of them (the resolver's), here the second of two.
    customer: Buffer.concat([
      uuidWire('0190a000-0000-7000-8000-00000000000f'),
      uuidWire('0190a000-0000-7000-8000-000000000003'),
    ]),
    customerAt: 16,
    eventName: 'login',
    ts: 1_700_000_000_123,
    externalCustomerId: 'ext-1',
    externalSource: 'crm',
    userId: 'u-1',
    productId: 'p-id',
    productCode: 'p-code',
    externalId: 'x-1',
    userEmail: 'a@example.com',
    userExternalId: 'ux-1',
    props: splitProperties({ plan: 'pro', n: 2 }),
  });
  const [row] = decodeRows(w.take(), EVENT_ROW_COLUMNS);
  t.same(Object.keys(row), Object.keys(SINK_TABLES.events));
  t.match(row.event_id, /^018bcfe6-f068-7/, 'a UUIDv7 of the receipt time');
  t.same(
    { ...row, event_id: '' },
    {
      tenant_id: '0190a000-0000-7000-8000-000000000001',
      customer_id: '0190a000-0000-7000-8000-000000000003',
      event_name: 'login',
      ts: 1_700_000_000,
      ts_ms: 123,
      event_id: '',
      batch_id: '0190a000-0000-7000-8000-00000000000b',
      received_at: 1_700_000_100,
      external_customer_id: 'ext-1',
      external_source: 'crm',
      user_id: 'u-1',
      product_id: 'p-id',
      product_code: 'p-code',
      surface: 'a',
      external_id: 'x-1',
      properties: '',
      prop_keys: ['plan', 'n'],
      prop_values: ['pro', '2'],
      user_email: 'a@example.com',
      user_external_id: 'ux-1',
      prop_kinds: 'sj',
    },
  );
});
