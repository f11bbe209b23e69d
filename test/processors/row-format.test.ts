import { connect, headers, type JetStreamClient } from 'nats';
import t from '#tap';
import { uuidv7 } from '../../lib/ids.js';
import { splitProperties } from '../../lib/event-properties.js';
import {
  columnsOf,
  FORMAT_HEADER,
  ROW_BINARY_V1,
  ROW_BINARY_V2,
  type RowBinaryFormat,
  RowBinaryWriter,
} from '../../lib/row-binary.js';
import { subjects } from '../../lib/nats.js';
import type { BillingRow, EventRow } from '../../schemas/rows.js';
import { bootstrap, ch, privateJetStream, propertiesText, startTier, urls, waitFor } from '../helpers/stack.js';

// Messages of every row format reach the writer: RowBinary;v=2 (what producers write today), the
// formats before it, which a stream upgraded in place still holds (RowBinary;v=1, and JSONEachRow
// rows without the header), each published here as a publisher of that format wrote it.

type Format = typeof ROW_BINARY_V2 | typeof ROW_BINARY_V1 | 'JSONEachRow';

// A JetStream of its own: each test's messages wait for the writer it starts, with its buffer sizes.
const nats = await privateJetStream(t);
const nc = await connect({ servers: nats.url });
t.teardown(() => nc.close());
const js = nc.jetstream();
const jsm = await nc.jetstreamManager();
const now = Math.floor(Date.now() / 1000);

/**
 * The properties of row i. Row 3's key and value hold lone surrogates (valid JSON escapes), which
 * RowBinary rows carry and ClickHouse's JSONEachRow parser refuses: no JSONEachRow row has them.
 */
function propsOf(i: number, format: Format): Record<string, unknown> {
  const props: Record<string, unknown> = { plan: i % 2 ? 'pro' : 'frée', n: i, nested: { a: [1, 'x'] } };
  if (i === 2) props.long = 'ü'.repeat(3000);
  if (i === 3 && format !== 'JSONEachRow') props['lone \ud800'] = 'surrogate \udc00';
  return props;
}

/** Rows as a producer of `format` writes them: v1 and JSONEachRow had no kinds and the raw JSON always. */
function eventRows(tenant: string, batch: string, n: number, tag: string, format: Format = ROW_BINARY_V2): EventRow[] {
  return Array.from({ length: n }, (_, i) => {
    const props = propsOf(i, format);
    const split = splitProperties(props);
    const stored = format === ROW_BINARY_V2 ? split : { ...split, raw: JSON.stringify(props), kinds: '' };
    return {
      tenant_id: tenant,
      customer_id: uuidv7(),
      event_name: `${tag}_${i}`,
      ts: now - 3600 * i,
      ts_ms: (i * 37) % 1000,
      event_id: uuidv7(),
      batch_id: batch,
      received_at: now,
      external_customer_id: i % 2 ? `cust-${i}` : '',
      external_source: 'internal',
      user_id: `u${i}`,
      product_id: '',
      product_code: i === 1 ? 'core' : '',
      surface: 'a',
      external_id: i === 3 ? 'ext-3' : '',
      properties: stored.raw,
      prop_keys: stored.keys,
      prop_values: stored.values,
      user_email: i === 4 ? 'zoë@example.com' : '',
      user_external_id: '',
      prop_kinds: stored.kinds,
    };
  });
}

function rowBinary(
  table: 'events' | 'billing_events',
  rows: object[],
  format: RowBinaryFormat = ROW_BINARY_V2,
): Buffer {
  const w = new RowBinaryWriter(64);
  for (const r of rows) w.row(columnsOf(format, table), r as Record<string, unknown>);
  return w.take();
}

/** JSONEachRow rows as the first format wrote them: without the columns added since. */
const jsonRows = (rows: EventRow[]) => Buffer.from(rows.map(({ prop_kinds: _, ...r }) => JSON.stringify(r)).join(','));

async function publish(
  j: JetStreamClient,
  subject: string,
  payload: Uint8Array,
  o: { id: string; rows: number; format?: string },
) {
  const h = headers();
  h.set('Cs-Rows', String(o.rows));
  if (o.format) h.set(FORMAT_HEADER, o.format);
  await j.publish(subject, payload, { msgID: o.id, headers: h });
}

const EVENT_SELECT = `toString(tenant_id) AS tenant_id, toString(customer_id) AS customer_id, event_name,
  toUnixTimestamp(ts) AS ts, ts_ms, toString(event_id) AS event_id, toString(batch_id) AS batch_id,
  toUnixTimestamp(received_at) AS received_at, external_customer_id, external_source, user_id, product_id,
  product_code, surface, external_id, properties, prop_keys, prop_values, user_email, user_external_id, prop_kinds`;

async function storedEvents(tenant: string): Promise<EventRow[]> {
  return ch<EventRow>(`SELECT ${EVENT_SELECT} FROM events WHERE tenant_id = '${tenant}' ORDER BY event_name`);
}

async function countOf(table: string, tenant: string): Promise<number> {
  const [r] = await ch<{ c: string }>(`SELECT count() AS c FROM ${table} WHERE tenant_id = '${tenant}'`);
  return Number(r.c);
}

const byName = (a: EventRow, b: EventRow) => (a.event_name < b.event_name ? -1 : 1);

/** A row as ClickHouse gives it back: strings went through UTF-8 (a lone surrogate is U+FFFD). */
const utf8 = (s: string) => Buffer.from(s).toString('utf8');
const asStored = (r: EventRow): EventRow => ({
  ...r,
  properties: utf8(r.properties),
  prop_keys: r.prop_keys.map(utf8),
  prop_values: r.prop_values.map(utf8),
});
const expected = (rows: EventRow[]) => rows.map(asStored).sort(byName);

t.test('messages of every row format in one batch are stored alike, every column exact', async (t) => {
  const ws = await bootstrap();
  const tenant = ws.tenant_id;
  const [b1, b2, b3, b4] = [uuidv7(), uuidv7(), uuidv7(), uuidv7()];
  const binary = eventRows(tenant, b1, 5, 'binary');
  const json = eventRows(tenant, b2, 4, 'json', 'JSONEachRow');
  const v1 = eventRows(tenant, b4, 4, 'v1', ROW_BINARY_V1);
  const billing: BillingRow[] = [null, 19.99].map((amount, i) => ({
    tenant_id: tenant,
    customer_id: uuidv7(),
    event_type: 'payment_failed',
    amount,
    currency: 'EUR',
    status: 'pending',
    ts: now - i,
    ts_ms: 5,
    event_id: uuidv7(),
    batch_id: b3,
    received_at: now,
  }));
  await publish(js, subjects.usage(tenant), rowBinary('events', binary), { id: b1, rows: 5, format: ROW_BINARY_V2 });
  await publish(js, subjects.usage(tenant), jsonRows(json), { id: b2, rows: 4 });
  await publish(js, subjects.usage(tenant), rowBinary('events', v1, ROW_BINARY_V1), {
    id: b4,
    rows: 4,
    format: ROW_BINARY_V1,
  });
  await publish(js, subjects.billing(tenant), rowBinary('billing_events', billing), {
    id: b3,
    rows: 2,
    format: ROW_BINARY_V2,
  });
  await startTier(t, 'processors', { WRITER_BATCH_MS: '300', ...nats.env });
  await waitFor('all rows stored', async () => (await countOf('events', tenant)) === 13, 30_000);
  const stored = await storedEvents(tenant);
  t.same(stored, expected([...binary, ...json, ...v1]), 'every column as published');
  t.same(
    stored.map((r) => propertiesText(r)),
    stored.map((r) => {
      const [tag, i] = r.event_name.split('_');
      return JSON.stringify(propsOf(Number(i), tag === 'json' ? 'JSONEachRow' : ROW_BINARY_V2));
    }),
    'the raw JSON of every row reads back as sent, whichever format stored it',
  );
  t.same(
    stored.filter((r) => r.properties !== '').map((r) => r.event_name),
    [...json, ...v1]
      .map((r) => r.event_name)
      .concat('binary_3')
      .sort(),
    'v2 rows keep the raw JSON only where a lone surrogate needs it',
  );
  await waitFor('billing rows stored', async () => (await countOf('billing_events', tenant)) === 2, 30_000);
  const bill = await ch<{ amount: number | null; currency: string; e: string }>(
    `SELECT amount, currency, toString(event_id) AS e FROM billing_events WHERE tenant_id = '${tenant}' ORDER BY ts`,
  );
  t.same(
    bill,
    [...billing].reverse().map((b) => ({ amount: b.amount, currency: 'EUR', e: b.event_id })),
    'a NULL amount and a number',
  );
  const ledger = await ch<{ b: string; n: string }>(
    `SELECT toString(batch_id) AS b, sum(rows) AS n FROM batch_ledger WHERE batch_id IN ('${b1}', '${b2}', '${b3}', '${b4}')
     GROUP BY b ORDER BY b`,
  );
  t.same(
    ledger.map((r) => [r.b, Number(r.n)]),
    [
      [b1, 5],
      [b2, 4],
      [b3, 2],
      [b4, 4],
    ].sort(),
    'the batch ledger counts each message once',
  );
});

t.test('a partly stored RowBinary message is completed with its missing rows only', async (t) => {
  const ws = await bootstrap();
  const tenant = ws.tenant_id;
  const batch = uuidv7();
  const rows = eventRows(tenant, batch, 6, 'partial');
  // An earlier insert cut off after two rows, as ClickHouse would have kept them.
  const earlier = await fetch(
    `${urls.CLICKHOUSE_URL}/?query=${encodeURIComponent('INSERT INTO csp.events FORMAT JSONEachRow')}`,
    {
      method: 'POST',
      body: rows
        .slice(0, 2)
        .map((r) => JSON.stringify(r))
        .join('\n'),
    },
  );
  t.ok(earlier.ok, 'two rows stored before');
  await publish(js, subjects.usage(tenant), rowBinary('events', rows), { id: batch, rows: 6, format: ROW_BINARY_V2 });
  await startTier(t, 'processors', { WRITER_BATCH_MS: '20', ...nats.env });
  await waitFor('the message completed', async () => (await countOf('events', tenant)) >= 6, 30_000);
  await waitFor(
    'consumer caught up',
    async () => (await jsm.consumers.info('EVENTS', 'clickhouse-writer-usage')).num_ack_pending === 0,
    20_000,
  );
  t.same(await storedEvents(tenant), expected(rows), 'each row once, as published');
});

t.test('a message ClickHouse cannot read is dead-lettered with its reason; the rest lands', async (t) => {
  const ws = await bootstrap();
  const tenant = ws.tenant_id;
  const [good, future, cut] = [uuidv7(), uuidv7(), uuidv7()];
  const dlqBefore = (await jsm.streams.info('DLQ')).state.messages;
  await publish(js, subjects.usage(tenant), rowBinary('events', eventRows(tenant, good, 3, 'good')), {
    id: good,
    rows: 3,
    format: ROW_BINARY_V2,
  });
  await publish(js, subjects.usage(tenant), Buffer.from('whatever comes next'), {
    id: future,
    rows: 1,
    format: 'RowBinary;v=99',
  });
  const whole = rowBinary('events', eventRows(tenant, cut, 2, 'cut'));
  await publish(js, subjects.usage(tenant), whole.subarray(0, whole.length - 5), {
    id: cut,
    rows: 2,
    format: ROW_BINARY_V2,
  });
  await startTier(t, 'processors', { WRITER_BATCH_MS: '300', ...nats.env });
  await waitFor('the good message stored', async () => (await countOf('events', tenant)) === 3, 30_000);
  const reasons = await waitFor(
    'both dead letters',
    async () => {
      const info = await jsm.streams.info('DLQ');
      if (info.state.messages < dlqBefore + 2) return undefined;
      const out = new Map<string, string>();
      for (let seq = info.state.last_seq; seq >= info.state.first_seq && out.size < 2; seq--) {
        const m = await jsm.streams.getMessage('DLQ', { seq }).catch(() => undefined);
        const id = m?.header.get('Cs-Original-Msg-Id');
        if (id === future || id === cut) out.set(id, m!.header.get('Cs-Dlq-Reason'));
      }
      return out.size === 2 ? out : undefined;
    },
    30_000,
  );
  t.match(reasons.get(future), /unknown row format: RowBinary;v=99/, 'a newer format is not guessed at');
  t.match(reasons.get(cut), /not RowBinary;v=2 rows: row 1: column \w+ runs past the end/, 'a cut payload');
  t.same(
    (await storedEvents(tenant)).map((r) => r.event_name),
    ['good_0', 'good_1', 'good_2'],
    'nothing of the refused messages stored',
  );
});

t.test('rows pass through the writer’s reused buffers unchanged, messages too large for one included', async (t) => {
  const ws = await bootstrap();
  const tenant = ws.tenant_id;
  // 1 to 5 rows per message; with a third row a message carries 6 KB of properties. Inserts of at
  // most 8 KB and one insert stream: every few messages a new batch in one of the writer's two
  // buffers, and a message that does not fit what is left of one is held in a copy of its own.
  const sent: EventRow[] = [];
  for (let k = 0; k < 40; k++) {
    const rows = eventRows(tenant, uuidv7(), 1 + (k % 5), `reuse${String(k).padStart(2, '0')}`);
    sent.push(...rows);
    await publish(js, subjects.usage(tenant), rowBinary('events', rows), {
      id: rows[0].batch_id,
      rows: rows.length,
      format: ROW_BINARY_V2,
    });
  }
  await startTier(t, 'processors', {
    WRITER_BATCH_MS: '20',
    WRITER_BATCH_BYTES: '8192',
    WRITER_INSERT_STREAMS: '1',
    ...nats.env,
  });
  await waitFor('all rows stored', async () => (await countOf('events', tenant)) === sent.length, 30_000);
  t.same(await storedEvents(tenant), expected(sent), 'every column of every row as published');
});
