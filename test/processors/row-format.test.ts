import { connect, headers, type JetStreamClient } from 'nats';
import t from 'tap';
import { uuidv7 } from '../../lib/ids.js';
import { columnsOf, FORMAT_HEADER, ROW_BINARY_V1, RowBinaryWriter } from '../../lib/row-binary.js';
import { subjects } from '../../lib/nats.js';
import type { BillingRow, EventRow } from '../../schemas/rows.js';
import { bootstrap, ch, startTier, urls, waitFor } from '../helpers/stack.js';

// Messages of both row formats reach the writer: RowBinary (Cs-Format: RowBinary;v=1) and the
// first format, JSONEachRow rows without the header, which a stream upgraded in place still holds.
// Each is published here as a publisher of that format writes it.

const nc = await connect({ servers: urls.NATS_URL });
t.teardown(() => nc.close());
const js = nc.jetstream();
const jsm = await nc.jetstreamManager();
const now = Math.floor(Date.now() / 1000);

function eventRows(tenant: string, batch: string, n: number, tag: string): EventRow[] {
  return Array.from({ length: n }, (_, i) => {
    const props: Record<string, unknown> = { plan: i % 2 ? 'pro' : 'frée', n: i, nested: { a: [1, 'x'] } };
    if (i === 2) props.long = 'ü'.repeat(3000);
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
      properties: JSON.stringify(props),
      prop_keys: Object.keys(props),
      prop_values: Object.values(props).map((v) => (typeof v === 'string' ? v : JSON.stringify(v))),
      user_email: i === 4 ? 'zoë@example.com' : '',
      user_external_id: '',
    };
  });
}

function rowBinary(table: 'events' | 'billing_events', rows: object[]): Buffer {
  const w = new RowBinaryWriter(64);
  for (const r of rows) w.row(columnsOf(ROW_BINARY_V1, table), r as Record<string, unknown>);
  return w.take();
}

const jsonRows = (rows: object[]) => Buffer.from(rows.map((r) => JSON.stringify(r)).join(','));

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
  product_code, surface, external_id, properties, prop_keys, prop_values, user_email, user_external_id`;

async function storedEvents(tenant: string): Promise<EventRow[]> {
  return ch<EventRow>(`SELECT ${EVENT_SELECT} FROM events WHERE tenant_id = '${tenant}' ORDER BY event_name`);
}

async function countOf(table: string, tenant: string): Promise<number> {
  const [r] = await ch<{ c: string }>(`SELECT count() AS c FROM ${table} WHERE tenant_id = '${tenant}'`);
  return Number(r.c);
}

const byName = (a: EventRow, b: EventRow) => (a.event_name < b.event_name ? -1 : 1);

t.test('RowBinary and JSONEachRow messages in one batch are stored alike, every column exact', async (t) => {
  const ws = await bootstrap();
  const tenant = ws.tenant_id;
  const [b1, b2, b3] = [uuidv7(), uuidv7(), uuidv7()];
  const binary = eventRows(tenant, b1, 5, 'binary');
  const json = eventRows(tenant, b2, 4, 'json');
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
  await publish(js, subjects.usage(tenant), rowBinary('events', binary), { id: b1, rows: 5, format: ROW_BINARY_V1 });
  await publish(js, subjects.usage(tenant), jsonRows(json), { id: b2, rows: 4 });
  await publish(js, subjects.billing(tenant), rowBinary('billing_events', billing), {
    id: b3,
    rows: 2,
    format: ROW_BINARY_V1,
  });
  await startTier(t, 'processors', { WRITER_BATCH_MS: '300' });
  await waitFor('all rows stored', async () => (await countOf('events', tenant)) === 9, 30_000);
  t.same(await storedEvents(tenant), [...binary, ...json].sort(byName), 'every column as published');
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
    `SELECT toString(batch_id) AS b, sum(rows) AS n FROM batch_ledger WHERE batch_id IN ('${b1}', '${b2}', '${b3}')
     GROUP BY b ORDER BY b`,
  );
  t.same(
    ledger.map((r) => [r.b, Number(r.n)]),
    [
      [b1, 5],
      [b2, 4],
      [b3, 2],
    ],
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
  await publish(js, subjects.usage(tenant), rowBinary('events', rows), { id: batch, rows: 6, format: ROW_BINARY_V1 });
  await startTier(t, 'processors', { WRITER_BATCH_MS: '20' });
  await waitFor('the message completed', async () => (await countOf('events', tenant)) >= 6, 30_000);
  await waitFor(
    'consumer caught up',
    async () => (await jsm.consumers.info('EVENTS', 'clickhouse-writer-usage')).num_ack_pending === 0,
    20_000,
  );
  t.same(await storedEvents(tenant), rows.sort(byName), 'each row once, as published');
});

t.test('a message ClickHouse cannot read is dead-lettered with its reason; the rest lands', async (t) => {
  const ws = await bootstrap();
  const tenant = ws.tenant_id;
  const [good, future, cut] = [uuidv7(), uuidv7(), uuidv7()];
  const dlqBefore = (await jsm.streams.info('DLQ')).state.messages;
  await publish(js, subjects.usage(tenant), rowBinary('events', eventRows(tenant, good, 3, 'good')), {
    id: good,
    rows: 3,
    format: ROW_BINARY_V1,
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
    format: ROW_BINARY_V1,
  });
  await startTier(t, 'processors', { WRITER_BATCH_MS: '300' });
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
  t.match(reasons.get(cut), /not RowBinary;v=1 rows: row 1: column \w+ runs past the end/, 'a cut payload');
  t.same(
    (await storedEvents(tenant)).map((r) => r.event_name),
    ['good_0', 'good_1', 'good_2'],
    'nothing of the refused messages stored',
  );
});
