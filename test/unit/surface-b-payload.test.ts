import t from '#tap';
import { BufferPool } from '../../lib/buffer-pool.js';
import { decodeRows, EVENT_ROW_COLUMNS, RowBinaryWriter } from '../../lib/row-binary.js';
import { payloadOf, type PreparedB, release } from '../../ingest/surface-b/events.js';
import { preparedRows, sampleEventRow } from '../helpers/rows.js';

// Surface B writes a request's rows once, before deduplication; what is published is those rows
// minus the ones whose key PostgreSQL had already recorded, byte for byte.
const customer = (i: number) => `ffffffff-0000-4000-8000-00000000000${i}`;
const rows = [
  sampleEventRow(0, { event_name: 'login', external_id: 'a', customer_id: customer(0) }),
  sampleEventRow(1, { event_name: 'page_view', external_id: 'b', customer_id: customer(1) }),
  sampleEventRow(2, { event_name: 'export', external_id: '', customer_id: customer(2) }),
  sampleEventRow(3, { event_name: 'login', external_id: 'c', customer_id: customer(3) }),
];
const prepared = (pool?: BufferPool): PreparedB => {
  const p: PreparedB = {
    accepted: rows.length,
    errors: [],
    ...preparedRows(rows),
    // Row 2 has no external_id; the others have keys 0, 1, 2.
    rowKey: Int32Array.from([0, 1, -1, 2]),
    keyCustomers: ['c0', 'c1', 'c3'],
    keyExternal: ['a', 'b', 'c'],
    inBatchDuplicates: 0,
  };
  if (pool) {
    const copy = pool.take(p.rows.length).subarray(0, p.rows.length);
    p.rows.copy(copy);
    p.rows = copy;
  }
  return p;
};

t.test('a recorded key drops its row; the rest go out as written, the rows kept as they were', async (t) => {
  const p = prepared();
  const before = Buffer.from(p.rows);
  const out = payloadOf(p, Uint8Array.from([1, 0, 1]));
  t.equal(out.stored, 3);
  t.same(decodeRows(out.payload, EVENT_ROW_COLUMNS), [rows[0], rows[2], rows[3]]);
  t.same(out.names.sort(), ['export', 'login'], 'page_view only came with the dropped row');
  t.ok(p.rows.equals(before), 'the prepared rows are untouched');
  t.equal(p.rowsTaken, false);
  const again = payloadOf(p, Uint8Array.from([1, 0, 1]));
  t.ok(again.payload.equals(out.payload), 'a retried transaction computes the same payload');
});

t.test('when nothing is dropped the prepared buffer itself is the payload', async (t) => {
  for (const fresh of [null, Uint8Array.from([1, 1, 1])]) {
    const p = prepared();
    const out = payloadOf(p, fresh);
    t.equal(out.payload, p.rows);
    t.equal(out.stored, 4);
    t.same(out.names.sort(), ['export', 'login', 'page_view']);
    t.equal(p.rowsTaken, true);
  }
});

t.test('every keyed row a duplicate: only the row without a key is stored', async (t) => {
  const out = payloadOf(prepared(), new Uint8Array(3));
  t.same(decodeRows(out.payload, EVENT_ROW_COLUMNS), [rows[2]]);
  const w = new RowBinaryWriter(64);
  w.row(EVENT_ROW_COLUMNS, rows[2]);
  t.ok(out.payload.equals(w.take()));
});

t.test('the rows buffer goes back to the pool unless it was published', async (t) => {
  const pool = new BufferPool(1024, 4096);
  const copied = prepared(pool);
  payloadOf(copied, Uint8Array.from([0, 1, 1]), pool);
  release(copied, pool);
  t.equal(pool.take(copied.rows.buffer.byteLength).buffer, copied.rows.buffer, 'handed back: the next take reuses it');

  const taken = prepared(pool);
  payloadOf(taken, null, pool);
  release(taken, pool);
  t.not(pool.take(taken.rows.buffer.byteLength).buffer, taken.rows.buffer, 'the publisher owns it now');
});
