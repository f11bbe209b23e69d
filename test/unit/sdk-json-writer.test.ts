import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from '#tap';
import { IngestClient } from '../../sdk/src/client.js';
import { NO_ROOM, NOT_PLAIN, writeJson } from '../../sdk/src/json-writer.js';
import { BatchQueue, BODY_OVERHEAD } from '../../sdk/src/queue.js';
import { Random } from '../../infra/demo/random.js';

/**
 * The producer client writes events as JSON without JSON.stringify: what it writes must be the very
 * bytes JSON.stringify's string takes in UTF-8, and what it cannot write exactly it must leave to
 * JSON.stringify (NOT_PLAIN). Held on generated values of every kind an event may carry.
 */

/** A seeded generator (infra/demo/random.ts), so a failure can be replayed. */
function rng(seed: number): () => number {
  const r = new Random(seed);
  return () => r.next();
}

const UNITS = [
  ...'abcXYZ019 _-./:@',
  '"',
  '\\',
  '\n',
  '\t',
  '\r',
  '\b',
  '\f',
  '\u007f',
  'é',
  'ß',
  '€',
  '中',
  '\uffff',
  '😀',
  '\u0000',
  '\u0001',
  '\u001f',
  '\ud800',
  '\udfff',
];

/** Every character a JSON string holds as it is. */
const PRINTABLE = Array.from({ length: 0x5f }, (_, i) => String.fromCharCode(0x20 + i)).filter(
  (c) => c !== '"' && c !== '\\',
);

function gen(r: () => number, depth = 0): unknown {
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)];
  // Now and then a long one, mostly printable ASCII: what the writer copies whole, unless one unit needs care.
  const str = () =>
    r() < 0.15
      ? Array.from({ length: 40 + Math.floor(r() * 160) }, () => (r() < 0.995 ? pick(PRINTABLE) : pick(UNITS))).join('')
      : Array.from({ length: Math.floor(r() * 12) }, () => pick(UNITS)).join('');
  const k = Math.floor(r() * (depth > 3 ? 5 : 9));
  switch (k) {
    case 0:
      return str();
    case 1:
      return pick([
        0,
        -0,
        1,
        -1,
        42,
        0.1,
        1e21,
        1e-7,
        -1.5e300,
        2 ** 53,
        Number.MAX_VALUE,
        Number.MIN_VALUE,
        r() * 1e6,
        Math.floor(r() * 2 ** 32) - 2 ** 31,
        Math.floor(r() * 1000),
        -(2 ** 31),
        2 ** 31 - 1,
        2 ** 31,
      ]);
    case 2:
      return pick([true, false, null, Number.NaN, Number.POSITIVE_INFINITY]);
    case 3:
      return pick([undefined, () => 1, Symbol('s')]);
    case 4:
      return pick([new Date(Date.UTC(2026, 10, 27, 12, 0, 0, Math.floor(r() * 1000))), new Date(Number.NaN)]);
    case 5:
    case 6: {
      const o: Record<string, unknown> = r() < 0.1 ? Object.create(null) : {};
      for (let i = Math.floor(r() * 5); i > 0; i--) o[pick([str(), String(i), 'event_name', 'x'])] = gen(r, depth + 1);
      return o;
    }
    default: {
      const a = Array.from({ length: Math.floor(r() * 4) }, () => gen(r, depth + 1));
      if (r() < 0.1) a.length += 2; // holes
      return a;
    }
  }
}

/** writeJson's bytes for `v`, or its code. */
function written(v: unknown, size = 1 << 16): Buffer | number {
  const buf = Buffer.alloc(size);
  const end = writeJson(v, buf, 3, size);
  return end < 0 ? end : buf.subarray(3, end);
}

t.test('the bytes of JSON.stringify, or NOT_PLAIN, on generated values', async (t) => {
  const r = rng(35);
  let same = 0;
  let left = 0;
  for (let i = 0; i < 30_000; i++) {
    const v = { event: gen(r) };
    const got = written(v);
    const json = JSON.stringify(v);
    if (got === NOT_PLAIN) {
      left++;
      continue;
    }
    if (!(got instanceof Buffer) || !got.equals(Buffer.from(json))) {
      t.fail(`differs for ${json}: ${String(got)}`);
      return;
    }
    same++;
  }
  t.ok(same > 10_000, `${same} written as JSON.stringify writes them`);
  t.ok(left > 1000, `${left} left to JSON.stringify`);
});

t.test('what is left to JSON.stringify', async (t) => {
  class Point {
    x = 1;
  }
  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  let deep: unknown = 1;
  for (let i = 0; i < 40; i++) deep = { d: deep };
  const cases: Array<[string, unknown]> = [
    ['NUL, written \\u0000', 'a\u0000b'],
    ['another control character', '\u0001'],
    ['an unpaired high surrogate', 'a\ud800'],
    ['an unpaired low surrogate', '\udc00b'],
    ['an unpaired surrogate in a key', { '\ud800': 1 }],
    ['a BigInt', 1n],
    ['a class instance', new Point()],
    ['a Map', new Map()],
    ['a boxed string', Object('x')],
    ['an object with toJSON', { toJSON: () => 'x' }],
    ['a Date with its own toJSON', Object.assign(new Date(0), { toJSON: () => 'x' })],
    ['a cycle', cycle],
    ['a value nested past the depth limit', deep],
  ];
  for (const [what, v] of cases) t.equal(written({ v }), NOT_PLAIN, what);
  const getter = {
    get boom(): string {
      throw new Error('no');
    },
  };
  Object.defineProperty(Object.prototype, 'inherited', { value: 1, enumerable: true, configurable: true });
  try {
    t.equal(written({ a: 1 }), NOT_PLAIN, 'an enumerable property on Object.prototype (JSON.stringify leaves it out)');
    t.same(
      written(Object.assign(Object.create(null), { a: 1 })),
      Buffer.from('{"a":1}'),
      'no prototype: not concerned',
    );
  } finally {
    delete (Object.prototype as Record<string, unknown>).inherited;
  }
  t.same(written({ a: 1 }), Buffer.from('{"a":1}'));
  t.throws(() => written(getter), /no/, 'a getter that throws: the caller falls back, and JSON.stringify throws');
});

t.test('the bytes of every character class, next to the two-character escapes', async (t) => {
  const v = { s: 'a"b\\c\nd\te\rf\bg\fh\u007fé€😀中', n: [-0, 1e21, 1e-7, Number.NaN], d: new Date(0), u: undefined };
  t.same(written(v), Buffer.from(JSON.stringify(v)));
  t.same(written([undefined, () => 1, Symbol('x'), null]), Buffer.from('[null,null,null,null]'));
  // Long strings: copied whole when nothing in them needs care, else written unit by unit.
  const long = 'lorem ipsum dolor sit amet, consectetur adipiscing elit; sed do eiusmod tempor';
  for (const tail of ['', '"', '\\', '\n', '\u007f', 'é', '😀'])
    t.same(
      written({ s: long + tail }),
      Buffer.from(JSON.stringify({ s: long + tail })),
      `long${tail ? ` ending in ${JSON.stringify(tail)}` : ''}`,
    );
  t.equal(written({ s: `${long}\ud800` }), NOT_PLAIN, 'a long one with an unpaired surrogate');
  t.equal(written({ s: `${long}\u0001` }), NOT_PLAIN, 'a long one with a control character');
});

t.test('NO_ROOM instead of writing past the limit', async (t) => {
  const v = { event_name: 'page_view', properties: { note: 'x'.repeat(100) } };
  const json = Buffer.from(JSON.stringify(v));
  const buf = Buffer.alloc(json.length + 400, 0xaa);
  for (let limit = 0; limit < json.length + 400; limit++) {
    buf.fill(0xaa);
    const end = writeJson(v, buf, 0, limit);
    if (end >= 0) {
      t.ok(end <= limit && buf.subarray(0, end).equals(json), `complete within ${limit}`);
      t.ok(limit >= json.length);
      break;
    }
    t.equal(end, NO_ROOM);
    t.ok(
      buf.subarray(limit).every((x) => x === 0xaa),
      `nothing written past ${limit}`,
    );
  }
});

t.test('through the client: the service reads what JSON.stringify would have sent, refusals as before', async (t) => {
  const bodies: string[] = [];
  const srv = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push(Buffer.concat(chunks).toString());
      res.writeHead(202, { 'content-type': 'application/json' });
      res.end('{"errors":[]}');
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    srv.closeAllConnections();
    srv.close();
  });
  const c = new IngestClient<Record<string, unknown>>({
    url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`,
    surface: 'a',
    apiKey: 'k',
    gzip: false,
    maxBatchBytes: 2000,
  });
  const rejected: string[] = [];
  c.on('rejected', (e, p) => rejected.push(`${String(e.user_id)}:${p.code}`));
  const sent = [
    { user_id: 'plain', properties: { n: 1.5, ok: true, none: null, list: [1, 'two', undefined] } },
    { user_id: 'text', properties: { note: 'café "quoted"\n€ 😀 \u0001' } },
    { user_id: 'date', timestamp: new Date(Date.UTC(2026, 10, 27)), properties: { at: new Date(0) } },
    { user_id: 'class', properties: { m: new Map([[1, 2]]), u: new URL('http://x/') } },
    { user_id: 'big', properties: { note: 'x'.repeat(1500) } },
  ];
  for (const e of sent) t.ok(c.track({ event_name: 'page_view', customer_id: 'c', ...e }), String(e.user_id));
  t.notOk(c.track({ event_name: 'page_view', customer_id: 'c', user_id: 'bigint', properties: { n: 1n } }));
  t.notOk(c.track({ event_name: 'page_view', customer_id: 'c', user_id: 'nul', properties: { s: 'a\u0000' } }));
  t.notOk(c.track({ event_name: 'page_view', customer_id: 'c', user_id: 'lone', properties: { s: '\ud800' } }));
  t.notOk(c.track({ event_name: 'page_view', customer_id: 'c', user_id: 'huge', properties: { s: 'y'.repeat(2000) } }));
  await c.close();
  t.same(rejected, ['bigint:invalid_event', 'nul:invalid_unicode', 'lone:invalid_unicode', 'huge:event_too_large']);
  const events = bodies.flatMap((b) => JSON.parse(b).events);
  t.equal(bodies.length, 2, 'the large event did not fit the first body');
  t.same(
    bodies.join('|'),
    [sent.slice(0, 4), sent.slice(4)]
      .map((es) => JSON.stringify({ events: es.map((e) => ({ event_name: 'page_view', customer_id: 'c', ...e })) }))
      .join('|'),
    'the bodies JSON.stringify would have made',
  );
  t.equal(events.length, 5);
});

t.test('a queue fed by write() holds the batches push() would, byte for byte', async (t) => {
  const r = rng(5);
  for (const maxBytes of [300, 2000, 1_000_000]) {
    const written = new BatchQueue<Record<string, unknown>>(20, maxBytes);
    const pushed = new BatchQueue<Record<string, unknown>>(20, maxBytes);
    let fallbacks = 0;
    let mismatches = 0;
    for (let i = 0; i < 2000; i++) {
      const e = { i, pad: 'é'.repeat(Math.floor(r() * 80)), v: gen(r) };
      const json = JSON.stringify(e);
      const bytes = Buffer.byteLength(json);
      if (bytes + BODY_OVERHEAD > maxBytes) continue;
      pushed.push(e, json, bytes);
      if (written.write(e) < 0) {
        fallbacks++;
        written.push(e, json, bytes);
      }
      if (written.queued !== pushed.queued) mismatches++;
    }
    t.equal(mismatches, 0, 'as many events queued after each one');
    written.seal();
    pushed.seal();
    const bodies = (q: BatchQueue<Record<string, unknown>>) => {
      const out: string[] = [];
      for (let b = q.take(); b; b = q.take()) out.push(b.body().toString('latin1'));
      return out;
    };
    const w = bodies(written);
    const p = bodies(pushed);
    // write() may seal a batch a little early near maxBytes (its bound is 3 bytes a unit): the
    // events and their order are the same, and no body passes maxBytes.
    t.same(
      w.map((b) => JSON.parse(Buffer.from(b, 'latin1').toString())).flatMap((b) => b.events),
      p.map((b) => JSON.parse(Buffer.from(b, 'latin1').toString())).flatMap((b) => b.events),
      `maxBytes ${maxBytes}: the same events`,
    );
    t.ok(
      w.every((b) => b.length <= maxBytes),
      `maxBytes ${maxBytes}: within the bound`,
    );
    if (maxBytes === 1_000_000) t.same(w, p, 'far from the bound: the very same bodies');
    t.ok(fallbacks > 0 && fallbacks < 2000, `${fallbacks} left to JSON.stringify`);
  }
});
