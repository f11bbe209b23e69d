import t from '#tap';
import { BufferPool } from '../../lib/buffer-pool.js';
import { sampleEventRow } from '../helpers/rows.js';
import { decodeRows, RowBinaryWriter, ROW_BINARY_V2, columnsOf } from '../../lib/row-binary.js';

t.test('a buffer given back is handed out again, once, to a request of its size class', async (t) => {
  const pool = new BufferPool(1024, 8192, 64 * 1024);
  const a = pool.take(1000);
  t.equal(a.length, 1024, 'the smallest class that holds the request');
  t.equal(pool.take(5000).length, 8192);
  pool.give(a.subarray(10, 20)); // a view of it is enough
  pool.give(a); // twice: ignored
  const b = pool.take(900);
  t.equal(b.buffer, a.buffer, 'the same memory');
  t.not(pool.take(900).buffer, a.buffer, 'not handed out twice');
});

t.test('buffers it did not allocate, and requests past its largest class, stay outside it', async (t) => {
  const pool = new BufferPool(1024, 4096, 64 * 1024);
  const foreign = Buffer.allocUnsafeSlow(1024);
  pool.give(foreign);
  t.not(pool.take(1024).buffer, foreign.buffer, 'a foreign buffer is never handed out');
  const big = pool.take(10_000);
  t.equal(big.length, 10_000);
  pool.give(big);
  t.not(pool.take(10_000).buffer, big.buffer);
});

t.test('idle memory is bounded', async (t) => {
  const pool = new BufferPool(1024, 1024, 2048);
  const [a, b, c] = [pool.take(1024), pool.take(1024), pool.take(1024)];
  for (const x of [a, b, c]) pool.give(x);
  const again = new Set([pool.take(1024).buffer, pool.take(1024).buffer, pool.take(1024).buffer]);
  t.ok(again.has(a.buffer) && again.has(b.buffer), 'two kept');
  t.notOk(again.has(c.buffer), 'the third was dropped');
});

t.test('a writer that outgrows its pooled buffer hands it back and keeps every row', async (t) => {
  const pool = new BufferPool(1024, 4096, 64 * 1024);
  const columns = columnsOf(ROW_BINARY_V2, 'events');
  const w = new RowBinaryWriter(1024, pool);
  const first = pool.take(1024);
  pool.give(first);
  const row = sampleEventRow(0, { external_customer_id: 'x'.repeat(300) });
  for (let i = 0; i < 20; i++) w.row(columns, { ...row, ts_ms: i });
  const out = w.take();
  t.ok(out.length > 4096, 'past the largest class');
  const rows = decodeRows(out, columns);
  t.equal(rows.length, 20);
  t.same(
    rows.map((r) => r.ts_ms),
    Array.from({ length: 20 }, (_, i) => i),
  );
});
