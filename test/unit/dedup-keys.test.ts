import t from '#tap';
import { decodeRows, EVENT_ROW_COLUMNS, RowBinaryWriter } from '../../lib/row-binary.js';
import { KeySet } from '../../processors/dedup/key-set.js';
import { murmur3x86128 } from '../../processors/dedup/murmur3.js';
import { KEY_COLUMNS, WorkspaceKeys } from '../../processors/dedup/workspace-keys.js';
import { sampleEventRow } from '../helpers/rows.js';

// Surface B's deduplication keys as the owning writer holds them (processors/dedup/): the first
// event with a (customer_id, external_id) is kept, every later one dropped, events without
// external_id never; a message tried again keeps what it claimed; a released message frees its keys.

const TENANT = '0190f3a2-7b1c-7d4e-8f00-1234567890aa';
const OTHER_TENANT = '0190f3a2-7b1c-7d4e-8f00-1234567890bb';
const C1 = '0190f3a2-7b1c-7d4e-8f00-0000000000c1';
const C2 = '0190f3a2-7b1c-7d4e-8f00-0000000000c2';
const EXT = EVENT_ROW_COLUMNS.findIndex(([c]) => c === 'external_id');

/** RowBinary rows of csp.events for (customer, external_id) pairs; event_name says their place. */
function rows(pairs: Array<[string, string]>, tenant = TENANT): Buffer {
  const w = new RowBinaryWriter(256);
  for (const [i, [customer_id, external_id]] of pairs.entries())
    w.row(EVENT_ROW_COLUMNS, sampleEventRow(i, { tenant_id: tenant, customer_id, external_id }));
  return w.take();
}

/** The event names (places) of the rows kept. */
function keptNames(payload: Buffer, ranges: Array<[number, number]>): string[] {
  const kept = Buffer.concat(ranges.map(([s, e]) => payload.subarray(s, e)));
  return decodeRows(kept, EVENT_ROW_COLUMNS).map((r) => String(r.event_name));
}

t.test("the key hash is MurmurHash3_x86_128: SMHasher's verification value", async (t) => {
  // Keys 0, 0 1, 0 1 2, … (255 bytes) hashed with seeds 256 down to 1; their hashes hashed with seed 0.
  const key = Uint8Array.from({ length: 256 }, (_, i) => i);
  const hashes = new Uint8Array(16 * 256);
  const out = new Uint32Array(4);
  for (let i = 0; i < 256; i++) {
    murmur3x86128(key, 0, i, 256 - i, out);
    hashes.set(new Uint8Array(out.buffer), i * 16);
  }
  murmur3x86128(hashes, 0, hashes.length, 0, out);
  t.equal(out[0].toString(16), 'b3ece62a');
  // A range inside a larger buffer hashes as the same bytes alone.
  const alone = new Uint32Array(4);
  murmur3x86128(key.subarray(3, 40), 0, 37, 9, alone);
  murmur3x86128(key, 3, 40, 9, out);
  t.same([...out], [...alone]);
});

t.test('KeySet holds exactly the keys added and not deleted, through growth and deletions', async (t) => {
  const set = new KeySet();
  const model = new Map<string, [number, number, number, number]>();
  let seed = 7;
  const rnd = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed;
  };
  // Few distinct first words: long clusters, so deletions shift keys across the wrap of the table.
  const key = (): [number, number, number, number] => [rnd() & 0xff, rnd() % 50, 0, rnd() % 3];
  let wrong = 0;
  for (let i = 0; i < 60_000; i++) {
    const k = key();
    const name = k.join(',');
    if (rnd() % 3 === 0) {
      if (set.delete(...k) !== model.delete(name)) wrong++;
    } else if (set.add(...k) !== !model.has(name)) wrong++;
    else model.set(name, k);
  }
  t.equal(wrong, 0, 'add and delete say whether the key was there');
  t.equal(set.size, model.size);
  let missing = 0;
  for (const k of model.values()) if (!set.has(...k)) missing++;
  t.equal(missing, 0, 'every key kept is found');
  let listed = 0;
  set.forEach((a, b, c, d) => {
    if (model.has([a, b, c, d].join(','))) listed++;
  });
  t.equal(listed, model.size, 'forEach lists each key once');
  t.ok(set.has(-1, 0, 0, 3) === set.has(0xffffffff, 0, 0, 3), 'signed and unsigned words are one key');
  t.ok(set.add(0, 0, 0, 0) && set.has(0, 0, 0, 0) && !set.add(0, 0, 0, 0), 'the all-zero key is a key');
  t.ok(set.bytes / set.size <= 43, `${(set.bytes / set.size).toFixed(1)} bytes per key`);
});

t.test('the first occurrence of a key is kept, in the message and across messages', async (t) => {
  const ws = new WorkspaceKeys();
  const first = rows([
    [C1, 'a'],
    [C1, ''],
    [C1, 'a'],
    [C2, 'a'],
    [C1, ''],
    [C1, 'b'],
  ]);
  const r1 = ws.claim(1, first, EVENT_ROW_COLUMNS, EXT);
  t.match(r1, { kept: 5, dropped: 1 });
  t.same(keptNames(first, r1.ranges), ['feature_0', 'feature_1', 'feature_3', 'feature_4', 'feature_5']);
  const second = rows([
    [C1, 'b'],
    [C2, 'b'],
    [C2, 'a'],
  ]);
  const r2 = ws.claim(2, second, EVENT_ROW_COLUMNS, EXT);
  t.same(keptNames(second, r2.ranges), ['feature_1'], 'keys claimed by message 1, landed or not, are dropped');
  t.equal(ws.open, 2);
  ws.landed(1);
  ws.landed(2);
  t.equal(ws.open, 0);
  const other = rows([[C1, 'a']], OTHER_TENANT);
  t.equal(ws.claim(3, other, EVENT_ROW_COLUMNS, EXT).kept, 1, "another workspace's key is another key");
  const longId = 'é'.repeat(128);
  const long = rows([
    [C1, longId],
    [C1, longId],
  ]);
  t.equal(ws.claim(4, long, EVENT_ROW_COLUMNS, EXT).kept, 1, 'an external_id of 128 two-byte characters');
});

t.test('another attempt of a message keeps its own claims; a released message frees them', async (t) => {
  const ws = new WorkspaceKeys();
  const m = rows([
    [C1, 'x'],
    [C1, 'x'],
    [C2, 'y'],
  ]);
  const later = rows([
    [C1, 'x'],
    [C2, 'z'],
  ]);
  t.equal(ws.claim(10, m, EVENT_ROW_COLUMNS, EXT).kept, 2);
  t.same(keptNames(later, ws.claim(11, later, EVENT_ROW_COLUMNS, EXT).ranges), ['feature_1']);
  // Message 10's insert failed: tried again, it keeps the same rows, still once each.
  const again = ws.claim(10, m, EVENT_ROW_COLUMNS, EXT);
  t.same(keptNames(m, again.ranges), ['feature_0', 'feature_2']);
  t.same(keptNames(later, ws.claim(12, later, EVENT_ROW_COLUMNS, EXT).ranges), [], 'a copy of 11 claims nothing');
  ws.release(10);
  const after = rows([
    [C1, 'x'],
    [C2, 'y'],
    [C2, 'z'],
  ]);
  t.same(
    keptNames(after, ws.claim(13, after, EVENT_ROW_COLUMNS, EXT).ranges),
    ['feature_0', 'feature_1'],
    "the released message's keys are claimed anew; 11's stay",
  );
});

t.test('keys loaded from ClickHouse rows deduplicate like claimed ones', async (t) => {
  const w = new RowBinaryWriter(64);
  for (const [customer_id, external_id] of [
    [C1, 'stored-1'],
    [C2, 'stored-2'],
    [C1, ''],
  ])
    w.row(KEY_COLUMNS, { tenant_id: TENANT, customer_id, external_id });
  const ws = new WorkspaceKeys();
  const stored = w.take();
  // As ClickHouse streams them: the second call gets the row the first one's end cut off.
  const first = ws.load(stored.subarray(0, 40));
  t.same(first, { read: 0, added: 0 }, 'a row cut off is left for the next call');
  const second = ws.load(stored.subarray(0, 60));
  const rest = ws.load(stored.subarray(second.read));
  t.equal(second.added + rest.added, 2, 'an empty external_id is no key');
  t.equal(second.read + rest.read, stored.length);
  const m = rows([
    [C1, 'stored-1'],
    [C1, 'stored-2'],
    [C2, 'stored-2'],
  ]);
  t.same(keptNames(m, ws.claim(1, m, EVENT_ROW_COLUMNS, EXT).ranges), ['feature_1']);
});
