import t from '#tap';
import { BatchQueue, BODY_OVERHEAD } from '../../sdk/src/queue.js';

interface Ev {
  i: number;
  p: string;
}

const ev = (i: number, pad = 0) => {
  const e: Ev = { i, p: 'x'.repeat(pad) };
  const json = JSON.stringify(e);
  return [e, json, Buffer.byteLength(json)] as const;
};

t.test('a batch is sealed at maxEvents; batches are taken oldest first', async (t) => {
  const q = new BatchQueue<Ev>(3, 1_000_000);
  for (let i = 0; i < 7; i++) q.push(...ev(i));
  t.equal(q.queued, 7);
  t.equal(q.waiting, 2);
  const a = q.take()!;
  t.same(
    a.events.map((e) => e.i),
    [0, 1, 2],
  );
  t.equal(q.take()!.seq, 1);
  t.equal(q.take(), undefined, 'the open batch waits for its timer or a flush');
  q.seal();
  t.same(
    q.take()!.events.map((e) => e.i),
    [6],
  );
  t.equal(q.queued, 0);
});

t.test("a batch's body never exceeds maxBytes, and its byte count is exact", async (t) => {
  const q = new BatchQueue<Ev>(1000, 2000);
  for (let i = 0; i < 100; i++) q.push(...ev(i, (i * 37) % 300));
  q.seal();
  let n = 0;
  for (let b = q.take(); b; b = q.take()) {
    const body = b.body().toString();
    t.equal(Buffer.byteLength(body), b.bytes);
    t.ok(b.bytes <= 2000, `${b.bytes} <= 2000`);
    t.same(JSON.parse(body).events.length, b.size);
    n += b.size;
  }
  t.equal(n, 100);
  t.equal(BODY_OVERHEAD, Buffer.byteLength('{"events":[]}'));
});

t.test('a split keeps the events, their order and the place in the sequence', async (t) => {
  const q = new BatchQueue<Ev>(10, 1_000_000);
  for (let i = 0; i < 10; i++) q.push(...ev(i, i));
  const b = q.take()!;
  const [l, r] = [b.slice(0, 5), b.slice(5, 10)];
  t.equal(l.seq, b.seq);
  const events = (x: typeof b) => JSON.parse(x.body().toString()).events;
  t.same(events(l).concat(events(r)), events(b));
  t.equal(l.bytes + r.bytes - BODY_OVERHEAD + 1, b.bytes);
});

t.test('taking many batches neither shifts nor keeps the taken ones', async (t) => {
  const q = new BatchQueue<Ev>(1, 1_000_000);
  for (let i = 0; i < 5000; i++) q.push(...ev(i));
  let inOrder = true;
  for (let i = 0; i < 5000; i++) inOrder &&= q.take()!.events[0].i === i;
  t.ok(inOrder, 'taken in order');
  t.equal(q.waiting, 0);
  t.equal(q.lowestSeq, Number.POSITIVE_INFINITY);
});

t.test('bodies are the JSON given, byte for byte, whatever the buffer had to grow to', async (t) => {
  const q = new BatchQueue<Ev>(50, 1_000_000);
  const jsons: string[] = [];
  for (let i = 0; i < 50; i++) {
    // Multi-byte characters, and events larger than the first buffer, so that it grows.
    const e = { i, p: i % 7 === 0 ? 'é😀'.repeat(3000 + i) : `x${i}` };
    const json = JSON.stringify(e);
    jsons.push(json);
    q.push(e, json, Buffer.byteLength(json));
  }
  const b = q.take()!;
  const body = b.body();
  t.equal(body.length, b.bytes);
  t.equal(body.toString(), `{"events":[${jsons.join(',')}]}`);
  t.equal(b.slice(3, 9).body().toString(), `{"events":[${jsons.slice(3, 9).join(',')}]}`);
  t.equal(b.slice(0, 1).body().toString(), `{"events":[${jsons[0]}]}`);
  t.equal(b.body().toString(), body.toString(), 'a slice leaves the batch as it was');
});

t.test("a resolved batch's buffer serves a later batch, whose body is its own", async (t) => {
  const q = new BatchQueue<Ev>(3, 1_000_000);
  for (let i = 0; i < 3; i++) q.push(...ev(i, 50));
  const first = q.take()!;
  const before = first.body();
  q.recycle(first);
  for (let i = 3; i < 6; i++) q.push(...ev(i, 2));
  const second = q.take()!;
  const body = second.body();
  t.equal(body.buffer, before.buffer, 'the same memory');
  t.same(
    JSON.parse(body.toString()).events.map((e: Ev) => e.i),
    [3, 4, 5],
  );
  t.equal(body.length, second.bytes);
  t.throws(() => first.body(), 'a recycled batch has no body any more');
});
