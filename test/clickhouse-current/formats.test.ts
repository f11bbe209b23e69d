import { randomUUID } from 'node:crypto';
import t from '#tap';
import { stackProfile, stackUrls } from '../../infra/stack.js';
import { columnsOf, ROW_BINARY_V1, ROW_BINARY_V2, RowBinaryWriter, type RowFormat } from '../../lib/row-binary.js';
import { ClickHouse, PINNED_SETTINGS } from '../../processors/clickhouse.js';
import { type BillingRow, EVENT_COLUMNS, type EventRow } from '../../schemas/rows.js';
import { Chdb, errorCode } from '../helpers/chdb.js';
import { recordedStatements } from './recorded.js';
import { Twin } from './twin.js';

// Settings and formats on ClickHouse 26 (chDB) as on 18.16: every setting the product sends, the
// defaults it relies on, the 18.16 profile's settings, readonly=2, and the writer's inserts in
// each row format it takes (RowBinary v1 and v2, JSONEachRow), with the values at the edges of
// their types, through the twin (twin.ts) so both engines store the same bytes and are compared.
// docs/clickhouse.md, "Settings and formats".

const profile = stackProfile(process.env.TEST_STACK_PROFILE ?? 'test');
const upstream = stackUrls(profile).CLICKHOUSE_URL.split(',')[0];
const chdb = new Chdb();
t.teardown(() => chdb.close());
await chdb.applySchema();

const on18 = async (sql: string, settings: Record<string, string> = {}): Promise<string> => {
  const res = await fetch(`${upstream}/?${new URLSearchParams(settings)}`, { method: 'POST', body: sql });
  const text = await res.text();
  if (!res.ok) throw new Error(text);
  return text;
};
const settingOn26 = (name: string) =>
  chdb.rows<{ value: string; alias_for: string; is_obsolete: number }>(
    `SELECT value, alias_for, is_obsolete FROM system.settings WHERE name = '${name}'`,
  )[0];

/** Settings the product's code sends: in URLs (the clients) and in SETTINGS clauses. */
const SENT_BY_CODE = [
  'readonly', // lib/clickhouse-endpoints.ts: every read of the core API and surface B
  'max_execution_time', // core-api/clickhouse.ts
  'output_format_json_quote_64bit_integers', // core-api/clickhouse.ts (0), processors/clickhouse.ts (1)
  'input_format_skip_unknown_fields', // processors/clickhouse.ts (0)
  'skip_unavailable_shards', // processors/writer/reconcile.ts, unregistered-parts.ts
];

t.test('every setting the product sends exists on 26 under its name', async (t) => {
  const { shapes } = await recordedStatements();
  const recorded = new Set(shapes.flatMap((s) => Object.keys(s.settings)));
  for (const s of shapes.filter((x) => x.kind !== 'schema'))
    for (const m of s.example.matchAll(/\bSETTINGS\s+((?:\w+\s*=\s*[\w'.]+\s*,?\s*)+)/gi))
      for (const pair of m[1].split(',')) recorded.add(pair.split('=')[0].trim());
  t.comment(`recorded in the query log: ${[...recorded].sort().join(', ') || 'none (no suite run logged)'}`);
  for (const name of new Set([...SENT_BY_CODE, ...recorded, ...Object.keys(PINNED_SETTINGS)])) {
    const s = settingOn26(name);
    t.ok(
      s && !s.alias_for && !Number(s.is_obsolete),
      `${name}: a setting of 26 (${s ? `default ${s.value}` : 'unknown'})`,
    );
  }
});

/**
 * Defaults the product relies on or works around, on 18.16 (the test stack) and on 26; a difference
 * not listed here fails. Each listed one says how the product stands.
 */
const DEFAULTS: Record<string, { differs?: string; why: string }> = {
  max_query_size: { why: 'erasure statements are sized to stay under 256 KiB (processors/erasure/clickhouse.ts)' },
  insert_deduplicate: { why: 'the cluster profile turns it off; on one server identical blocks are not re-sent' },
  join_use_nulls: { why: 'no JOIN in the product' },
  readonly: { why: 'the reads send readonly=2' },
  output_format_json_quote_64bit_integers: {
    differs: '1 on 18.16, 0 on 26',
    why: 'sent by both clients (the processors 1, the core API 0)',
  },
  input_format_skip_unknown_fields: { differs: '0 on 18.16, 1 on 26', why: 'the processors send 0' },
  date_time_input_format: {
    differs: 'basic on 18.16, best_effort on 26',
    why: 'date-times travel as unix seconds, which both parse alike',
  },
  max_execution_time: { why: 'the core API and surface B send their own' },
  skip_unavailable_shards: { why: 'the writer sends 1 where it reads system tables over the cluster' },
  distributed_product_mode: {
    why: 'the cluster profile sets local (infra/services.ts)',
  },
};

t.test('the defaults the product relies on are the same on 26, or the product sends its own', async (t) => {
  const names = Object.keys(DEFAULTS);
  const theirs = new Map(
    (await on18(`SELECT name, value FROM system.settings WHERE name IN (${names.map((n) => `'${n}'`)}) FORMAT TSV`))
      .trim()
      .split('\n')
      .map((l) => l.split('\t') as [string, string]),
  );
  for (const name of names) {
    const [a, b] = [theirs.get(name), settingOn26(name)?.value];
    const d = DEFAULTS[name];
    if (d.differs) t.not(a, b, `${name} differs (${d.differs}): ${d.why}`);
    else t.equal(b, a, `${name} = ${a} on both: ${d.why}`);
  }
});

t.test("18.16's server profile (users.xml) on 26", async (t) => {
  let code: number | undefined;
  try {
    chdb.run('SET allow_experimental_low_cardinality_type = 1');
  } catch (err) {
    code = errorCode(err);
  }
  t.equal(
    code,
    115,
    'allow_experimental_low_cardinality_type is gone (115, UNKNOWN_SETTING): a 26 profile leaves it out',
  );
  t.ok(
    chdb.run("SELECT count() FROM system.columns WHERE database = 'csp' AND type LIKE 'LowCardinality%'").trim() !==
      '0',
    'the LowCardinality columns it allowed on 18.16 are created on 26 without it',
  );
  const renamed = settingOn26('insert_distributed_sync');
  t.equal(
    renamed?.alias_for,
    'distributed_foreground_insert',
    "the cluster profile's insert_distributed_sync is an alias of distributed_foreground_insert on 26",
  );
});

t.test('readonly=2 refuses a write on both, and lets the read set its settings', async (t) => {
  const insert =
    'INSERT INTO csp.event_property_keys (tenant_id, event_name, key, events) ' +
    `VALUES ('${randomUUID()}', 'x', 'k', 1)`;
  const codes: Array<number | undefined> = [];
  await on18(insert, { readonly: '2' }).catch((err) => codes.push(errorCode(err)));
  try {
    chdb.run(insert.replace('VALUES', 'SETTINGS readonly = 2 VALUES'));
  } catch (err) {
    codes.push(errorCode(err));
  }
  t.same(codes, [164, 164], 'READONLY (164) on both');
  t.equal((await on18('SELECT 1 SETTINGS max_execution_time = 7', { readonly: '2' })).trim(), '1');
  t.equal(
    chdb.run('SELECT 1 SETTINGS readonly = 2, max_execution_time = 7').trim(),
    '1',
    'a setting changed under readonly=2',
  );
});

t.test("the writer's row formats at the edges of their types, stored alike on both", async (t) => {
  const twin = new Twin(chdb, upstream);
  const url = await twin.start();
  t.teardown(() => twin.close());
  const ch = new ClickHouse(url, 'csp', 30_000);
  t.teardown(() => ch.close());
  const tenant = randomUUID();
  const customer = randomUUID();
  const event = (i: number, over: Partial<EventRow> = {}): EventRow => ({
    tenant_id: tenant,
    customer_id: customer,
    event_name: `edge_${i}`,
    ts: [0, 1, 1_767_225_599, 2 ** 32 - 1][i % 4],
    ts_ms: [0, 999, 1, 500][i % 4],
    event_id: randomUUID(),
    batch_id: randomUUID(),
    received_at: 2 ** 32 - 1,
    external_customer_id: 'x'.repeat(i * 100),
    external_source: ['', 'internal', 'ünïcode', '\t\n\\'][i % 4],
    user_id: ['', 'u', 'ü', "'"][i % 4],
    product_id: '',
    product_code: '',
    surface: 'a',
    external_id: '',
    properties: i % 2 ? '{"a":[1,{"b":null}]}' : '',
    prop_keys: i % 3 ? ['a', 'é', ''] : [],
    prop_values: i % 3 ? ['1', '"x"', '\\'] : [],
    user_email: '',
    user_external_id: '',
    prop_kinds: i % 3 ? 'sjs' : '',
    ...over,
  });
  const billing = (i: number): BillingRow => ({
    tenant_id: tenant,
    customer_id: customer,
    event_type: 'payment_failed',
    amount: [null, 0, -0.5, 1.7976931348623157e308, 5e-324][i % 5],
    currency: 'USD',
    status: 'pending',
    ts: i,
    ts_ms: i,
    event_id: randomUUID(),
    batch_id: randomUUID(),
    received_at: i,
  });
  const body = (format: RowFormat, table: 'events' | 'billing_events', rows: Array<EventRow | BillingRow>) => {
    if (format === 'JSONEachRow') return Buffer.from(rows.map((r) => `${JSON.stringify(r)}\n`).join(''));
    const w = new RowBinaryWriter(1 << 16);
    for (const r of rows) w.row(columnsOf(format, table), r as unknown as Record<string, unknown>);
    return w.take();
  };
  twin.label = 'insert';
  for (const format of [ROW_BINARY_V2, ROW_BINARY_V1, 'JSONEachRow'] as const) {
    const rows = Array.from({ length: 8 }, (_, i) => event(i, { event_name: `${format}_${i}` }));
    const v1 = format === ROW_BINARY_V1;
    await ch.insert(
      'events',
      body(format, 'events', v1 ? rows.map(({ prop_kinds: _, ...r }) => r as EventRow) : rows),
      randomUUID(),
      format,
    );
    // A subnormal amount (5e-324) only in RowBinary: 18.16 parses it from text as 0 (semantics.ts).
    const amounts = Array.from({ length: 5 }, (_, i) => billing(i)).map((b) =>
      format === 'JSONEachRow' && b.amount === 5e-324 ? { ...b, amount: 2.5e-308 } : b,
    );
    await ch.insert('billing_events', body(format, 'billing_events', amounts), randomUUID(), format);
  }
  twin.label = 'read';
  // Date-times as numbers, as the product reads them: their text differs at the edges (semantics.ts).
  const columns = Object.keys(EVENT_COLUMNS)
    .filter((c) => !c.endsWith('_id') || c === 'user_id' || c === 'product_id')
    .map((c) => (EVENT_COLUMNS[c as keyof typeof EVENT_COLUMNS] === 'DateTime' ? `toUInt32(${c}) AS ${c}_s` : c));
  await ch.rows(
    `SELECT toString(event_id) AS e, ${columns.join(', ')} FROM csp.events WHERE tenant_id = '${tenant}' ORDER BY e`,
  );
  await ch.rows(
    `SELECT toString(event_id) AS e, amount, toUInt32(ts) AS t, ts_ms FROM csp.billing_events
     WHERE tenant_id = '${tenant}' ORDER BY e`,
  );
  const inserts = twin.exchanges.filter((e) => e.label === 'insert');
  t.equal(inserts.length, 6, 'six inserts: events and billing_events in each format');
  t.ok(
    inserts.every((e) => e.result === 'same'),
    'each stored on both',
  );
  for (const d of twin.differences())
    t.fail(`${d.label}: 18.16 and 26 differ`, { statement: d.sql.slice(0, 600), detail: d.detail });
  const reads = twin.exchanges.filter((e) => e.label === 'read');
  t.same(
    reads.map((e) => [e.result, e.rows]),
    [
      ['same', 24],
      ['same', 15],
    ],
    'every row and column the same on both',
  );
});
