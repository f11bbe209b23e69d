import { headers } from 'nats';
import t from '#tap';
import {
  columnsOf,
  decodeRows,
  FORMAT_HEADER,
  ROW_BINARY_V1,
  ROW_BINARY_V2,
  RowBinaryWriter,
  uuidSet,
} from '../../lib/row-binary.js';
import type { RowsMessage } from '../../processors/writer/held.js';
import { withoutCustomers } from '../../processors/writer/payload.js';
import { sampleBillingRow, sampleEventRow } from '../helpers/rows.js';

// The writer leaves rows of erased customers out of its inserts (docs/erasure.md): only those rows
// go, whatever their place in the message, in every row format a message may still be in.
const ERASED = '7e0f4c1a-0000-4000-8000-0000000000e1';
const OTHER_ERASED = '7e0f4c1a-0000-4000-8000-0000000000e2';
const KEPT = '7e0f4c1a-0000-4000-8000-00000000000b';
const erased = { text: new Set([ERASED, OTHER_ERASED]), wire: uuidSet([ERASED, OTHER_ERASED]) };

const message = (data: Buffer, format?: string): RowsMessage => {
  const h = headers();
  if (format) h.set(FORMAT_HEADER, format);
  return { seq: 1, subject: 'ev.usage.x', data, headers: h, redelivered: false };
};

for (const format of [ROW_BINARY_V2, ROW_BINARY_V1] as const) {
  t.test(`${format}: the erased customers' rows go, the others stay byte for byte`, async (t) => {
    const columns = columnsOf(format, 'events');
    // Erased rows first, between kept ones, and last; the upper-case id of a client is the same customer.
    const owners = [ERASED, KEPT, KEPT, OTHER_ERASED.toUpperCase(), KEPT, ERASED];
    const w = new RowBinaryWriter(64);
    for (const [i, customer_id] of owners.entries())
      w.row(columns, sampleEventRow(i, { customer_id, prop_keys: ['plan'], prop_values: ['x'.repeat(i * 50)] }));
    const payload = w.take();
    const r = withoutCustomers(message(payload, format), payload, 'events', erased);
    t.match(r, { rows: 3, dropped: 3 });
    t.same(
      decodeRows(r!.payload, columns).map((x) => [x.customer_id, x.event_name]),
      [
        [KEPT, 'feature_1'],
        [KEPT, 'feature_2'],
        [KEPT, 'feature_4'],
      ],
    );
    w.row(columns, sampleEventRow(0, { customer_id: KEPT }));
    const none = w.take();
    t.equal(withoutCustomers(message(none, format), none, 'events', erased), undefined, 'nothing to drop');
    const all = new RowBinaryWriter(64);
    all.row(columns, sampleEventRow(0, { customer_id: ERASED }));
    const only = all.take();
    t.match(withoutCustomers(message(only, format), only, 'events', erased), { rows: 0, dropped: 1 });
    const cut = payload.subarray(0, payload.length - 3);
    t.throws(() => withoutCustomers(message(cut, format), cut, 'events', erased), {
      name: 'RowBinaryError',
      message: /^row 5 runs past the end/,
    });
  });
}

t.test('billing rows and JSONEachRow rows (messages from before RowBinary)', async (t) => {
  const billing = columnsOf(ROW_BINARY_V2, 'billing_events');
  const w = new RowBinaryWriter();
  w.row(billing, sampleBillingRow({ customer_id: KEPT, amount: null }));
  w.row(billing, sampleBillingRow({ customer_id: ERASED, amount: 12.5 }));
  w.row(billing, sampleBillingRow({ customer_id: KEPT, amount: 3 }));
  const payload = w.take();
  const r = withoutCustomers(message(payload, ROW_BINARY_V2), payload, 'billing_events', erased);
  t.same(
    decodeRows(r!.payload, billing).map((x) => x.amount),
    [null, 3],
  );

  const json = Buffer.from(
    [KEPT, ERASED.toUpperCase(), KEPT].map((customer_id, i) => JSON.stringify({ customer_id, n: i })).join(','),
  );
  const j = withoutCustomers(message(json), json, 'events', erased);
  t.match(j, { rows: 2, dropped: 1 });
  t.same(JSON.parse(`[${j!.payload.toString()}]`), [
    { customer_id: KEPT, n: 0 },
    { customer_id: KEPT, n: 2 },
  ]);
});
