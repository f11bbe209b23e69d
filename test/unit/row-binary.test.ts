import t from '#tap';
import {
  columnsOf,
  decodeRows,
  fitsDateTime,
  formatOf,
  readUuid,
  ROW_BINARY_V1,
  ROW_BINARY_V2,
  RowBinaryWriter,
  rowSpans,
} from '../../lib/row-binary.js';
import { sampleBillingRow, sampleEventRow } from '../helpers/rows.js';

/** What a string reads back as once written as UTF-8: a lone surrogate becomes U+FFFD. */
const utf8 = (s: string) => Buffer.from(s).toString('utf8');

const columns = columnsOf(ROW_BINARY_V2, 'events');

const row = sampleEventRow;

t.test('a UUID goes as two little-endian halves and reads back in lowercase', async (t) => {
  const w = new RowBinaryWriter(4);
  w.uuid('00112233-4455-6677-8899-AABBCCDDEEFF');
  const b = w.take();
  t.same([...b], [0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00, 0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88]);
  t.equal(readUuid(b, 0), '00112233-4455-6677-8899-aabbccddeeff');
  t.equal(w.length, 0, 'take empties the writer');
});

t.test('strings carry their UTF-8 length as LEB128, at every size', async (t) => {
  for (const s of ['', 'a', 'é'.repeat(42), 'x'.repeat(127), 'x'.repeat(128), '€'.repeat(43), 'y'.repeat(20_000)]) {
    const w = new RowBinaryWriter(1);
    w.string(s);
    const b = w.take();
    const n = Buffer.byteLength(s);
    let len = 0;
    let mul = 1;
    let at = 0;
    for (;;) {
      const x = b[at++];
      len += (x & 0x7f) * mul;
      mul *= 128;
      if (x < 0x80) break;
    }
    t.equal(len, n, `length of a ${s.length}-character string`);
    t.equal(b.subarray(at).toString('utf8'), s, 'then its bytes');
  }
});

t.test('rows are walked back with their byte ranges and event ids', async (t) => {
  const w = new RowBinaryWriter(16);
  const rows = [
    row(1),
    row(2, { prop_keys: ['plan', 'n'], prop_values: ['pro', '1'], prop_kinds: 'sj' }),
    row(3, {
      user_email: 'ünïcode@example.com',
      prop_keys: ['long'],
      prop_values: ['z'.repeat(5000)],
      prop_kinds: 's',
    }),
    row(4, { properties: '{"k\\ud800":1}', prop_keys: ['k\ud800'], prop_values: ['1'], prop_kinds: 'j' }),
  ];
  const ends: number[] = [];
  for (const r of rows) {
    w.row(columns, r);
    ends.push(w.length);
  }
  const payload = w.take();
  const spans = rowSpans(payload, columns);
  t.same(
    spans.map((s) => [s.start, s.end, s.eventId]),
    rows.map((r, i) => [i ? ends[i - 1] : 0, ends[i], r.event_id]),
  );
  t.same(rowSpans(Buffer.alloc(0), columns), [], 'an empty payload has no rows');
  t.same(
    decodeRows(payload, columns),
    rows.map((r) => ({ ...r, customer_id: r.customer_id.toLowerCase(), prop_keys: r.prop_keys.map(utf8) })),
    'and decoded to the values written, UUIDs in lowercase',
  );
});

t.test('a payload cut short or with a malformed length is refused with the row and column', async (t) => {
  const w = new RowBinaryWriter();
  w.row(columns, row(1));
  w.row(columns, row(2));
  const payload = w.take();
  t.throws(() => rowSpans(payload.subarray(0, payload.length - 3), columns), {
    name: 'RowBinaryError',
    message: /^row 1: column user_email runs past the end/,
  });
  const bad = Buffer.concat([payload, Buffer.alloc(16), Buffer.alloc(16), Buffer.from([0xff, 0xff, 0xff, 0xff])]);
  t.throws(() => rowSpans(bad, columns), /row 2: column event_name/);
});

t.test('billing rows: a NULL amount is one byte, a number nine', async (t) => {
  const billing = columnsOf(ROW_BINARY_V1, 'billing_events');
  const w = new RowBinaryWriter();
  w.row(billing, sampleBillingRow({ amount: null }));
  const a = w.length;
  w.row(billing, sampleBillingRow({ amount: 12.5 }));
  t.equal(w.length - a, a + 8);
  const payload = w.take();
  const spans = rowSpans(payload, billing);
  t.equal(spans.length, 2);
  t.equal(spans[1].eventId, sampleBillingRow().event_id);
  t.same(
    decodeRows(payload, billing).map((r) => r.amount),
    [null, 12.5],
  );
});

t.test('the format header: absent is JSONEachRow, unknown values are not guessed', async (t) => {
  t.equal(formatOf(undefined), 'JSONEachRow');
  t.equal(formatOf(''), 'JSONEachRow');
  t.equal(formatOf(ROW_BINARY_V1), ROW_BINARY_V1);
  t.equal(formatOf(ROW_BINARY_V2), ROW_BINARY_V2);
  t.equal(formatOf('RowBinary;v=9'), undefined);
  t.equal(formatOf('rowbinary;v=1'), undefined);
});

t.test('a v1 payload has no prop_kinds and keeps the raw properties; v2 adds the kinds last', async (t) => {
  const v1 = columnsOf(ROW_BINARY_V1, 'events');
  t.same(
    columns.map(([c]) => c),
    [...v1.map(([c]) => c), 'prop_kinds'],
  );
  const w = new RowBinaryWriter();
  const { prop_kinds: _, ...old } = row(7, { properties: '{"plan":"pro"}', prop_keys: ['plan'], prop_values: ['pro'] });
  w.row(v1, old);
  const [back] = decodeRows(w.take(), v1);
  t.same(back, { ...old, customer_id: old.customer_id.toLowerCase() });
  t.notOk('prop_kinds' in back);
});

t.test('fitsDateTime: the instants a DateTime column holds, and dateTime() refusing the others', async (t) => {
  t.ok(fitsDateTime(0), '1970-01-01T00:00:00Z');
  t.ok(fitsDateTime(Date.parse('2106-02-07T06:28:15Z')), 'its last second');
  t.notOk(fitsDateTime(Date.parse('2106-02-07T06:28:16Z')), 'the second after');
  t.notOk(fitsDateTime(Date.parse('1969-12-31T23:59:59Z')), 'before 1970');
  t.notOk(fitsDateTime(Date.parse('6408-09-18T00:00:00Z')), 'year 6408');
  t.notOk(fitsDateTime(Number.NaN), 'no time at all');
  const w = new RowBinaryWriter(16);
  t.throws(() => w.dateTime(Date.parse('6408-09-18T00:00:00Z') / 1000), RangeError);
});
